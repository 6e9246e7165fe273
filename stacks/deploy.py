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
from typing import Any, Self

from pulumi.automation import CommandResult, LocalWorkspace, OnOutput, PulumiCommand, Stack
from pulumi.automation.errors import create_command_error
from semver import VersionInfo

from core import stackfile
from core.stackfile import PROJECT_ROOT

# The commands that run the program (from the project folder, a local-site stack's file given with --config-file).
PROGRAM_VERBS = frozenset({"preview", "up", "refresh", "destroy"})
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

    `pid` is the running CLI's (None between commands); `on_start(pid, verb)` is called once it runs; `extra` holds
    flags for the next preview or up (a user's `scripts/preview STACK --diff`); `stderr` and `code` are the last
    command's."""

    def __init__(self, runs_dir: pathlib.Path) -> None:
        # Not PulumiCommand.__init__: it starts the CLI once for its version.
        self.command = shutil.which("pulumi") or "pulumi"
        self.version = cli_version(self.command)
        self.runs_dir = runs_dir
        self.pid: int | None = None
        self.on_start: Callable[[int, str], None] | None = None
        self.extra: list[str] = []
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
        if verb not in PROGRAM_VERBS:
            # Commands that read the stack file without running the program (`stack output`, `stack history`, which
            # the Automation API's `up` runs after the update, and `stack select`): in the folder of the stack file
            # the program's commands are given with --config-file (a local-site stack's copy), so that a salt they
            # write goes there and the tracked stack file stays as it is.
            cwd = str(self.stack_dir)
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
        cli.stack_dir = stack_dir

    def select_stack(self, stack_name: str) -> None:
        dirs = file_stack_dirs(stack_name)
        if dirs is not None and any((dirs[0] / f"{stack_name}{ext}").is_file() for ext in (".json", ".json.gz")):
            return
        self.pulumi_command.run(["stack", "select", stack_name, "--create"], self.work_dir, self.env_vars)


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
        self.env: dict[str, str] = {}
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

    def __enter__(self) -> Self:
        # A signal ignored when this started (SIGINT in a background job of a shell without job control) stays
        # ignored, as it did for the bash scripts/up: only a Ctrl-C meant for this command cancels it.
        for signum in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, self.on_signal)
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
        """The stack, selected (`Workspace.select_stack`); `self.env` is its commands' environment beside ours."""
        assert self.tmp is not None
        self.env = {"TMPDIR": self.tmp, **env}
        workspace = Workspace(self.cli, self.env, LOCAL_SITE_DIR if self.config_file else PROJECT_ROOT)
        return Stack.select(self.stack, workspace)

    def pack(self) -> dict[str, Any]:
        """The arguments every pass gets: the pack at the stack's level, and the local site's stack file copy."""
        return {
            "policy_packs": ["policy"],
            "policy_pack_configs": [self.policy_config],
            "config_file": str(self.config_file) if self.config_file else None,
            # The CLI writes to pipes here: in a terminal, the colours it gave a terminal of its own.
            "color": "always" if sys.stdout.isatty() else None,
        }


def out(line: str) -> None:
    print(line, flush=True)


def err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def readable(stack: str) -> int:
    """0 when STACK's stack file exists and reads as one, else the status after saying why (2: no such stack, 1: a
    malformed file)."""
    path = stackfile.stack_file(stack)
    if not path.is_file():
        err(f"error: {path} does not exist (stacks: {', '.join(stackfile.available_stacks())})")
        return 2
    try:
        stackfile.read_config(path)
    except stackfile.StackFileError as error:
        err(f"error: {error}")
        return 1
    return 0


def preview(stack: str, flags: list[str]) -> int:
    """The PR check: `pulumi preview` of STACK with the pack at its level (flags passed on to the CLI)."""
    from pulumi.automation.errors import CommandError

    if status := readable(stack):
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
            target.preview(on_output=out, on_error=err, **command.pack())
        except CommandError:
            return command.cli.code or 1
        except RuntimeError:  # the Automation API's "summary event never found": the CLI itself ended well
            return 0
    return 0


# --- up ----------------------------------------------------------------------------------------------------------

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
        """After a failed preview or update whose CLI said `failed to load checkpoint`, name the damaged file, its last
        good copy and the command that restores it (a file backend; otherwise Pulumi's message stands)."""
        if not self.checkpoint_damaged:
            return
        from stacks import checkpoint

        again = f"scripts/up {self.stack}" + (" --local-cluster" if self.local_cluster else "")
        checkpoint.command(self.stack, restore_command=f"{again} --restore-checkpoint")

    def saw(self) -> None:
        self.checkpoint_damaged = self.checkpoint_damaged or CHECKPOINT_DAMAGED in self.cli.stderr

    def recover_lock(self, target: Stack) -> bool:
        """True when every lock the refused update named was stale and is cleared (`pulumi cancel`), with its pending
        operations resolved (`pulumi refresh --clear-pending-creates`); False, with the holder named and what to do,
        when one is held by a live `pulumi` or by another host."""
        from pulumi.automation.errors import CommandError

        holders = lock_holders(self.cli.stderr)
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
                    f"up: stack {self.stack} is locked by a running pulumi ({user}@{host}, pid {pid}, since {since}): "
                    f"wait for it to finish; this update changed nothing."
                )
            else:
                err(
                    f"up: stack {self.stack} is locked by {user}@{host} (pid {pid}, since {since}), another host: wait "
                    f"for its update to finish. Only if that host is gone and its update is dead: pulumi cancel -s "
                    f"{self.stack} --yes, then scripts/up {self.stack}."
                )
        if live:
            return False
        for user, host, pid, since in holders:
            err(
                f"up: stack {self.stack} was locked by a pulumi that is gone ({user}@{host}, pid {pid}, since "
                f"{since}): clearing the lock (pulumi cancel) and resolving its pending operations (pulumi refresh)"
            )
        try:
            target.cancel()
            # A render-mode stack has no cluster to refresh from (scripts/render-state keeps its folder honest).
            if not self.render_mode:
                # A create that was in flight may or may not have happened: forget it; `up` creates or adopts it.
                target.refresh(
                    clear_pending_creates=True, on_output=err, on_error=err, config_file=self.pack()["config_file"]
                )
        except CommandError:
            return False
        return True

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
                if attempt == 1 and self.recover_lock(target):
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

    def lock_left(self) -> bool:
        """A lock of this stack on the file backend. The preview does not take the lock; the update clears a stale one
        (recover_lock), so a locked stack is updated even when the preview proposes nothing."""
        dirs = file_stack_dirs(self.stack)
        return dirs is not None and dirs[1].is_dir() and any(dirs[1].glob("*.json"))

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
        end_dead_sessions(self.runs_dir)
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
        if self.lock_left() or not self.nothing_to_do(events):
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


def up(argv: list[str]) -> int:
    """`python -m stacks up [STACK] [--local-cluster] [--restore-checkpoint]` (what scripts/up runs)."""
    stack, local_cluster, restore = "dev", False, False
    for arg in argv:
        if arg == "--local-cluster":
            local_cluster = True
        elif arg == "--restore-checkpoint":
            restore = True
        elif arg.startswith("-"):
            err("usage: scripts/up [STACK] [--local-cluster] [--restore-checkpoint]")
            return 2
        else:
            stack = arg
    if status := readable(stack):
        return status
    with Up(stack, local_cluster) as command:
        return command.run(restore)
