"""`python -m stacks up [STACK] [--local-cluster] [--restore-checkpoint]`, the deploy: preflight, a preview with the
refresh and the pack, the update when it proposes a change (beside the watch), the outputs and the placement."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from pulumi.automation import Stack

from core import stackfile
from core.stackfile import PROJECT_ROOT
from stacks.deploy import recovery
from stacks.deploy.command import Command, cluster_script, err, out, pulumi_env, readable, use_local_cluster_if_running


class Up(Command):
    """`up`: preflight, a preview with the refresh and the pack, the update when the preview proposes a change (beside
    the watch), the outputs and the placement. Render-mode stacks: the update alone, their render folder kept in
    step with their state (scripts/render-state)."""

    def __init__(self, stack: str, local_cluster: bool) -> None:
        super().__init__(stack, "up")
        self.local_cluster = local_cluster
        self.checkpoint_damaged = False
        self.cfg: Any = None

    def explain_checkpoint(self) -> None:
        if self.checkpoint_damaged:
            recovery.explain_checkpoint(self.stack, self.local_cluster)

    def saw(self) -> None:
        self.checkpoint_damaged = self.checkpoint_damaged or recovery.checkpoint_damaged(self.cli.stderr)

    def update(self, target: Stack, *, watch: bool) -> int:
        """`pulumi up` (beside the watch, with the refresh, for a cluster stack); once more after clearing a stale
        lock."""
        from pulumi.automation import ConcurrentUpdateError
        from pulumi.automation.errors import CommandError

        for attempt in (1, 2):
            try:
                self.attempt(target, watch=watch)
                return 0
            except ConcurrentUpdateError:
                status = self.cli.code or 1
                self.saw()
                if attempt == 1 and recovery.recover_lock(self, target):
                    continue
                return status
            except CommandError:
                self.saw()
                return self.cli.code or 1
        return 1

    def attempt(self, target: Stack, *, watch: bool) -> None:
        """One `pulumi up`; for a cluster stack `python -m stacks watch`'s loop runs in a thread beside it, started
        with the CLI's pid and stopped when it ends (it cancels the update for a pod that stays unschedulable, or an
        API server that does not answer)."""
        from stacks import site

        stopped = threading.Event()
        watchers: list[threading.Thread] = []

        def start_watch(pid: int, verb: str) -> None:
            if not watch or verb != "up":
                return
            thread = threading.Thread(
                target=site.watch,
                args=(self.cfg, None),
                kwargs={
                    "pid": pid,
                    "grace_seconds": float(os.environ.get("REBEL100_UNSCHEDULABLE_GRACE") or 120),
                    "unreachable_seconds": float(os.environ.get("REBEL100_UNREACHABLE_GRACE") or 60),
                    "stopped": stopped,
                },
                daemon=True,
            )
            thread.start()
            watchers.append(thread)

        self.cli.on_start = start_watch
        self.cancelling = "update"
        try:
            target.up(on_output=out, on_error=err, refresh=not self.render_mode or None, **self.pack())
        finally:
            self.cli.on_start = None
            stopped.set()
            for thread in watchers:
                thread.join()

    @staticmethod
    def nothing_to_do(events: list[Any]) -> bool:
        """Does the preview whose engine events these are propose nothing (stacks/events.py)? Said on stderr."""
        from stacks.events import proposal_of_events

        found = proposal_of_events(events)
        err(f"preview: {found.describe()}")
        return found.nothing_to_do

    def outputs(self) -> subprocess.Popen:
        """`pulumi stack output` of the stack (the CLI's table), started."""
        assert self.tmp is not None
        return subprocess.Popen(
            [self.cli.command, "stack", "output", "-s", self.stack, "--non-interactive"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TMPDIR": self.tmp},
        )

    def render_mode_up(self) -> int:
        render_dir = self.config["rebel100:renderDirectory"]
        assert self.tmp is not None
        state = [str(PROJECT_ROOT / "scripts" / "render-state"), "check", self.stack, render_dir]
        checked = subprocess.run(state, env={**os.environ, "TMPDIR": self.tmp})
        if checked.returncode:
            return checked.returncode
        target = self.stack_object({})
        if status := self.update(target, watch=False):
            self.explain_checkpoint()
            return status
        state[1] = "record"
        if recorded := subprocess.run(state).returncode:
            return recorded
        listed = self.outputs()
        printed, errors = listed.communicate()
        sys.stdout.write(printed)
        sys.stderr.write(errors)
        return listed.returncode

    def run(self, restore_checkpoint: bool) -> int:
        from core.gate import ConfigError
        from stacks import checkpoint
        from stacks.site import preflight

        if status := self.settle(self.local_cluster):
            return status
        if restore_checkpoint and (status := checkpoint.command(self.stack, restore=True)):
            return status
        err(f"policy pack level: {self.policy_config}")
        recovery.end_dead_sessions(self.runs_dir)
        if self.render_mode:
            os.environ["KUBECONFIG"] = ""  # the provider refuses a kubeconfig beside renderYamlToDirectory
            return self.render_mode_up()
        if self.local_cluster:
            cluster_bin = cluster_script("build")
            kubeconfig = cluster_bin and cluster_script("start")
            if not cluster_bin or not kubeconfig:
                return 1
            os.environ["PATH"] = f"{cluster_bin}:{os.environ['PATH']}"  # kubectl of the server's version
            os.environ["KUBECONFIG"] = kubeconfig
        use_local_cluster_if_running()
        try:
            self.cfg = stackfile.load_stack(self.path, self.stack)
        except (ConfigError, stackfile.StackFileError) as error:
            err(f"error: {error}")
            return 1
        if status := preflight(self.stack, self.cfg, None):
            return status
        # --refresh: what someone changed with kubectl is read back first, so `up` puts it back. The preview judges
        # the change with the pack (a refused change stops here, nothing applied); the update, when there is one to
        # run, skips its own preview (the same pass again) and refreshes once more. PULUMI_SKIP_CHECKPOINTS: the
        # preview's snapshot, which it discards, is serialised once instead of after every step (only the preview:
        # the update saves a checkpoint after each change).
        from pulumi.automation import EngineEvent
        from pulumi.automation.errors import CommandError

        target = self.stack_object({"PULUMI_SKIP_CHECKPOINTS": "true"})
        events: list[EngineEvent] = []
        self.cancelling = "preview"
        try:
            target.preview(refresh=True, on_output=out, on_error=err, on_event=events.append, **self.pack())
        except CommandError:
            self.saw()
            if self.interrupted:
                return 130  # the preview was cancelled, or ended as the signal came: nothing was changed
            err(f"up: the preview of stack {self.stack} failed (exit {self.cli.code}): nothing was changed")
            self.explain_checkpoint()
            return self.cli.code or 1
        except RuntimeError:
            pass  # "summary event never found": the CLI ended well; `nothing_to_do` says so and the update runs
        if self.interrupted:
            return 130
        if recovery.lock_left(self.stack) or not self.nothing_to_do(events):
            self.env.pop("PULUMI_SKIP_CHECKPOINTS", None)
            if status := self.update(target, watch=True):
                err(f"up: pulumi up of stack {self.stack} failed (exit {status})")
                self.explain_checkpoint()
                return status
        # The outputs (a CLI start) and the placement (three kubectl reads) side by side, printed in this order.
        from stacks.site import SiteError, format_placement, placement

        listed = self.outputs()
        try:
            shown, placed = format_placement(placement(self.cfg, None)), 0
        except SiteError as error:
            shown, placed = f"error: {error}", 2
        printed, errors = listed.communicate()
        sys.stdout.write(printed)
        sys.stderr.write(errors)
        if listed.returncode:
            return listed.returncode
        print()
        print(shown, file=sys.stderr if placed else sys.stdout)
        return placed


def up(stack: str, local_cluster: bool, restore_checkpoint: bool) -> int:
    """Deploy STACK (what scripts/up runs)."""
    if status := readable(stack) or pulumi_env():
        return status
    with Up(stack, local_cluster) as command:
        return command.run(restore_checkpoint)
