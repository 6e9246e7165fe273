"""A copy of the project driven by the real Pulumi CLI, for the end-to-end and local-cluster tests:
toolchain lookup, the copy with its own backend, PULUMI_HOME and passphrase, and a CLI runner."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import uuid

from core.stackfile import PROJECT_ROOT
from tests.prerequisites import checked_dir

# What a copy leaves out: local state, caches, renders and the tests themselves.
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", ".pulumi-*", ".cluster", "build", "__pycache__", ".pytest_cache", "tests", "benchmarks"
)


def toolchain_dir() -> str | None:
    """The bin folder with pulumi, the Python language host and the Kubernetes provider, as
    `scripts/install-pulumi --check` finds it (on PATH or in its cache; it never builds)."""
    return checked_dir(str(PROJECT_ROOT / "scripts" / "install-pulumi"), "--check")


def dead_pid() -> int:
    """The pid of a process that has ended (no process has it now)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


class Project:
    """A copy of the project with its own file backend, PULUMI_HOME and passphrase."""

    def __init__(self, root: pathlib.Path, bin_dir: str):
        self.root = root
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PULUMI_HOME": str(root / ".pulumi-home"),
            "PULUMI_BACKEND_URL": f"file://{root / '.pulumi-state'}",
            "PULUMI_CONFIG_PASSPHRASE": "e2e",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Render mode: the provider refuses a kubeconfig next to renderYamlToDirectory.
            "KUBECONFIG": "",
            # The CLI's and its plugins' temporary files (the Kubernetes provider leaves a copy of its kubeconfig
            # behind) in the copy, not in /tmp, as scripts/up and scripts/preview do (stacks/deploy/command.py,
            # Command).
            "TMPDIR": str(root / ".tmp"),
        }
        (root / ".pulumi-state").mkdir(exist_ok=True)
        (root / ".tmp").mkdir(exist_ok=True)

    def pulumi(self, *args: str, check: bool = False, timeout: int = 900) -> subprocess.CompletedProcess:
        split = args.index("--") if "--" in args else len(args)  # flags go before a `--` value separator
        command = ["pulumi", *args[:split], "--non-interactive", *args[split:]]
        proc = subprocess.run(command, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def select(self, stack: str) -> None:
        self.pulumi("stack", "select", stack, "--create", check=True)

    def lock_dir(self, stack: str) -> pathlib.Path:
        """Where the file backend keeps the stack's locks (pulumi's diy lock.go: locks/ORG/PROJECT/STACK)."""
        return self.root / ".pulumi-state" / ".pulumi" / "locks" / "organization" / "rebel100-serving" / stack

    def plant_lock(self, stack: str, host: str, pid: int) -> pathlib.Path:
        """A lock file as `pulumi` writes one (lockContent in lock.go), held by `pid` on `host`."""
        self.lock_dir(stack).mkdir(parents=True, exist_ok=True)
        path = self.lock_dir(stack) / f"{uuid.uuid4()}.json"
        path.write_text(
            json.dumps({"pid": pid, "username": "someone", "hostname": host, "timestamp": "2026-11-30T12:00:00Z"})
        )
        return path

    def checkpoint(self, stack: str) -> str | None:
        """Digest of the stack's state file in the file backend (None when there is none)."""
        files = sorted((self.root / ".pulumi-state").rglob(f"{stack}.json"))
        return hashlib.sha256(files[0].read_bytes()).hexdigest() if files else None


def tree_digest(folder: pathlib.Path) -> dict[str, str]:
    return (
        {
            str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
        if folder.exists()
        else {}
    )


def copy_project(destination: pathlib.Path, bin_dir: str) -> Project:
    """The project (without tests, state or renders) copied to `destination`, sharing the virtualenv."""
    shutil.copytree(PROJECT_ROOT, destination, ignore=NOT_COPIED)
    (destination / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    # The copy has its own passphrase: drop the salts recorded for the local default one.
    for stack_file in destination.glob("Pulumi.*.yaml"):
        lines = stack_file.read_text().splitlines(keepends=True)
        stack_file.write_text("".join(line for line in lines if not line.startswith("encryptionsalt:")))
    return Project(destination, bin_dir)
