"""stacks/deploy/ without a cluster or a stack: who holds a lock (Pulumi's ConcurrentUpdateError message), which lock is
stale, a command's session ended with everything in it (scripts/up's process rules, docs/recovery.md), and Ctrl-C
cancelling the CLI whatever the command was printing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from host import processes
from stacks.deploy import recovery
from tests.pulumi_project import dead_pid

# How a diy backend refuses an update of a locked stack (pulumi 3.274.1, pkg/backend/diy/lock.go), as the Automation
# API's ConcurrentUpdateError carries it.
LOCKED = (
    "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete the "
    "lock file with `pulumi cancel`.\n"
    "  file:///p/.pulumi-state/.pulumi/locks/organization/rebel100-serving/prod-4p4d/1f3c.json: created by "
    "some@one@ci-runner-7 (pid 4242) at 2026-11-30T12:00:00Z\n"
)


def test_the_lock_holder_is_read_from_pulumis_message():
    assert recovery.lock_holders(LOCKED) == [("some@one", "ci-runner-7", 4242, "2026-11-30T12:00:00Z")]
    assert recovery.lock_holders("error: something else") == []


def test_a_lock_is_stale_only_on_this_host_without_its_pulumi():
    here = os.uname().nodename
    assert recovery.lock_is_stale(here, dead_pid())
    assert recovery.lock_is_stale(here, os.getpid())  # a process, but not a `pulumi`
    assert not recovery.lock_is_stale("another-host", dead_pid())


def session() -> subprocess.Popen:
    """A shell in a session of its own that starts a child in a process group of its own (as Pulumi starts plugins:
    `set -m` gives a background job its own group)."""
    return subprocess.Popen(["bash", "-c", "set -m; sleep 300 & sleep 300"], start_new_session=True)


def test_ending_a_session_ends_what_its_leader_started():
    leader = session()
    time.sleep(0.5)
    members = processes.session_processes(leader.pid)
    assert leader.pid in members and len(members) >= 2, members
    processes.end_session(leader.pid)
    leader.wait(timeout=10)
    assert processes.session_processes(leader.pid) == []


def test_the_next_command_ends_a_killed_commands_session(tmp_path, capsys):
    """A record whose CLI is gone (killed with SIGKILL) but whose plugins still run: ended, and the record removed; a
    record of a command that still runs is left alone."""
    leader, running = session(), session()
    time.sleep(0.5)
    (tmp_path / str(leader.pid)).write_text(f"{leader.pid} {processes.start_time(leader.pid)}\n")
    (tmp_path / str(running.pid)).write_text(f"{running.pid} {processes.start_time(running.pid)}\n")
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait()
    try:
        assert processes.session_processes(leader.pid), "precondition: the session outlives its leader"
        recovery.end_dead_sessions(tmp_path)
        assert processes.session_processes(leader.pid) == []
        assert "left by an earlier `pulumi up` that was killed" in capsys.readouterr().err
        assert sorted(p.name for p in tmp_path.iterdir()) == [str(running.pid)]
    finally:
        processes.end_session(running.pid)
        running.wait(timeout=10)


def test_the_built_clis_version_is_read_from_its_folder():
    """scripts/install-pulumi's folder names the CLI's version: no `pulumi version` start for it; any other folder
    (a CLI of your own) is asked (None here)."""
    from stacks.deploy.cli import built_version

    assert str(built_version("/cache/pulumi-3.274.1-k8s-4.25.0-host-65bb9a58")) == "3.274.1"
    assert built_version("/usr/local") is None
    assert built_version(None) is None


def test_without_event_log_drops_the_flag_and_its_value_only():
    from stacks.deploy.cli import without_event_log

    args = ["preview", "--stack", "dev", "--event-log", "tcp://127.0.0.1:4000", "--exec-kind", "auto.local"]
    assert without_event_log(args) == ["preview", "--stack", "dev", "--exec-kind", "auto.local"]
    assert without_event_log(["up", "--yes"]) == ["up", "--yes"]


def test_the_cli_runs_with_gogc_unless_the_user_set_one(monkeypatch):
    from stacks.deploy.cli import GO_GC_PERCENT, cli_env

    monkeypatch.delenv("GOGC", raising=False)
    env = cli_env({"PULUMI_SKIP_CHECKPOINTS": "true"})
    assert (env["GOGC"], env["PULUMI_SKIP_CHECKPOINTS"], env["PULUMI_AUTOMATION_API"]) == (
        GO_GC_PERCENT,
        "true",
        "true",
    )
    monkeypatch.setenv("GOGC", "off")
    assert cli_env({})["GOGC"] == "off"


TOLD_CLI = """
import signal, sys, time
signal.signal(signal.SIGINT, lambda signum, _frame: sys.exit(print(signal.Signals(signum).name, flush=True)))
print("ready", flush=True)
time.sleep(30)
"""


class StderrMidPrint:
    """sys.stderr as a signal handler finds it when it lands inside a print of the same thread: its buffer refuses a
    second write (CPython's BufferedWriter); its file descriptor is a pipe the test reads."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, _text: str) -> int:
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

    def flush(self) -> None:
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

    def fileno(self) -> int:
        return self.fd


def test_ctrl_c_inside_a_print_still_cancels_the_cli_and_says_so(monkeypatch):
    from stacks.deploy.command import Command

    command = Command("prod-4p4d", "up")
    # The running CLI, as the handler sees it: a process that says which signal it got. It takes SIGINT itself,
    # since a shell's background job (CI's) starts with SIGINT ignored and passes that on.
    cli = subprocess.Popen([sys.executable, "-c", TOLD_CLI], stdout=subprocess.PIPE, text=True)
    assert cli.stdout is not None and cli.stdout.readline() == "ready\n"
    monkeypatch.setattr(command, "_cli", type("RunningCli", (), {"pid": cli.pid})())
    command.cancelling = "update"
    read_end, write_end = os.pipe()
    monkeypatch.setattr("sys.stderr", StderrMidPrint(write_end))
    try:
        command.on_signal(signal.SIGINT, None)
        told, _ = cli.communicate(timeout=10)
        assert told == "SIGINT\n"
    finally:
        cli.kill()
        os.close(write_end)
    with os.fdopen(read_end) as said:
        assert (
            said.read()
            == "up: interrupted: cancelling the update of prod-4p4d (the next scripts/up prod-4p4d resumes it)\n"
        )
