"""The processes the local site starts, each recorded by pid and start time, so that exactly those are stopped.

`<dir>/run/<name>.pid` holds "<pid> <start time in clock ticks>" (the start time tells a process apart from a
later one that got its pid: host/processes.py); `<dir>/logs/<name>.log` its output. `<dir>/site.pid` records the site
itself (`python -m localsite run`). `stop_site(dir)` (`make down`) stops a site still serving, which stops its
programs, then whatever a site left behind (one killed with SIGKILL), newest first, by pid.
"""

from __future__ import annotations

import os
import pathlib
import time

from host.processes import Recorded, read_record, start_recorded, start_time, terminate, write_record

# A site stops its programs one by one on SIGTERM, each up to host.processes.STOP_TIMEOUT; about 15 s for a whole stack
# here.
SITE_STOP_TIMEOUT = 120.0
# The site's own record, apart from run/: it is stopped first, so that it stops its programs itself and starts none
# again while they are stopped.
SITE_RECORD = "site.pid"
sleep = time.sleep


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
        process = start_recorded(
            name,
            argv,
            log=self.logs / f"{name}.log",
            record=self.run_dir / f"{name}.pid",
            env=env,
            pass_fds=pass_fds,
            cwd=cwd,
        )
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
