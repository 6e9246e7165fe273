"""`make serve` as a user runs it: `scripts/serve` in a copy of the project deploys the stack with `scripts/up` (the
pack, the placement preflight) while the site's agent, the namespace's kubelet, makes its pods Ready; it prints the
base URL, answers a request, and Ctrl-C stops all it started. Run again after its cluster stopped (data kept), it
serves again: the pods of the earlier run are made anew, each with an address of its own.

`up` waits for Ready pods that only the agent makes, so the agent must run while `up` does (it ran after `up` once,
and `make serve` waited forever); a restarted cluster kept pods no agent would ever confirm deleted (the script then
waited forever too), and its fresh pod-IP allocator gave one address to two pods.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import selectors
import signal
import subprocess
import time
import urllib.request

import pytest

from host import ports
from localsite import binaries, procs
from tests.cluster.conftest import cluster_bin_dir
from tests.prerequisites import require
from tests.pulumi_project import Project, copy_project, toolchain_dir

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]

NAMESPACE = "rebel100"
URL_TIMEOUT = 900.0  # the first `up` of prod-4p4d and the pods' start on a busy 2-vCPU machine
STOP_TIMEOUT = 120.0


class Serve:
    """`scripts/serve` of one project copy, in a session of its own (Ctrl-C goes to its whole process group)."""

    def __init__(self, project: Project, env: dict[str, str], log: pathlib.Path):
        self.project, self.env, self.log = project, env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        """The base URL the script prints once the stack serves."""
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                ["scripts/serve"],
                cwd=self.project.root,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        assert self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + URL_TIMEOUT
        while time.monotonic() < deadline:
            if not selector.select(timeout=5):
                assert self.process.poll() is None, f"scripts/serve ended ({self.process.returncode}):\n{self.tail()}"
                continue
            line = self.process.stdout.readline().decode().strip()
            if line.startswith("http://"):
                return line
            assert line or self.process.poll() is None, f"scripts/serve ended ({self.process.poll()}):\n{self.tail()}"
        raise AssertionError(f"scripts/serve printed no URL within {URL_TIMEOUT:.0f} s:\n{self.tail()}")

    def interrupt(self) -> int:
        """Ctrl-C, as a terminal sends it: SIGINT to the script's process group; its exit code."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            running = subprocess.run(
                ["ps", "-o", "pid,etime,stat,args", "--sid", str(self.process.pid)], capture_output=True, text=True
            ).stdout
            os.killpg(self.process.pid, signal.SIGKILL)
            raise AssertionError(
                f"scripts/serve did not stop within {STOP_TIMEOUT:.0f} s of Ctrl-C; still running:\n{running}\n"
                f"its log:\n{self.tail()}"
            ) from None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def chat(base_url: str) -> dict:
    body = {"model": "MiniMaxAI/MiniMax-M2.7", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
    request = urllib.request.Request(
        f"{base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200
        return json.loads(answer.read())


def cluster(project: Project, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["scripts/cluster", *args], cwd=project.root, env=env, capture_output=True, text=True, timeout=300
    )


def site_processes(site_dir: pathlib.Path) -> list[str]:
    """The site and the processes it recorded that still run (localsite.procs keeps their pids under its folder)."""
    site = procs.recorded_site(site_dir)
    return [f"{p.name} (pid {p.pid})" for p in ([site] if site else []) + procs.recorded(site_dir)]


def test_make_serve_serves_stops_on_ctrl_c_and_serves_again_after_a_cluster_restart(tmp_path):
    toolchain = require(toolchain_dir(), "no Pulumi toolchain (run `make toolchain`)")
    require(cluster_bin_dir(), "the local cluster is not built (run `scripts/cluster build` or `make cluster`)")
    try:
        binaries.find()
    except binaries.Missing as err:
        require(None, f"the local site's programs are not built ({err})")
    project = copy_project(tmp_path / "project", toolchain)
    site = tmp_path / "serve"
    env = {
        **project.env,
        "REBEL100_SERVE_DIR": str(site),
        "REBEL100_SERVE_CLUSTER_PORT": str(ports.random_free_block(6)),
        "REBEL100_SERVE_PORT": str(ports.random_free_block(1)),
        "REBEL100_CLUSTER_DIR": str(site / "cluster"),  # for this test's own `scripts/cluster stop`
    }
    serve = Serve(project, env, tmp_path / "serve.log")
    try:
        base_url = serve.start()
        assert chat(base_url)["choices"], serve.tail()
        serve.interrupt()  # 130 from its trap, or 0 when the site, Ctrl-C'd with it, ended first: stopped either way
        assert not site_processes(site / "site"), serve.tail()

        # A restart of the site's cluster (data kept), then `make serve` again.
        assert cluster(project, env, "stop").returncode == 0
        base_url = serve.start()
        # Said by the second start alone: the first found no pod (kubectl's "No resources found" once passed for one).
        assert serve.log.read_text().count("pods of rebel100 left from the last run deleted") == 1, serve.tail()
        assert chat(base_url)["choices"], serve.tail()
        kubeconfig = cluster(project, env, "kubeconfig").stdout.strip()
        listed = subprocess.run(
            [
                f"{cluster_bin_dir()}/kubectl",
                f"--kubeconfig={kubeconfig}",
                "get",
                "pods",
                "-n",
                NAMESPACE,
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        addresses = [pod["status"].get("podIP") for pod in json.loads(listed.stdout)["items"]]
        assert len(addresses) == len(set(addresses)), f"two pods share an address: {sorted(addresses)}"
        serve.interrupt()
        assert not site_processes(site / "site"), serve.tail()
    finally:  # what a failure left: the script, then the site's programs (sessions of their own), then the cluster
        if serve.process is not None and serve.process.poll() is None:
            with contextlib.suppress(AssertionError):
                serve.interrupt()
        procs.stop_site(site / "site")
        cluster(project, env, "stop")
