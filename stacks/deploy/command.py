"""One `preview` or `up` of one stack (`Command`): the Pulumi environment (scripts/pulumi-env), the stack's settings,
its passphrase and stack file, the cluster it goes to, a private TMPDIR, and the signals."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any, Self

from pulumi.automation import Stack

from core import stackfile
from core.stackfile import PROJECT_ROOT
from host import stackenv
from stacks.deploy.cli import Cli, Workspace

BASH_OWN = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})  # what the shell that sourced scripts/pulumi-env set for itself


def pulumi_env() -> int:
    """Source scripts/pulumi-env (the toolchain scripts/install-pulumi builds, first on PATH; PULUMI_HOME; the backend)
    into this process's environment, after the command line was read: 0, or 1 when it failed (it says why)."""
    script = PROJECT_ROOT / "scripts" / "pulumi-env"
    proc = subprocess.run(["bash", "-c", '. "$0" && env -0', str(script)], stdout=subprocess.PIPE, cwd=PROJECT_ROOT)
    if proc.returncode:
        return 1
    sourced = (item.split("=", 1) for item in proc.stdout.decode(errors="surrogateescape").split("\0") if "=" in item)
    os.environ.update({name: value for name, value in sourced if name not in BASH_OWN})
    return 0


# --- the cluster ------------------------------------------------------------------------------------------------


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
    look at the same cluster. The two questions to scripts/cluster (does it run, where is its kubectl) are asked side
    by side: two Python starts, one after the other, were 0.3 s of every preview."""
    if "KUBECONFIG" in os.environ:
        return
    script = [sys.executable, str(PROJECT_ROOT / "scripts" / "cluster")]
    with open(os.devnull, "w") as quiet:
        running = subprocess.Popen([*script, "kubeconfig"], stdout=subprocess.PIPE, stderr=quiet, text=True)
        built = subprocess.Popen([*script, "build", "--check"], stdout=subprocess.PIPE, stderr=quiet, text=True)
        kubeconfig, _ = running.communicate()
        bin_dir, _ = built.communicate()
    if running.returncode != 0 or not kubeconfig.strip():
        return
    os.environ["KUBECONFIG"] = kubeconfig.strip().splitlines()[-1]
    if built.returncode == 0 and bin_dir.strip():
        os.environ["PATH"] = f"{bin_dir.strip().splitlines()[-1]}:{os.environ['PATH']}"
    print(f"cluster: the local cluster ({os.environ['KUBECONFIG']})", file=sys.stderr)


class Command:
    """One `preview` or `up` of one stack: its settings, the CLI, the private TMPDIR, and the signals."""

    def __init__(self, stack: str, verb: str) -> None:
        self.stack = stack
        self.verb = verb
        self.path = stackfile.stack_file(stack)
        self.config, _ = stackfile.read_config(self.path)
        self.render_mode = bool(self.config.get("rebel100:renderDirectory"))
        self.policy_config = stackenv.policy_config(self.config)
        self.config_file: pathlib.Path | None = None
        self.runs_dir = stackenv.pulumi_home() / "up-sessions"
        self._cli: Cli | None = None
        self.tmp: str | None = None
        self.env: dict[str, str] = {}
        self.interrupted = False
        self.cancelling = "preview"  # what the running CLI does: preview or update

    @property
    def cli(self) -> Cli:
        """The CLI, made when first needed (a CLI of your own is started once for its version): not for a stack refused
        before it runs a command."""
        if self._cli is None:
            self._cli = Cli(self.runs_dir)
        return self._cli

    # --- signals: Ctrl-C or SIGTERM to the CLI alone, which cancels and unlocks the stack ---------------------
    def on_signal(self, signum: int, _frame: Any) -> None:
        self.interrupted = True
        pid = self._cli.pid if self._cli else None
        if pid is None:
            raise SystemExit(130)
        # The CLI is told first, and the line goes to fd 2 unbuffered: a handler that lands while this thread is
        # inside a print to stderr gets "reentrant call" from a second print, and the cancel would be lost with it.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
        if self.verb == "up":
            if self.cancelling == "preview":
                line = f"up: interrupted: cancelling the preview of {self.stack} (nothing was changed)"
            else:
                line = (
                    f"up: interrupted: cancelling the update of {self.stack} "
                    f"(the next scripts/up {self.stack} resumes it)"
                )
            with contextlib.suppress(OSError):
                os.write(sys.stderr.fileno(), f"{line}\n".encode())

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
        if not self.render_mode and (local_cluster or stackenv.is_local_site(self.stack)):
            self.config_file = stackenv.use_local_site(self.stack)
        else:
            stackenv.use_passphrase(self.policy_config)
        refusal = stackenv.secrets_refusal(self.stack, self.path, self.config)
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            return 1
        return 0

    def stack_object(self, env: dict[str, str]) -> Stack:
        """The stack, selected (`Workspace.select_stack`); `self.env` is its commands' environment beside ours."""
        assert self.tmp is not None
        self.env = {"TMPDIR": self.tmp, **env}
        workspace = Workspace(self.cli, self.env, stackenv.LOCAL_SITE_DIR if self.config_file else PROJECT_ROOT)
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
