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

import certifi
import pytest
import yaml

from localsite import procs
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
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                # Any CA bundle the client can load; it never gets to verify a server.
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority": certifi.where()},
                    }
                ],
                "users": [{"name": "u", "user": {"token": "none"}}],
            }
        )
    )
    return path


def localsite(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "localsite", *args],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


@pytest.fixture
def folder(tmp_path) -> Iterator[pathlib.Path]:
    """The sites' folder; whatever a test leaves running there is stopped after it, by pid."""
    folder = tmp_path / "site"
    yield folder
    for site in STARTED.pop(folder, []):
        if site.poll() is None:
            site.kill()
            site.wait()
    procs.stop_site(folder)


STARTED: dict[pathlib.Path, list[subprocess.Popen]] = {}


def serve(kubeconfig: pathlib.Path, folder: pathlib.Path) -> subprocess.Popen:
    """`python -m localsite run` on `folder`, once it has recorded itself and started its network."""
    site = localsite("run", "--kubeconfig", str(kubeconfig), "--dir", str(folder))
    STARTED.setdefault(folder, []).append(site)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        record = procs.recorded_site(folder)
        if (
            record is not None
            and record.pid == site.pid
            and any(p.name == "site-netns" for p in procs.recorded(folder))
        ):
            return site
        if site.poll() is not None:
            raise AssertionError(f"the site exited {site.returncode}: {site.stderr.read() if site.stderr else ''}")
        time.sleep(0.1)
    raise AssertionError(f"the site did not start its network within {START_TIMEOUT:.0f} s")


def stopped(site: subprocess.Popen) -> int:
    try:
        return site.wait(timeout=5)
    except subprocess.TimeoutExpired:
        site.kill()
        site.wait()
        return -1


def test_stop_ends_a_serving_site_and_everything_it_started(kubeconfig, folder):
    site = serve(kubeconfig, folder)
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


def test_serving_again_from_the_same_folder_replaces_the_site_there(kubeconfig, folder):
    first = serve(kubeconfig, folder)
    first_network = next(p for p in procs.recorded(folder) if p.name == "site-netns")
    second = serve(kubeconfig, folder)
    try:
        assert stopped(first) == 0
        assert not first_network.alive()
        assert [p.name for p in procs.recorded(folder)] == ["site-netns"]
    finally:
        second.terminate()
        assert stopped(second) == 0
    assert procs.recorded(folder) == []
    assert not (folder / procs.SITE_RECORD).exists()
