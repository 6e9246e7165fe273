"""What the deploy flow (stacks/deploy/), the local site (localsite/), scripts/cluster and the benchmarks run on, below
them and without Pulumi: process records and sessions (`processes`), free ports on 127.0.0.1 (`ports`), a CA and the
certificates it signs (`pki`), and the environment a stack's Pulumi commands run in (`stackenv`: its passphrase, its
pack level, the secrets refusal, the local site's copy of its stack file). `processes`, `ports` and `pki` use the
standard library alone: scripts/cluster imports them under the system python3."""
