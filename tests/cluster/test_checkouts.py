"""`make up` in checkouts of the project as a user has them (a git repository of the project, no passphrase, no
KUBECONFIG, no Pulumi settings): it leaves every tracked file as it was, `scripts/preview` of the stack it deployed
works as `make up` did, and a second checkout's `make up` runs beside the first, on a block of ports of its own,
where `make down` stops that checkout's cluster alone (docs/local-cluster.md, Two checkouts).

Each checkout starts its own local cluster through `scripts/up --local-cluster` (what `make up` runs; the Makefile's
`venv` step would reinstall the shared virtualenv of this copy, so the script is run directly); both are stopped at
the end by the pids their folders recorded.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
import yaml

from tests.cluster.conftest import process_alive
from tests.prerequisites import require
from tests.pulumi_project import copy_project, toolchain_dir

pytestmark = pytest.mark.cluster

STACK = "prod-4p4d"
UP_TIMEOUT = 1500


class Checkout:
    """A git repository of the project (tracked: what the project tracks) run as a user runs it."""

    def __init__(self, root: pathlib.Path, toolchain: str):
        copy_project(root, toolchain)
        self.root = root
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PULUMI_", "KUBECONFIG", "REBEL100_", "XDG_CONFIG"))
        }
        self.git("init", "-q")
        # The virtualenv is this copy's, linked in (a link: `.venv/` in .gitignore names a folder); a user's own
        # exclusion of it, not a tracked change.
        (root / ".git" / "info" / "exclude").write_text(".venv\n")
        self.git("add", "-A")
        self.git("-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "the project")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.root, env=self.env, capture_output=True, text=True, check=True
        ).stdout

    def run(self, *command: str, timeout: int = UP_TIMEOUT) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(command), cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def up(self) -> subprocess.CompletedProcess:
        return self.run("scripts/up", STACK, "--local-cluster")

    @property
    def cluster_dir(self) -> pathlib.Path:
        return self.root / ".cluster" / "default"

    def port(self) -> int:
        return json.loads((self.cluster_dir / "instance.json").read_text())["port"]

    def cluster_pids(self) -> dict[str, int]:
        return {f.stem: int(f.read_text().split()[0]) for f in sorted((self.cluster_dir / "run").glob("*.pid"))}

    def cluster_runs(self) -> bool:
        return self.run("scripts/cluster", "status", timeout=60).returncode == 0

    def stop_cluster(self) -> None:
        self.run("scripts/cluster", "stop", timeout=120)


def ok(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory, cluster_bins):
    toolchain = require(toolchain_dir(), "no Pulumi toolchain (run `make toolchain`)")
    made: list[Checkout] = []

    def make(name: str) -> Checkout:
        made.append(Checkout(tmp_path_factory.mktemp(name) / "rebel100", toolchain))
        return made[-1]

    yield make
    for checkout in made:
        checkout.stop_cluster()


@pytest.fixture(scope="module")
def first(checkouts) -> Checkout:
    checkout = checkouts("first")
    proc = checkout.up()
    assert proc.returncode == 0, ok(proc)
    return checkout


def test_make_up_leaves_every_tracked_file_as_it_was(first: Checkout):
    assert first.git("status", "--porcelain") == ""
    # The clone's passphrase and the salt of it live outside the tracked stack file.
    tracked = yaml.safe_load((first.root / f"Pulumi.{STACK}.yaml").read_text())
    assert not {"encryptionsalt", "secretsprovider", "encryptedkey"} & set(tracked)
    copy = yaml.safe_load((first.root / ".cluster" / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    assert copy["encryptionsalt"] and copy["config"] == tracked["config"]
    assert (first.root / ".pulumi-home" / "local-cluster.passphrase").stat().st_mode & 0o077 == 0
    again = first.up()  # the second `make up`: nothing to change, nothing written
    assert again.returncode == 0 and "preview: nothing to change" in again.stderr, ok(again)
    assert first.git("status", "--porcelain") == ""


def test_the_preview_of_what_make_up_deployed_works_as_make_up_does(first: Checkout):
    """The PR check of the same stack on the same site, with nothing set: the same passphrase (this clone's), the
    same cluster, the same stack file copy, and no change proposed."""
    proc = first.run("scripts/preview", STACK, "--expect-no-changes")
    assert proc.returncode == 0, ok(proc)
    assert "cluster: the local cluster" in proc.stderr and "is a prod stack" not in proc.stderr
    assert first.git("status", "--porcelain") == ""


def test_a_second_checkout_runs_beside_the_first_and_make_down_stops_its_own_cluster_alone(first: Checkout, checkouts):
    first_pids = first.cluster_pids()
    second = checkouts("second")
    proc = second.up()
    assert proc.returncode == 0, ok(proc)
    assert second.port() != first.port(), (first.port(), second.port())
    if first.port() == 16443:  # the preferred block was the first's: the second says which it took
        assert f"this instance takes {second.port()}..{second.port() + 5}" in proc.stderr, proc.stderr
    assert first.cluster_runs() and second.cluster_runs()
    assert second.git("status", "--porcelain") == ""

    down = second.run("make", "down", timeout=300)
    assert down.returncode == 0, ok(down)
    assert not second.cluster_runs()
    assert first.cluster_runs() and first.cluster_pids() == first_pids
    assert all(process_alive(pid) for pid in first_pids.values())
    # The stopped checkout starts again on the block of ports it remembered, beside the first.
    port = second.port()
    proc = second.run("scripts/cluster", "start", timeout=300)
    assert proc.returncode == 0, ok(proc)
    assert second.port() == port and first.cluster_runs()


def test_a_port_asked_for_that_is_taken_is_refused_naming_the_fix(first: Checkout, checkouts):
    third = checkouts("third")
    env = {**third.env, "REBEL100_CLUSTER_PORT": str(first.port())}
    proc = subprocess.run(
        ["scripts/cluster", "start"], cwd=third.root, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert (
        f"are in use (another checkout's cluster, or another program): choose another base, e.g. `make up "
        f"PORT={first.port() + 10}`" in proc.stderr
    ), proc.stderr
    assert "Traceback" not in proc.stderr and first.cluster_runs()


def test_make_up_over_a_truncated_checkpoint_names_the_command_that_restores_it(first: Checkout):
    """The issue's case: `make up` stops with `failed to load checkpoint`, changing nothing; its message names the last
    good copy and one command, which restores the checkpoint and deploys; the checkout stays clean."""
    checkpoint = first.root / ".pulumi-state" / ".pulumi" / "stacks" / "rebel100-serving" / f"{STACK}.json"
    damaged = checkpoint.read_bytes()[:4096]
    checkpoint.write_bytes(damaged)
    refused = first.up()
    assert refused.returncode != 0 and "failed to load checkpoint" in refused.stderr, ok(refused)
    assert f"The last good copy is .pulumi-state/.pulumi/backups/rebel100-serving/{STACK}/" in refused.stderr, ok(
        refused
    )
    command = refused.stderr.strip().splitlines()[-1].strip()
    assert command == f"scripts/up {STACK} --local-cluster --restore-checkpoint"
    assert checkpoint.read_bytes() == damaged
    restored = first.run(*command.split())
    assert restored.returncode == 0 and "preview: nothing to change" in restored.stderr, ok(restored)
    assert first.git("status", "--porcelain") == ""
