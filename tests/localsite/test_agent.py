"""The site's agent (localsite/agent.py) on its own: no cluster, no programs."""

from __future__ import annotations

import threading

import pytest

from localsite import agent as agent_module
from localsite import programs
from tests.localsite.conftest import write_kubeconfig


@pytest.fixture
def agent(tmp_path) -> agent_module.Agent:
    """An agent that never started: a kubeconfig it never dials, no site, no gateway."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    return agent_module.Agent(
        tmp_path / "site", str(kubeconfig), "ns", programs.Binaries("sim", "epp", "sidecar"), "gateway", None
    )


def test_close_stops_every_pod_at_once(agent, monkeypatch):
    """Ctrl-C of `make serve` stops the site's pods as a kubelet does, all at once: a program that ignores SIGTERM
    costs its own pod host.processes.STOP_TIMEOUT, not the sum over prod-4p4d's 9 pods and ~40 programs (a CI run's
    second Ctrl-C outlasted test_serve's 120 s). Each pod's stop waits here until every pod's has begun: one after
    another, the first never returns and the barrier breaks."""
    names = [f"pod-{i}" for i in range(9)]
    agent.pods = {name: agent_module.PodRun(name, f"uid-{name}", f"127.1.0.{i}") for i, name in enumerate(names)}
    all_begun = threading.Barrier(len(names), timeout=30)
    stopped: list[str] = []

    def stop_pod(name: str) -> None:
        all_begun.wait()
        stopped.append(agent.pods.pop(name).name)

    monkeypatch.setattr(agent, "stop_pod", stop_pod)
    agent.close()
    assert sorted(stopped) == names
    assert agent.pods == {}
