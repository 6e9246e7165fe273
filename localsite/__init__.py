"""The local site's serving: each pod of a deployed stack runs what its containers would (the real router programs,
simulated engines) in a network namespace of its own, behind a stand-in for the Gateway (docs/serving-locally.md).
Standard library, pyyaml and the project's core facts (image names); no Pulumi. What the tests and the benchmarks
run on a site (a stack served on one, the loads, the changes) is `sitetests/`'s, above it."""
