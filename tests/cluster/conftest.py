"""A local Kubernetes control plane (scripts/cluster): a simulated Rebel100 site for tests that need an apiserver.

The session fixture `local_cluster` starts its OWN instance (a temp folder, a free block of ports), so it never
touches a developer's `.cluster/default`, and stops it at the end, by the pids `scripts/cluster` recorded, checking
that none of them is left. The tests never build the binaries (that is `scripts/cluster build`, run by
`make cluster` and `.ci/run`): without them they skip, unless REBEL100_REQUIRE_E2E=1 (set by .ci/run), which turns
the skip into a failure.

Use from other tests (e.g. `pulumi up` against it):

    def test_x(local_cluster):
        local_cluster.kubeconfig                                 # its path, e.g. for the provider's kubeconfig config
        subprocess.run(["pulumi", "up", ...], env=local_cluster.env)  # KUBECONFIG set, bin_dir first on PATH
        local_cluster.kubectl("get", "nodes")                    # the built kubectl (server's version), its kubeconfig
        local_cluster.get("pods", namespace="rebel100")          # parsed `kubectl get -o json`
        local_cluster.bin_dir                                    # kubectl, kube-apiserver, etcd, kwok of the instance
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from host.ports import random_free_block
from host.processes import start_time
from tests.prerequisites import checked_dir, require

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = PROJECT_ROOT / "scripts" / "cluster"
START_TIMEOUT = 180  # seconds; a start takes ~10 s here once built


def cluster_bin_dir() -> str | None:
    """The bin folder of the built control plane, as `scripts/cluster build --check` finds it (never builds)."""
    return checked_dir(str(SCRIPT), "build", "--check")


def process_alive(pid: int) -> bool:
    """True while the process exists and is no zombie."""
    return start_time(pid) is not None


@dataclass
class LocalCluster:
    """A running instance: its folder, kubeconfig, base port and the bin dir of its binaries."""

    dir: pathlib.Path
    kubeconfig: pathlib.Path
    port: int
    bin_dir: pathlib.Path

    @property
    def env(self) -> dict[str, str]:
        """The environment for tools that should talk to this instance (kubectl, pulumi, …): KUBECONFIG set and
        the bin dir (with a kubectl of the server's version) first on PATH."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": f"{self.bin_dir}:{os.environ['PATH']}"}

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: int = 120
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        return proc

    def get(self, *args: str, namespace: str | None = None) -> Any:
        """`kubectl get ARGS -o json`, parsed (a list's items for a kind, the object for kind/name)."""
        ns = [f"--namespace={namespace}"] if namespace else []
        found = json.loads(self.kubectl("get", *args, *ns, "-o", "json").stdout)
        return found["items"] if found.get("kind", "").endswith("List") else found

    def apply(self, manifest: str | dict | list, namespace: str | None = None) -> None:
        """Apply YAML text or objects (JSON is YAML) with kubectl."""
        text = (
            manifest
            if isinstance(manifest, str)
            else json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": manifest} if isinstance(manifest, list) else manifest
            )
        )
        ns = [f"--namespace={namespace}"] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=text)

    def preload_weights(self) -> None:
        """Put back the site's pre-loaded weights PVC (`scripts/cluster start` applies it; a module that deletes the
        stack's namespace at its end deletes it too, and the next prod stack's preflight refuses to deploy without)."""
        self.kubectl("apply", "--server-side", "-f", str(PROJECT_ROOT / "cluster" / "site" / "preloaded-weights.yaml"))

    def pids(self) -> dict[str, int]:
        """The components' pids as recorded by scripts/cluster (run/<name>.pid: "<pid> <start time>")."""
        return {f.stem: int(f.read_text().split()[0]) for f in sorted((self.dir / "run").glob("*.pid"))}


def script(*args: str, timeout: int = START_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def start_instance(folder: pathlib.Path, port: int, nodes: int = 4) -> LocalCluster:
    proc = script("start", "--dir", str(folder), "--port", str(port), "--nodes", str(nodes))
    if proc.returncode != 0:
        script("stop", "--dir", str(folder))
        raise AssertionError(f"scripts/cluster start failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    meta = json.loads((folder / "instance.json").read_text())
    return LocalCluster(
        dir=folder,
        kubeconfig=pathlib.Path(proc.stdout.strip().splitlines()[-1]),
        port=port,
        bin_dir=pathlib.Path(meta["bin_dir"]),
    )


def stop_instance(cluster: LocalCluster) -> None:
    """Stop by the recorded pids and check that none of those processes is left."""
    pids = cluster.pids()
    proc = script("stop", "--dir", str(cluster.dir), timeout=120)
    left = {name: pid for name, pid in pids.items() if process_alive(pid)}
    assert proc.returncode == 0, proc.stderr
    assert not left, f"processes left after scripts/cluster stop: {left}"


@pytest.fixture(scope="session")
def cluster_bins() -> str:
    return require(cluster_bin_dir(), "the local cluster is not built (run `scripts/cluster build` or `make cluster`)")


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory, cluster_bins) -> LocalCluster:
    """A running 4-node simulated site of its own for the whole session; stopped (by pid) at the end."""
    cluster = start_instance(tmp_path_factory.mktemp("cluster"), random_free_block(6))
    try:
        yield cluster
    finally:
        stop_instance(cluster)
