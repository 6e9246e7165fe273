"""The project's Pulumi CLI as the Automation API runs it (`Cli`, a `PulumiCommand` whose commands each run in a session
of its own) and the project folder as its workspace (`Workspace`)."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import Any

from pulumi.automation import CommandResult, LocalWorkspace, OnOutput, PulumiCommand
from pulumi.automation.errors import create_command_error
from semver import VersionInfo

from core import stackfile
from core.stackfile import PROJECT_ROOT
from host.processes import end_session, start_time, write_record

# The commands that run the program (from the project folder, a local-site stack's file given with --config-file).
PROGRAM_VERBS = frozenset({"preview", "up", "refresh", "destroy"})


# The Go runtime's collector at twice its default heap growth (GOGC 200) for the CLI and the Go plugins it starts:
# they allocate a property map for every step and value, and at 256 pools collecting was about a tenth of the CLI's
# CPU; for a quarter more memory (a 256-pool preview's CLI: 410 -> 510 MB). A GOGC of the user's own is kept.
GO_GC_PERCENT = "200"


def go_gc_env() -> dict[str, str]:
    """GOGC for a CLI: the user's own, else GO_GC_PERCENT (the bench's bare CLI rows get the same)."""
    return {"GOGC": os.environ.get("GOGC", GO_GC_PERCENT)}


def cli_env(additional_env: Mapping[str, str]) -> dict[str, str]:
    """The environment of a CLI the Automation API runs: ours with go_gc_env(), and the command's additions."""
    return {**os.environ, **go_gc_env(), **additional_env, "PULUMI_AUTOMATION_API": "true"}


def without_event_log(args: list[str]) -> list[str]:
    """`args` without the Automation API's `--event-log <where>`."""
    if "--event-log" not in args:
        return args
    at = args.index("--event-log")
    return [*args[:at], *args[at + 2 :]]


def exit_status(code: int) -> int:
    """A CLI's return code as a shell reports it (a signal N: 128 + N)."""
    return 128 - code if code < 0 else code


# --- the CLI ---------------------------------------------------------------------------------------------------


def toolchain_root() -> str | None:
    """The folder of the `pulumi` on PATH as PulumiCommand's `root` takes it (ROOT/bin/pulumi: scripts/pulumi-env
    puts scripts/install-pulumi's build first); None, for PulumiCommand's own `pulumi` from PATH, when it is not in a
    bin folder or not there at all."""
    found = shutil.which("pulumi")
    return str(pathlib.Path(found).parent.parent) if found and pathlib.Path(found).parent.name == "bin" else None


def built_version(root: str | None) -> VersionInfo | None:
    """The version of the CLI scripts/install-pulumi built in ROOT, from the folder's name
    (`pulumi-<version>-k8s-<provider>-host-<digest>`, a name the build derives from the version it checks out); None
    for any other folder."""
    found = re.fullmatch(r"pulumi-(\d+\.\d+\.\d+)-k8s-[^/]+", pathlib.Path(root).name) if root else None
    return VersionInfo.parse(found.group(1)) if found else None


