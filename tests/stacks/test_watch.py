"""stacks.site.watch beside a running process: an API server that does not answer ends the update within its bound."""

from __future__ import annotations

import subprocess

import pytest

from core.config import StackConfig
from host.ports import random_free_block
from stacks.site import watch
from tests.cluster.conftest import cluster_bin_dir
from tests.prerequisites import require
from tests.signals import default_sigint


def test_an_unreachable_api_server_cancels_the_update(tmp_path, monkeypatch, capsys):
    bins = require(cluster_bin_dir(), "no kubectl of the local cluster (run `scripts/cluster build`)")
    monkeypatch.setenv("PATH", f"{bins}:/usr/bin:/bin")
    kubeconfig = tmp_path / "kubeconfig"
    port = random_free_block(1)
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: gone, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: x}}}}]
contexts: [{{name: c, context: {{cluster: gone, user: u}}}}]
current-context: c
""")
    update = subprocess.Popen(["sleep", "300"], preexec_fn=default_sigint)  # stands in for `pulumi up`: SIGINT ends it
    try:
        status = watch(
            StackConfig(), str(kubeconfig), pid=update.pid, grace_seconds=600, unreachable_seconds=1, interval=0.2
        )
        assert update.wait(timeout=30) != 0  # it was interrupted
    finally:
        update.kill()
    err = capsys.readouterr().err
    assert status == 4
    assert "error: the cluster is unreachable: its API server has not answered for 1 s" in err, err
    assert "cancelling `pulumi up`" in err


def test_the_watch_returns_when_the_update_ends_by_itself(tmp_path):
    update = subprocess.Popen(["true"])
    update.wait()
    assert watch(StackConfig(), str(tmp_path / "none"), pid=update.pid, grace_seconds=1) == 0


@pytest.fixture(autouse=True)
def _no_kubeconfig(monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
