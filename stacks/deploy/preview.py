"""`python -m stacks preview STACK [FLAGS...]`, the PR check: `pulumi preview` of a stack with the pack at its level."""

from __future__ import annotations

import os

from stacks.deploy.command import Command, err, out, pulumi_env, readable, use_local_cluster_if_running


def preview(stack: str, flags: list[str]) -> int:
    """The PR check: `pulumi preview` of STACK with the pack at its level (flags passed on to the CLI)."""
    from pulumi.automation.errors import CommandError

    if status := readable(stack) or pulumi_env():
        return status
    with Command(stack, "preview") as command:
        if status := command.settle():
            return status
        err(f"policy pack level: {command.policy_config}")
        if command.render_mode:
            os.environ["KUBECONFIG"] = ""  # the provider refuses a kubeconfig beside renderYamlToDirectory
        else:
            use_local_cluster_if_running()
        # PULUMI_SKIP_CHECKPOINTS: a preview on a file (or S3) backend serialises the whole snapshot after every step
        # and throws it away (a preview's persister discards it); with this it does so once, at the end. Nothing is
        # saved either way: it only takes out a cost that grows with the square of the stack (docs/performance.md,
        # Dependency edges and the cost per pool). An update keeps its checkpoints.
        try:
            target = command.stack_object({"PULUMI_SKIP_CHECKPOINTS": "true"})
            command.cli.extra = flags
            command.cli.events = False  # the check is the CLI's output and its exit status
            target.preview(on_output=out, on_error=err, **command.pack())
        except CommandError:
            return command.cli.code or 1
        except RuntimeError:  # the Automation API's "summary event never found": no events; the CLI ended well
            return 0
    return 0
