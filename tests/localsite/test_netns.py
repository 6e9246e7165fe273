"""The site's pod network on its own: pods reach each other by pod IP, `localhost` stays each pod's own, the host's
namespace is untouched, and stopping the anchors removes everything (needs root, util-linux and iproute2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from localsite import netns, procs
from tests.prerequisites import require

SERVE = [
    sys.executable,
    "-c",
    "import http.server as h; h.HTTPServer(('0.0.0.0', 8000), h.SimpleHTTPRequestHandler).serve_forever()",
]


@pytest.fixture
def registry(tmp_path):
    require(
        os.geteuid() == 0 and shutil.which("unshare") and shutil.which("ip") and "yes",
        "network namespaces need root, unshare and ip",
    )
    reg = procs.Registry(tmp_path)
    yield reg
    reg.stop_all()
    assert not procs.recorded(tmp_path)


def host_links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout


def get(ns: netns.Namespace, ip: str, port: int = 8000) -> int:
    import http.client

    conn = http.client.HTTPConnection(ip, port, timeout=5)
    conn.sock = netns.connect_in(ns, ip, port)
    conn.request("GET", "/")
    return conn.getresponse().status


def wait_listening(ns: netns.Namespace, ip: str) -> None:
    for _ in range(100):
        try:
            netns.connect_in(ns, ip, 8000, timeout=0.2).close()
            return
        except OSError:
            procs.sleep(0.05)
    raise AssertionError(f"nothing listens on {ip}:8000")


def test_pods_reach_each_other_by_pod_ip_and_localhost_stays_their_own(registry):
    links_before = host_links()
    site = netns.Site(registry)
    a = site.attach("pod-a", "127.1.0.1")
    b = site.attach("pod-b", "127.1.0.2")
    registry.start("server-a", a.command(SERVE), cwd=registry.dir)
    wait_listening(site.ns, "127.1.0.1")
    assert get(b, "127.1.0.1") == 200  # pod to pod
    assert get(site.ns, "127.1.0.1") == 200  # the site (gateway, tests) to a pod
    assert get(a, "127.0.0.1") == 200  # the pod's own localhost (the sidecar to its engine)
    with pytest.raises(OSError):
        get(b, "127.0.0.1")  # another pod's localhost is not a's
    assert host_links() == links_before  # nothing was added to the host's namespace


def test_a_pod_ip_outside_the_site_range_is_refused(registry):
    site = netns.Site(registry)
    with pytest.raises(netns.NetnsError, match=r"outside the site's pod range 127\.1\.0\.0/16"):
        site.attach("pod-x", "10.244.0.5")


def test_stopping_the_anchor_removes_the_pods_interface(registry):
    site = netns.Site(registry)
    site.attach("pod-a", "127.1.0.9")
    veth = netns.veth_name(netns.ipaddress.ip_address("127.1.0.9"))

    def links() -> str:
        return subprocess.run(site.ns.command(["ip", "-o", "link"]), capture_output=True, text=True).stdout

    assert veth in links()
    registry.stop("pod-a")
    for _ in range(100):  # the kernel removes a namespace's interfaces after its last process, asynchronously
        if veth not in links():
            return
        procs.sleep(0.05)
    raise AssertionError(f"{veth} still on the site's bridge after the pod's anchor stopped")


def test_a_pod_ip_given_again_is_reached_at_its_new_pod_at_once(registry):
    """kwok hands a pod IP out again once its pod is gone, often to the pod that replaces it. The pods that talked to
    the old one hold its MAC in their neighbour cache (REACHABLE for 15-45 s): without the new pod's gratuitous ARP
    their connections to that IP went to the old MAC and nowhere, and a decode pod's sidecar waited 30 s on a
    prefill engine (tests/localsite/test_changes.py, CI of 2026-12-03)."""
    site = netns.Site(registry)
    old = site.attach("pod-old", "127.1.0.9")
    client = site.attach("pod-client", "127.1.0.2")
    registry.start("server-old", old.command(SERVE), cwd=registry.dir)
    wait_listening(old, "127.1.0.9")
    assert get(client, "127.1.0.9") == 200  # the client's neighbour cache now holds the old pod's MAC
    assert get(site.ns, "127.1.0.9") == 200  # and the site's (its probes dial pod IPs)
    registry.stop("server-old")
    registry.stop("pod-old")
    new = site.attach("pod-new", "127.1.0.9")
    registry.start("server-new", new.command(SERVE), cwd=registry.dir)
    wait_listening(new, "127.1.0.9")  # from inside the new pod: no neighbour on the way
    for ns in (client, site.ns):
        sock = netns.connect_in(ns, "127.1.0.9", 8000, timeout=2.0)
        sock.close()
