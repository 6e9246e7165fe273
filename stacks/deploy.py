"""`python -m stacks preview STACK` (the PR check): Pulumi's Automation API over the project, in one process.

scripts/preview sources scripts/pulumi-env (the toolchain scripts/install-pulumi builds on PATH, PULUMI_HOME, the
backend) and hands over to this. Per stack, as before: the pack's level (`rebel100:environment`, read by
core.stackfile), the passphrase rule (docs/recovery.md, Secrets: a stack of the local site runs under this clone's
passphrase with its stack file copied to .cluster/stacks and passed as `--config-file`; any other stack under the
caller's passphrase, else the built-in one for a dev stack and none for a prod stack, which is refused), the local
cluster when KUBECONFIG is unset and it runs, and a temporary folder of the command's own for the CLI (TMPDIR),
removed on exit.

The CLI runs in a session of its own (`Cli`): a Ctrl-C or SIGTERM reaches this process, which hands it to the CLI
alone (it cancels cleanly), and nothing the CLI started (language host, program, providers, policy pack) outlives
the command: the session is ended when the CLI is.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from pulumi.automation import CommandResult, LocalWorkspace, OnOutput, PulumiCommand, Stack
from pulumi.automation.errors import create_command_error
from semver import VersionInfo

from core import stackfile
from core.stackfile import PROJECT_ROOT

BUILTIN_PASSPHRASE = "rebel100-local"  # core/secrets.py refuses it for a prod stack
LOCAL_SITE_DIR = PROJECT_ROOT / ".cluster" / "stacks"


# --- processes -------------------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...); None when gone."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def process_start(pid: int) -> str | None:
    """A live process's start time (clock ticks since boot); None when it is gone or a zombie."""
    fields = _stat(pid)
    return fields[19] if fields and fields[0] not in ("Z", "X") else None


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


def exit_status(code: int) -> int:
    """A CLI's return code as a shell reports it (a signal N: 128 + N)."""
    return 128 - code if code < 0 else code


# --- the CLI ---------------------------------------------------------------------------------------------------


def cli_version(command: str) -> VersionInfo | None:
    """The CLI's version: from the folder scripts/install-pulumi built it in (pulumi-<v>-k8s-...), which spares a
    CLI start (`pulumi version`) per command; from `pulumi version` for a CLI of your own."""
    found = re.search(r"/pulumi-(\d+\.\d+\.\d+)-k8s-[^/]*/bin/pulumi$", os.path.realpath(command))
    text = found.group(1) if found else ""
    if not text:
        env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
        text = subprocess.run([command, "version"], capture_output=True, text=True, env=env).stdout.strip()
    try:
        return VersionInfo.parse(text.removeprefix("v"))
    except ValueError:
        return None


class Cli(PulumiCommand):
    """The project's Pulumi CLI (the one on PATH: scripts/pulumi-env puts scripts/install-pulumi's build first), each
    command in a session of its own.

    Pulumi starts each plugin in a process group of its own, so neither a signal to the CLI's group nor the CLI's
    death reaches them (they wait for their engine health check to fail: minutes). They all stay in the session the
    CLI is started in, though, and a session id is not reused while any member lives: every process of that session
    is provably this command's. When the CLI ends (by itself, or killed), what is left of its session is ended before
    its output is read to the end. `runs_dir` records one file per running session ("SID START"), so that a command
    killed with SIGKILL (whose sessions outlive it) is cleaned up after by the next (`end_dead_sessions`).

    `pid` is the running CLI's (None between commands); `on_start(pid)` is called once it runs; `extra` holds flags
    for the next preview or up (a user's `scripts/preview STACK --diff`); `stderr` is the last command's."""

    def __init__(self, runs_dir: pathlib.Path) -> None:
        # Not PulumiCommand.__init__: it starts the CLI once for its version.
        self.command = shutil.which("pulumi") or "pulumi"
        self.version = cli_version(self.command)
        self.runs_dir = runs_dir
        self.pid: int | None = None
        self.on_start: Callable[[int], None] | None = None
        self.extra: list[str] = []
        self.stderr = ""
        self.code = 0

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: OnOutput | None = None,
        on_error: OnOutput | None = None,
    ) -> CommandResult:
        if args and args[0] in ("preview", "up") and self.extra:
            args = [*args, *self.extra]
        if "--non-interactive" not in args:
            args = ["--non-interactive", *args]
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
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
        record.write_text(f"{process.pid} {process_start(process.pid)}\n")
        readers = [
            threading.Thread(target=consume, args=(process.stdout, on_output, chunks["out"]), daemon=True),
            threading.Thread(target=consume, args=(process.stderr, on_error, chunks["err"]), daemon=True),
        ]
        for reader in readers:
            reader.start()
        self.pid = process.pid
        try:
            if self.on_start:
                self.on_start(process.pid)
            code = process.wait()
        finally:
            self.pid = None
            # The plugins hold the CLI's pipes until they end: end them, then read the output to its end.
            end_session(process.pid)
            record.unlink(missing_ok=True)
            for reader in readers:
                reader.join()
        self.stderr = "\n".join(chunks["err"])
        self.code = exit_status(code)
        result = CommandResult(stdout="\n".join(chunks["out"]), stderr=self.stderr, code=self.code)
        if code != 0:
            raise create_command_error(result)
        return result


