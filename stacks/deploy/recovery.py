"""What an earlier command left behind, found and put right: a stack lock whose `pulumi` is gone (cleared, its pending
operations resolved), a checkpoint Pulumi cannot load (named with its last good copy and the command that puts it
back), the session of a command killed with SIGKILL (ended by the next). docs/recovery.md."""

from __future__ import annotations

import os
import pathlib
import re
import sys

from pulumi.automation import Stack

from host.processes import end_session, record_of, session_processes
from stacks.deploy.cli import file_stack_dirs
from stacks.deploy.command import Command, err

# The lock a diy backend (file, S3, ...) names in its refusal: "created by USER@HOST (pid PID) at TIME" (pulumi's diy
# lock.go). Pulumi's ConcurrentUpdateError says the stack is locked; this says by whom.
LOCK_HOLDER = re.compile(r".*: created by (.*)@(.*) \(pid (\d+)\) at (\S*)")
CHECKPOINT_DAMAGED = "failed to load checkpoint"


def lock_holders(text: str) -> list[tuple[str, str, int, str]]:
    """(user, host, pid, since) of each lock a failed update's message names."""
    return [
        (found.group(1), found.group(2), int(found.group(3)), found.group(4))
        for line in text.splitlines()
        if (found := LOCK_HOLDER.match(line))
    ]


def lock_is_stale(host: str, pid: int) -> bool:
    """A lock of this host whose `pulumi` is gone (no process of that pid is a `pulumi` here)."""
    if host != os.uname().nodename:
        return False
    try:
        return pathlib.Path(f"/proc/{pid}/comm").read_text().strip() != "pulumi"
    except OSError:
        return True


def end_dead_sessions(runs_dir: pathlib.Path) -> None:
    """End what a command killed with SIGKILL left running: sessions whose CLI is gone (its start time no longer
    matches the recorded one) but whose plugins still run."""
    if not runs_dir.is_dir():
        return
    for record in runs_dir.iterdir():
        leader = record_of(record, "pulumi")
        if leader is None:
            continue
        if leader.alive():
            continue  # a command that still runs
        sid = leader.pid
        if left := session_processes(sid):
            print(
                f"up: ending {len(left)} process(es) left by an earlier `pulumi up` that was killed (session {sid})",
                file=sys.stderr,
            )
            end_session(sid)
        record.unlink(missing_ok=True)


def recover_lock(command: Command, target: Stack) -> bool:
    """True when every lock the refused update named was stale and is cleared (`pulumi cancel`), with its pending
    operations resolved (`pulumi refresh --clear-pending-creates`); False, with the holder named and what to do, when
    one is held by a live `pulumi` or by another host."""
    from pulumi.automation.errors import CommandError

    holders = lock_holders(command.cli.stderr)
    if not holders:
        return False
    here = os.uname().nodename
    live = False
    for user, host, pid, since in holders:
        if lock_is_stale(host, pid):
            continue
        live = True
        if host == here:
            err(
                f"up: stack {command.stack} is locked by a running pulumi ({user}@{host}, pid {pid}, since {since}): "
                f"wait for it to finish; this update changed nothing."
            )
        else:
            err(
                f"up: stack {command.stack} is locked by {user}@{host} (pid {pid}, since {since}), another host: wait "
                f"for its update to finish. Only if that host is gone and its update is dead: pulumi cancel -s "
                f"{command.stack} --yes, then scripts/up {command.stack}."
            )
    if live:
        return False
    for user, host, pid, since in holders:
        err(
            f"up: stack {command.stack} was locked by a pulumi that is gone ({user}@{host}, pid {pid}, since "
            f"{since}): clearing the lock (pulumi cancel) and resolving its pending operations (pulumi refresh)"
        )
    try:
        target.cancel()
        # A render-mode stack has no cluster to refresh from (scripts/render-state keeps its folder honest).
        if not command.render_mode:
            # A create that was in flight may or may not have happened: forget it; `up` creates or adopts it.
            target.refresh(
                clear_pending_creates=True, on_output=err, on_error=err, config_file=command.pack()["config_file"]
            )
    except CommandError:
        return False
    return True


def lock_left(stack: str) -> bool:
    """A lock of this stack on the file backend. The preview does not take the lock; the update clears a stale one
    (recover_lock), so a locked stack is updated even when the preview proposes nothing."""
    dirs = file_stack_dirs(stack)
    return dirs is not None and dirs[1].is_dir() and any(dirs[1].glob("*.json"))


def checkpoint_damaged(stderr: str) -> bool:
    """The CLI said it cannot load the stack's checkpoint."""
    return CHECKPOINT_DAMAGED in stderr


def explain_checkpoint(stack: str, local_cluster: bool) -> None:
    """After a failed preview or update whose CLI said `failed to load checkpoint`, name the damaged file, its last good
    copy and the command that restores it (a file backend; otherwise Pulumi's message stands)."""
    from stacks import checkpoint

    again = f"scripts/up {stack}" + (" --local-cluster" if local_cluster else "")
    checkpoint.command(stack, restore_command=f"{again} --restore-checkpoint")
