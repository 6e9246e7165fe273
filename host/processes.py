"""Processes recorded by pid and start time, so that exactly those are stopped, and the sessions they run in.

A record (`<name>.pid`, a command's session file) holds "<pid> <start time in clock ticks>": the start time tells a
process apart from a later one that got its pid. A process started in a session of its own keeps everything it starts
there (Pulumi's plugins, each in a process group of its own, included), and a session id is not reused while any
member lives: every process of that session is provably the starter's (`session_processes`, `end_session`).
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

STOP_TIMEOUT = 10.0  # seconds between SIGTERM and SIGKILL


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...); None when gone."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """A live process's start time (clock ticks since boot); None when it is gone or a zombie."""
    fields = _stat(pid)
    return fields[19] if fields and fields[0] not in ("Z", "X") else None


@dataclass
class Recorded:
    """A recorded process: its pid, its start time, and the Popen that reaps it (None when read back from a record by
    another process)."""

    name: str
    pid: int
    started: str | None
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            return False
        return self.started is not None and start_time(self.pid) == self.started

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None


def terminate(process: Recorded, timeout: float = STOP_TIMEOUT, on_kill: Callable[[], None] | None = None) -> None:
    """SIGTERM, then SIGKILL after `timeout` (`on_kill` called first); waits until the process is gone (and reaped, if
    ours)."""
    if not process.alive():
        if process.popen is not None:
            process.popen.poll()
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if process.alive():
        if on_kill is not None:
            on_kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        while process.alive():
            time.sleep(0.05)
    if process.popen is not None:
        process.popen.wait()


def write_record(path: pathlib.Path, pid: int, started: str | None) -> None:
    path.write_text(f"{pid} {started}\n")


def record_of(path: pathlib.Path, name: str) -> Recorded | None:
    """The process a record names, whether it still runs or not; None when the record cannot be read."""
    with contextlib.suppress(OSError, ValueError):
        pid, started = path.read_text().split()
        return Recorded(name, int(pid), started)
    return None


def read_record(path: pathlib.Path, name: str) -> Recorded | None:
    """The process a record names, if it still runs (the same pid and start time)."""
    process = record_of(path, name)
    return process if process is not None and process.alive() else None


def start_recorded(
    name: str,
    argv: list[str],
    *,
    log: pathlib.Path,
    record: pathlib.Path,
    env: dict[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
    cwd: pathlib.Path | None = None,
) -> Recorded:
    """Start `argv` in a session of its own (so that it outlives its starter, and a Ctrl-C of the terminal reaches only
    the starter), its output appended to `log`, recorded in `record`."""
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=pass_fds,
            cwd=cwd,
            start_new_session=True,
        )
    started = None
    for _ in range(200):  # /proc/<pid>/stat appears at once; the loop only guards a race
        started = start_time(popen.pid)
        if started or popen.poll() is not None:
            break
        time.sleep(0.005)
    write_record(record, popen.pid, started)
    return Recorded(name, popen.pid, started, popen)


def session_processes(sid: int) -> list[int]:
    """The processes of session SID that still run. A zombie does not count: it has ended, and waits only for its
    parent, or for init when it was orphaned, to read its status (an init that reaps late kept a no-op `up` waiting
    for it for up to 2 s)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields and fields[0] not in ("Z", "X") and fields[3] == str(sid):
            found.append(int(entry.name))
    return found


def end_session(sid: int, *, grace: float = 5.0) -> None:
    """SIGTERM every process of the session, SIGKILL what is left after `grace` seconds."""
    left = session_processes(sid)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = session_processes(sid)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