def end_dead_sessions(runs_dir: pathlib.Path) -> None:
    """End what a command killed with SIGKILL left running: sessions whose CLI is gone (its start time no longer
    matches the recorded one) but whose plugins still run."""
    if not runs_dir.is_dir():
        return
    for record in runs_dir.iterdir():
        try:
            sid_text, started = record.read_text().split()
            sid = int(sid_text)
        except (OSError, ValueError):
            continue
        if process_start(sid) == started:
            continue  # a command that still runs
        if left := session_processes(sid):
            print(
                f"up: ending {len(left)} process(es) left by an earlier `pulumi up` that was killed (session {sid})",
                file=sys.stderr,
            )
            end_session(sid)
        record.unlink(missing_ok=True)


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
        self.stack_dir = stack_dir

    def select_stack(self, stack_name: str) -> None:
        dirs = file_stack_dirs(stack_name)
        if dirs is not None and any((dirs[0] / f"{stack_name}{ext}").is_file() for ext in (".json", ".json.gz")):
            return
        self.pulumi_command.run(["stack", "select", stack_name, "--create"], str(self.stack_dir), self.env_vars)


# --- per stack: passphrase, stack file, pack level, cluster -----------------------------------------------------


def caller_passphrase() -> bool:
    """The caller chose a passphrase (PULUMI_CONFIG_PASSPHRASE, even empty, or PULUMI_CONFIG_PASSPHRASE_FILE): it is
    then used as it is, for every stack."""
    return "PULUMI_CONFIG_PASSPHRASE" in os.environ or bool(os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"))


def is_local_site(stack: str) -> bool:
    """STACK was deployed to the local site from here (`scripts/up --local-cluster` recorded it for this backend)
    and KUBECONFIG is not set (a preview then looks at the local cluster, as `make up` did)."""
    if "KUBECONFIG" in os.environ:
        return False
    try:
        backends = (LOCAL_SITE_DIR / f"{stack}.backend").read_text().splitlines()
    except OSError:
        return False
    return os.environ.get("PULUMI_BACKEND_URL", "") in backends


def use_local_site(stack: str) -> pathlib.Path:
    """Run STACK as a stack of the local site: this clone's passphrase (random, made once, kept in PULUMI_HOME, never
    in the repository) unless the caller chose one, its stack file copied to .cluster/stacks (git-ignored: the salt
    of that passphrase is written there, the tracked file stays as it is), and the stack recorded as the local
    site's for this backend. PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER: a copy made anew from the tracked file has no
    salt; Pulumi then takes the one in the stack's state instead of minting another. Returns the copy (for
    `--config-file`)."""
    if not caller_passphrase():
        home = pathlib.Path(os.environ.get("PULUMI_HOME") or PROJECT_ROOT / ".pulumi-home")
        file = home / "local-cluster.passphrase"
        if not (file.is_file() and file.stat().st_size):
            home.mkdir(parents=True, exist_ok=True)
            import base64

            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(base64.b64encode(os.urandom(24)).decode() + "\n")
        os.environ["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(file)
    LOCAL_SITE_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PROJECT_ROOT / "Pulumi.yaml", LOCAL_SITE_DIR / "Pulumi.yaml")
    copy = LOCAL_SITE_DIR / f"Pulumi.{stack}.yaml"
    shutil.copyfile(stackfile.stack_file(stack), copy)
    marker = LOCAL_SITE_DIR / f"{stack}.backend"
    backend = os.environ.get("PULUMI_BACKEND_URL", "")
    try:
        recorded = marker.read_text().splitlines()
    except OSError:
        recorded = []
    if backend not in recorded:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(backend + "\n")
    os.environ["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] = "true"
    return copy


def use_passphrase(policy_config: str) -> None:
    """When the caller chose none: the built-in passphrase for a dev stack (its pack level is dev.json exactly when
    `rebel100:environment` is dev), so the dev and render stacks work on a fresh clone; a prod stack gets none
    (`secrets_refusal` then refuses it, naming the fix). core/secrets.py keeps the two in step."""
    if not caller_passphrase() and policy_config.endswith("/dev.json"):
        os.environ["PULUMI_CONFIG_PASSPHRASE"] = BUILTIN_PASSPHRASE


def policy_config(config: dict[str, str]) -> str:
    """The pack's enforcement file for the stack's `rebel100:environment` (prod when unset), relative to the project."""
    from policy import levels

    chosen = levels.environment_config(levels.enforcement_environment(stackfile.environment(config)))
    return chosen.relative_to(PROJECT_ROOT).as_posix()


def secrets_refusal(stack: str, path: pathlib.Path, config: dict[str, str]) -> str | None:
    """Why a prod stack's secrets may not be written (under the built-in passphrase, or none), or None."""
    from core.secrets import refusal_for

    return refusal_for(stack, stackfile.environment(config), stackfile.secrets_provider(path), os.environ)


def cluster_script(*args: str) -> str | None:
    """The last stdout line of scripts/cluster ARGS (a path) when it succeeds, else None (its stderr passed on)."""
    proc = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "cluster"), *args], stdout=subprocess.PIPE, text=True
    )
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if proc.returncode == 0 and lines else None


