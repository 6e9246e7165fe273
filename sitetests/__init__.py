"""What the tests and the benchmarks run on a local site, apart from the site itself (localsite/): a stack served on
a site of its own (`harness.py`), a steady load that counts every request (`load.py`), the load that makes its
autoscaling act (`scaling.py`) and the rollouts and kills made under load (`changes.py`). Standard library, pyyaml,
`core`, `host` and `localsite`; no Pulumi, nothing of the policy pack."""
