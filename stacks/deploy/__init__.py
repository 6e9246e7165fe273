"""`python -m stacks preview STACK` (the PR check) and `python -m stacks up [STACK]` (the deploy): Pulumi's Automation
API over the project, in one process, on its public surface (`pulumi.automation`'s classes and functions).

scripts/preview and scripts/up hand over to these; each first sources scripts/pulumi-env (the toolchain
scripts/install-pulumi builds on PATH, PULUMI_HOME, the backend: `command.pulumi_env`). Per stack (host/stackenv.py):
the pack's level (`rebel100:environment`, read by core.stackfile), the passphrase rule (docs/recovery.md, Secrets: a
stack of the local site runs under this clone's passphrase with its stack file copied to .cluster/stacks and passed as
`--config-file`; any other stack under the caller's passphrase, else the built-in one for a dev stack and none for a
prod stack, which is refused); then the local cluster when KUBECONFIG is unset and it runs, and a temporary folder of
the command's own for the CLI (TMPDIR), removed on exit.

The modules, by what they do: `cli` the project's Pulumi CLI as a `PulumiCommand` whose commands each run in a
session of their own (host/processes.py; a Ctrl-C or SIGTERM reaches this process, which hands it to the CLI alone;
nothing the CLI started outlives it) and the workspace; `command` one command of one stack (its settings, the
passphrase and stack file, the cluster, the TMPDIR, the signals); `preview` the PR check; `up` the deploy (preflight,
the preview first, the update beside the watch, outputs and placement); `recovery` what an earlier command left (a
stale lock, a damaged checkpoint, a killed command's session).
"""
