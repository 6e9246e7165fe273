"""CrossGuard policy pack of the Rebel100 serving stack (docs/policies.md).

Rules are pure functions over Kubernetes manifest dicts, one module per concern: `parallelism`
(rules 1-3), `memory` (4-5), `wiring` (6), `hygiene` (7). `catalog` lists them with their
enforcement, `pack` adapts them to pulumi_policy, `__main__` serves the pack.
"""
