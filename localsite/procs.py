"""The processes the local site starts, each recorded by pid and start time, so that exactly those are stopped.

`<dir>/run/<name>.pid` holds "<pid> <start time in clock ticks>" (the start time tells a process apart from a
later one that got its pid); `<dir>/logs/<name>.log` its output. `<dir>/site.pid` records the site itself (`python -m
localsite run`). `stop_site(dir)` (`make down`) stops a site still serving, which stops its programs, then whatever a
site left behind (one killed with SIGKILL), newest first, by pid.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import time
from dataclasses import dataclass

STOP_TIMEOUT = 10.0  # seconds between SIGTERM and SIGKILL
# A site stops its programs one by one on SIGTERM, each up to STOP_TIMEOUT; about 15 s for a whole stack here.
SITE_STOP_TIMEOUT = 120.0
# The site's own record, apart from run/: it is stopped first, so that it stops its programs itself and starts none
# again while they are stopped.
SITE_RECORD = "site.pid"
sleep = time.sleep


def start_time(pid: int) -> str | None:
    """A live (non-zombie) process's start time from /proc, or None."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return None if fields[0] in ("Z", "X") else fields[19]


@dataclass
class Recorded:
    """A process this site started: its pid, its start time, and the Popen that reaps it (None when read back
    from a pid file by another process)."""

    name: str
    pid: int
    started: str | None
    popen: subprocess.Popen | None = None

    def alive(self) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            return False
        return self.started is not None and start_time(self.pid) == self.started

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None


def terminate(process: Recorded, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, then SIGKILL after `timeout`; waits until the process is gone (and reaped, if ours)."""
    if not process.alive():
        if process.popen is not None:
            process.popen.poll()
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process.alive() and time.monotonic() < deadline:
        sleep(0.05)
    if process.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        while process.alive():
            sleep(0.05)
    if process.popen is not None:
        process.popen.wait()


class Registry:
    """Starts, records and stops the site's processes under one folder."""

    def __init__(self, folder: pathlib.Path):
        self.dir = folder
        self.run_dir = folder / "run"
        self.logs = folder / "logs"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.processes: dict[str, Recorded] = {}

    def start(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        pass_fds: tuple[int, ...] = (),
        cwd: pathlib.Path | None = None,
    ) -> Recorded:
        """Start `argv` in a session of its own (a Ctrl-C of the terminal reaches the site, which stops it)."""
        if name in self.processes and self.processes[name].alive():
            raise RuntimeError(f"{name} is already running (pid {self.processes[name].pid})")
        with open(self.logs / f"{name}.log", "ab") as out:
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
        for _ in range(200):
            started = start_time(popen.pid)
            if started or popen.poll() is not None:
                break
            sleep(0.005)
        process = Recorded(name, popen.pid, started, popen)
        write_record(self.run_dir / f"{name}.pid", popen.pid, started)
        self.processes[name] = process
        return process

    def stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is not None:
            terminate(process)
        (self.run_dir / f"{name}.pid").unlink(missing_ok=True)

    def stop_all(self) -> None:
        for name in reversed(list(self.processes)):
            self.stop(name)

    def reap(self) -> None:
        """Collect exit codes of finished children (no zombies between checks)."""
        for process in self.processes.values():
            if process.popen is not None:
                process.popen.poll()


def write_record(path: pathlib.Path, pid: int, started: str | None) -> None:
    path.write_text(f"{pid} {started}\n")


def read_record(path: pathlib.Path, name: str) -> Recorded | None:
    """The process a record names, if it still runs (the same pid and start time)."""
    with contextlib.suppress(OSError, ValueError):
        pid, started = path.read_text().split()
        process = Recorded(name, int(pid), started)
        if process.alive():
            return process
    return None


def recorded(folder: pathlib.Path) -> list[Recorded]:
    """The processes recorded under `folder` that still run, newest first."""
    found = []
    for pid_file in sorted((folder / "run").glob("*.pid"), key=lambda f: f.stat().st_mtime_ns, reverse=True):
        process = read_record(pid_file, pid_file.stem)
        if process is not None:
            found.append(process)
    return found


def stop_recorded(folder: pathlib.Path) -> list[str]:
    """Stop every process recorded under `folder` that still runs (newest first); their names."""
    stopped = []
    for process in recorded(folder):
        terminate(process)
        stopped.append(f"{process.name} (pid {process.pid})")
    for pid_file in (folder / "run").glob("*.pid"):
        pid_file.unlink(missing_ok=True)
    return stopped


def record_site(folder: pathlib.Path) -> None:
    """Record this process as the site serving from `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    write_record(folder / SITE_RECORD, os.getpid(), start_time(os.getpid()))


def recorded_site(folder: pathlib.Path) -> Recorded | None:
    """The site recorded under `folder`, if it still runs."""
    return read_record(folder / SITE_RECORD, "site")


def forget_site(folder: pathlib.Path) -> None:
    """Remove this process's record as the site of `folder` (a later site's record stays)."""
    site = recorded_site(folder)
    if site is not None and site.pid == os.getpid():
        (folder / SITE_RECORD).unlink(missing_ok=True)


def stop_site(folder: pathlib.Path) -> list[str]:
    """Stop the site serving from `folder` (SIGTERM: it stops its programs), then whatever a site left recorded
    there; the names of what was stopped."""
    stopped = []
    site = recorded_site(folder)
    if site is not None:
        terminate(site, SITE_STOP_TIMEOUT)
        stopped.append(f"{site.name} (pid {site.pid})")
    (folder / SITE_RECORD).unlink(missing_ok=True)
    return stopped + stop_recorded(folder)