def use_local_cluster_if_running() -> None:
    """The cluster a cluster stack goes to: the KUBECONFIG you set; without one, the local cluster (scripts/cluster)
    when it runs, with the kubectl of its version first on PATH, so that `make up` then `scripts/preview prod-4p4d`
    look at the same cluster."""
    if "KUBECONFIG" in os.environ:
        return
    with open(os.devnull, "w") as quiet:
        proc = subprocess.run(
            [sys.executable, str(PROJECT_ROOT / "scripts" / "cluster"), "kubeconfig"],
            stdout=subprocess.PIPE,
            stderr=quiet,
            text=True,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            return
        os.environ["KUBECONFIG"] = proc.stdout.strip().splitlines()[-1]
        built = subprocess.run(
            [sys.executable, str(PROJECT_ROOT / "scripts" / "cluster"), "build", "--check"],
            stdout=subprocess.PIPE,
            stderr=quiet,
            text=True,
        )
    if built.returncode == 0 and built.stdout.strip():
        os.environ["PATH"] = f"{built.stdout.strip().splitlines()[-1]}:{os.environ['PATH']}"
    print(f"cluster: the local cluster ({os.environ['KUBECONFIG']})", file=sys.stderr)


class Command:
    """One `preview` or `up` of one stack: its settings, the CLI, the private TMPDIR, and the signals."""

    def __init__(self, stack: str, verb: str) -> None:
        self.stack = stack
        self.verb = verb
        self.path = stackfile.stack_file(stack)
        self.config, _ = stackfile.read_config(self.path)
        self.render_mode = bool(self.config.get("rebel100:renderDirectory"))
        self.policy_config = policy_config(self.config)
        self.config_file: pathlib.Path | None = None
        home = pathlib.Path(os.environ.get("PULUMI_HOME") or PROJECT_ROOT / ".pulumi-home")
        self.runs_dir = home / "up-sessions"
        self.cli = Cli(self.runs_dir)
        self.tmp: str | None = None
        self.interrupted = False
        self.cancelling = "preview"  # what the running CLI does: preview or update

    # --- signals: Ctrl-C or SIGTERM to the CLI alone, which cancels and unlocks the stack ---------------------
    def on_signal(self, signum: int, _frame: Any) -> None:
        self.interrupted = True
        pid = self.cli.pid
        if pid is None:
            raise SystemExit(130)
        if self.verb == "up":
            if self.cancelling == "preview":
                print(f"up: interrupted: cancelling the preview of {self.stack} (nothing was changed)", file=sys.stderr)
            else:
                print(
                    f"up: interrupted: cancelling the update of {self.stack} (the next scripts/up {self.stack} resumes "
                    f"it)",
                    file=sys.stderr,
                )
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)

    def __enter__(self) -> Command:
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        # A temporary folder of this command's for the CLI and every plugin it starts: the Kubernetes provider copies
        # the kubeconfig it is given to a temporary file of its own for Helm and never removes it (pulumi-kubernetes
        # v4.25 writeKubeconfigToFile).
        self.tmp = tempfile.mkdtemp(prefix="rebel100-pulumi.")
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def settle(self, local_cluster: bool = False) -> int:
        """The passphrase and stack file of this stack, then the secrets check: 0, or 1 with the refusal printed."""
        if not self.render_mode and (local_cluster or is_local_site(self.stack)):
            self.config_file = use_local_site(self.stack)
        else:
            use_passphrase(self.policy_config)
        refusal = secrets_refusal(self.stack, self.path, self.config)
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            return 1
        return 0

    def stack_object(self, env: dict[str, str]) -> Stack:
        assert self.tmp is not None
        workspace = Workspace(
            self.cli, {"TMPDIR": self.tmp, **env}, LOCAL_SITE_DIR if self.config_file else PROJECT_ROOT
        )
        return Stack.select(self.stack, workspace)

    def pack(self) -> dict[str, Any]:
        """The arguments every pass gets: the pack at the stack's level, and the local site's stack file copy."""
        return {
            "policy_packs": ["policy"],
            "policy_pack_configs": [self.policy_config],
            "config_file": str(self.config_file) if self.config_file else None,
        }


def out(line: str) -> None:
    print(line, flush=True)


def err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def preview(stack: str, flags: list[str]) -> int:
    """The PR check: `pulumi preview` of STACK with the pack at its level (flags passed on to the CLI)."""
    from pulumi.automation.errors import CommandError

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
            target.preview(on_output=out, on_error=err, **command.pack())
        except CommandError:
            return command.cli.code or 1
    return 0