class Cli(PulumiCommand):
    """The project's Pulumi CLI (the one on PATH: scripts/pulumi-env puts scripts/install-pulumi's build first), each
    command in a session of its own.

    Pulumi starts each plugin in a process group of its own, so neither a signal to the CLI's group nor the CLI's
    death reaches them (they wait for their engine health check to fail: minutes). They all stay in the session the
    CLI is started in, though, and a session id is not reused while any member lives: every process of that session
    is provably this command's. When the CLI ends (by itself, or killed), what is left of its session is ended before
    its output is read to the end. `runs_dir` records one file per running session ("SID START"), so that a command
    killed with SIGKILL (whose sessions outlive it) is cleaned up after by the next (`end_dead_sessions`).

    Its `command` and `version` are PulumiCommand's public attributes; the project's build (scripts/install-pulumi)
    has its version in its folder's name, which spares the `pulumi version` start PulumiCommand's constructor makes
    (0.2-0.3 s of every preview and up, docs/performance.md); a CLI of your own is made by that constructor, which
    asks it. The version is not checked against the SDK's either way (the CLI is built from source). It runs
    through PulumiCommand's public `run`, the one the Automation API calls for every command. `pid` is the running
    CLI's (None between commands); `on_start(pid, verb)` is called once it runs; `extra`
    holds flags for the next preview or up (a user's `scripts/preview STACK --diff`); `events` False keeps the CLI from
    streaming its engine events to the Automation API (`--event-log`: every step with its properties, marshalled by
    the CLI and read back here, about 1 s of a 256-pool preview) for a command that reads only the CLI's output and
    exit status; `stderr` and `code` are the last command's."""

    def __init__(self, runs_dir: pathlib.Path) -> None:
        root = toolchain_root()
        version = built_version(root)
        if root is not None and version is not None:
            self.command = os.path.join(root, "bin", "pulumi")
            self.version = version
        else:
            super().__init__(root=root, skip_version_check=True)
        self.runs_dir = runs_dir
        self.pid: int | None = None
        self.on_start: Callable[[int, str], None] | None = None
        self.extra: list[str] = []
        self.events = True
        self.stderr = ""
        self.code = 0
        self.stack_dir = PROJECT_ROOT

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: OnOutput | None = None,
        on_error: OnOutput | None = None,
    ) -> CommandResult:
        verb = next((arg for arg in args if not arg.startswith("-")), "")
        if verb in ("preview", "up") and self.extra:
            args = [*args, *self.extra]
        if not self.events:
            args = without_event_log(args)
        if verb not in PROGRAM_VERBS:
            # Commands that read the stack file without running the program (`stack output`, `stack history`, which
            # the Automation API's `up` runs after the update, and `stack select`): in the folder of the stack file
            # the program's commands are given with --config-file (a local-site stack's copy), so that a salt they
            # write goes there and the tracked stack file stays as it is.
            cwd = str(self.stack_dir)
        if "--non-interactive" not in args:
            args = ["--non-interactive", *args]
        env = cli_env(additional_env)
        chunks: dict[str, list[str]] = {"out": [], "err": []}

        def consume(stream: Any, callback: OnOutput | None, into: list[str]) -> None:
            for line in iter(stream.readline, ""):
                line = line.rstrip()
                if callback:
                    callback(line)
                into.append(line)
            stream.close()

        self.runs_dir.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [self.command, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        record = self.runs_dir / str(process.pid)
        write_record(record, process.pid, start_time(process.pid))
        readers = [
            threading.Thread(target=consume, args=(process.stdout, on_output, chunks["out"]), daemon=True),
            threading.Thread(target=consume, args=(process.stderr, on_error, chunks["err"]), daemon=True),
        ]
        for reader in readers:
            reader.start()
        self.pid = process.pid
        try:
            if self.on_start:
                self.on_start(process.pid, verb)
            code = process.wait()
        finally:
            # The plugins hold the CLI's pipes until they end: end them, then read the output to its end.
            end_session(process.pid)
            self.pid = None
            record.unlink(missing_ok=True)
            for reader in readers:
                reader.join()
        self.stderr = "\n".join(chunks["err"])
        self.code = exit_status(code)
        result = CommandResult(stdout="\n".join(chunks["out"]), stderr=self.stderr, code=self.code)
        if code != 0:
            raise create_command_error(result)
        return result


# --- the workspace ---------------------------------------------------------------------------------------------


def file_stack_dirs(stack: str) -> tuple[pathlib.Path, pathlib.Path] | None:
    """On the file backend, the folders of STACK's checkpoint and of its locks (pulumi's diy backend:
    .pulumi/stacks/PROJECT/STACK.json, .pulumi/locks/organization/PROJECT/STACK/*.json); None on any other."""
    from stacks.checkpoint import file_backend_root

    root = file_backend_root(os.environ.get("PULUMI_BACKEND_URL"))
    if root is None:
        return None
    project = stackfile.project_name()
    return root / ".pulumi" / "stacks" / project, root / ".pulumi" / "locks" / "organization" / project / stack


class Workspace(LocalWorkspace):
    """The project folder as a LocalWorkspace, run by `Cli`. Every command names its stack (`--stack`), so selecting
    one only makes sure it exists: on the file backend its checkpoint file says so without a CLI start; otherwise
    `pulumi stack select --create`, in the folder of the stack file the commands read (a local site stack's copy in
    .cluster/stacks, whose Pulumi.yaml names the same project: the new stack's salt is written there)."""

    def __init__(self, cli: Cli, env_vars: dict[str, str], stack_dir: pathlib.Path = PROJECT_ROOT) -> None:
        super().__init__(work_dir=str(PROJECT_ROOT), pulumi_command=cli, env_vars=env_vars)
        cli.stack_dir = stack_dir

    def select_stack(self, stack_name: str) -> None:
        dirs = file_stack_dirs(stack_name)
        if dirs is not None and any((dirs[0] / f"{stack_name}{ext}").is_file() for ext in (".json", ".json.gz")):
            return
        self.pulumi_command.run(["stack", "select", stack_name, "--create"], self.work_dir, self.env_vars)
