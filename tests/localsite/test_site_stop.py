"""`make down` while `make serve` runs: `python -m localsite stop` stops the serving site itself, which stops what it
started, and serving again from the same folder replaces a site still running there. Run against the real `python -m
localsite run` with an API server that does not answer (the site keeps its network and retries; no cluster needed),
so only the site's own processes are in play (needs the built programs, root, unshare and ip, as the site does)."""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from localsite import procs
from tests.localsite.conftest import write_kubeconfig
from tests.prerequisites import require

PROJECT = pathlib.Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


@pytest.fixture
def kubeconfig(tmp_path, site_binaries) -> pathlib.Path:
    """A kubeconfig for an API server on a loopback port nothing listens on."""
    require(
        os.geteuid() == 0 and shutil.which("unshare") and shutil.which("ip") and "yes",
        "the site's network namespaces need root, unshare and ip",
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free now and closed: connections are refused
    return write_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")


class Sites:
    """`python -m localsite run` on one folder, as often as a test asks; what a test leaves running is stopped after
    it, by pid."""

    def __init__(self, kubeconfig: pathlib.Path, folder: pathlib.Path, log: pathlib.Path):
        self.kubeconfig, self.folder, self.log = kubeconfig, folder, log
        self.started: list[subprocess.Popen] = []

    def serve(self) -> subprocess.Popen:
        """A site on the folder, once it has recorded itself and started its network."""
        run = ["run", "--kubeconfig", str(self.kubeconfig), "--dir", str(self.folder)]
        with open(self.log, "ab") as log:  # the site retries the API every second, with a warning each time
            site = subprocess.Popen(
                [sys.executable, "-m", "localsite", *run],
                cwd=PROJECT,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        self.started.append(site)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            record = procs.recorded_site(self.folder)
            network = any(p.name == "site-netns" for p in procs.recorded(self.folder))
            if record is not None and record.pid == site.pid and network:
                return site
            if site.poll() is not None:
                raise AssertionError(f"the site exited {site.returncode}: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        raise AssertionError(f"the site did not start its network within {START_TIMEOUT:.0f} s")

    def close(self) -> None:
        for site in self.started:
            if site.poll() is None:
                site.kill()
                site.wait()
        procs.stop_site(self.folder)


@pytest.fixture
def sites(tmp_path, kubeconfig) -> Iterator[Sites]:
    sites = Sites(kubeconfig, tmp_path / "site", tmp_path / "site.log")
    yield sites
    sites.close()


def stopped(site: subprocess.Popen) -> int:
    try:
        return site.wait(timeout=5)
    except subprocess.TimeoutExpired:
        site.kill()
        site.wait()
        return -1


def test_stop_ends_a_serving_site_and_everything_it_started(sites):
    folder = sites.folder
    site = sites.serve()
    down = subprocess.run(
        [sys.executable, "-m", "localsite", "stop", "--dir", str(folder)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=procs.SITE_STOP_TIMEOUT + 30,
    )
    assert down.returncode == 0, down.stderr
    assert f"stopped site (pid {site.pid})" in down.stdout.splitlines()
    assert stopped(site) == 0  # it stopped as on Ctrl-C, not killed
    assert procs.recorded(folder) == [], "a program of the site still runs"
    assert not (folder / procs.SITE_RECORD).exists()


def test_serving_again_from_the_same_folder_replaces_the_site_there(sites):
    folder = sites.folder
    first = sites.serve()
    first_network = next(p for p in procs.recorded(folder) if p.name == "site-netns")
    second = sites.serve()
    try:
        assert stopped(first) == 0
        assert not first_network.alive()
        assert [p.name for p in procs.recorded(folder)] == ["site-netns"]
    finally:
        second.terminate()
        assert stopped(second) == 0
    assert procs.recorded(folder) == []
    assert not (folder / procs.SITE_RECORD).exists()
