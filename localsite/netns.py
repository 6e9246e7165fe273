"""The local site's pod network: one network namespace per pod on a private bridge, loopback-range addresses only.

    site netns (anchor: `unshare --net sleep`)      br0 127.1.255.254/16 (SITE_ADDRESS), lo 127.0.0.1/32
      └─ veth v<ip> ── eth0 of a pod netns          eth0 <pod IP>/16 (kwok hands pod IPs out of POD_CIDR),
                                                     lo 127.0.0.1/32: `localhost` stays the pod's own

Why: the programs of a pod bind every address (the sidecar :8000-8003, the engines :8000 or :8200-8203) and the
sidecar reaches its engine at `localhost`, as in a Kubernetes pod; two pods in one namespace would collide. The
127.0.0.0/8 route that Linux puts on `lo` is cut to 127.0.0.1/32 and `route_localnet` lets 127.1.0.0/16 travel
over the veths and the bridge, so pods reach each other by their pod IPs. Nothing here is attached to a physical
interface or touches the host's namespace: the host and the site meet only through sockets this process creates
in one namespace and uses from another (`socket_in`), which is how the gateway's listener on the host's 127.0.0.1
and the API server's relay into the site are made.

Each namespace lives as long as its anchor process (the pod's "pause" process); stopping the anchor by its pid
removes the namespace with its veth. Needs root, util-linux (unshare, nsenter) and iproute2 (ip).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

from localsite import procs

POD_CIDR = ipaddress.ip_network("127.1.0.0/16")
SITE_ADDRESS = ipaddress.ip_address("127.1.255.254")  # the bridge's: the site's own services (API relay)
CLONE_NEWNET = 0x40000000
ETH_P_ARP, ETH_P_IP = 0x0806, 0x0800
BROADCAST = b"\xff" * 6
GARP_COUNT, GARP_INTERVAL_S = 3, 0.05
_libc = ctypes.CDLL(None, use_errno=True)


class NetnsError(RuntimeError):
    """A namespace could not be made or wired (the command and its output are in the message)."""


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")


@dataclass(frozen=True)
class Namespace:
    """A network namespace held by its anchor process."""

    anchor: procs.Recorded

    @property
    def path(self) -> str:
        return f"/proc/{self.anchor.pid}/ns/net"

    def alive(self) -> bool:
        return self.anchor.alive()

    def run(self, *argv: str) -> None:
        """Run a short command inside the namespace (ip, sysctl), failing with its output."""
        _run("nsenter", f"--net={self.path}", "--", *argv)

    def command(self, argv: list[str]) -> list[str]:
        """The command line that runs `argv` inside the namespace (nsenter execs it: the pid is the program's)."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def loopback_only_local(self) -> None:
        """`lo` up with 127.0.0.1/32 instead of /8, and 127/8 routable on other interfaces."""
        self.run("ip", "link", "set", "lo", "up")
        self.run("ip", "addr", "replace", "127.0.0.1/32", "dev", "lo")
        self.run("ip", "addr", "del", "127.0.0.1/8", "dev", "lo")
        self.run("sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1", "net.ipv4.conf.default.route_localnet=1")


def new_namespace(registry: procs.Registry, name: str) -> Namespace:
    """A new network namespace anchored by `unshare --net sleep infinity`, recorded under `name`."""
    anchor = registry.start(name, ["unshare", "--net", "sleep", "infinity"])
    ns = Namespace(anchor)
    for _ in range(200):  # unshare has run once /proc/<pid>/ns/net differs from ours
        with contextlib.suppress(OSError):
            if os.readlink(ns.path) != os.readlink("/proc/self/ns/net"):
                return ns
        if not anchor.alive():
            break
        procs.sleep(0.01)
    registry.stop(name)
    raise NetnsError(f"unshare --net did not make a namespace for {name} (is this root, with util-linux?)")


def veth_name(ip: ipaddress.IPv4Address) -> str:
    """The site side's interface name of a pod (at most 15 characters: v + the last two octets in hex)."""
    return "v" + ip.packed[2:].hex()


class Site:
    """The site namespace and its bridge; pods are wired into it with `attach`."""

    def __init__(self, registry: procs.Registry):
        self.registry = registry
        self.ns = new_namespace(registry, "site-netns")
        self.ns.loopback_only_local()
        self.ns.run("ip", "link", "add", "br0", "type", "bridge")
        self.ns.run("ip", "addr", "add", f"{SITE_ADDRESS}/{POD_CIDR.prefixlen}", "dev", "br0")
        self.ns.run("ip", "link", "set", "br0", "up")
        self.ns.run("sysctl", "-qw", "net.ipv4.conf.br0.route_localnet=1")

    def attach(self, name: str, ip: str) -> Namespace:
        """A new namespace for a pod, with eth0 at `ip` on the site's bridge."""
        address = ipaddress.ip_address(ip)
        if not isinstance(address, ipaddress.IPv4Address) or address not in POD_CIDR or address == SITE_ADDRESS:
            raise NetnsError(f"pod IP {ip} is outside the site's pod range {POD_CIDR} (scripts/cluster --pod-cidr)")
        veth = veth_name(address)
        # A pod IP is recycled when its pod goes (kwok); the kernel removes the old pod's veth asynchronously
        # after its anchor stopped, so a leftover of that name is the old pod's: delete it (both ends go).
        with contextlib.suppress(NetnsError):
            self.ns.run("ip", "link", "del", veth)
        pod = new_namespace(self.registry, name)
        try:
            self.ns.run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(pod.anchor.pid))
            self.ns.run("ip", "link", "set", veth, "master", "br0", "up")
            pod.loopback_only_local()
            pod.run("sysctl", "-qw", "net.ipv4.conf.eth0.route_localnet=1")
            pod.run("ip", "addr", "add", f"{address}/{POD_CIDR.prefixlen}", "dev", "eth0")
            pod.run("ip", "link", "set", "eth0", "up")
            announce(pod, address)
        except (NetnsError, OSError):
            self.registry.stop(name)
            raise
        return pod


def announce(ns: Namespace, address: ipaddress.IPv4Address, interface: str = "eth0") -> None:
    """Gratuitous ARPs of `address` from `interface` in `ns`, as the CNI bridge plugin sends for a new pod: kwok gives
    a pod IP out again, and every namespace that talked to the old pod keeps its MAC (REACHABLE for 15-45 s), so
    without them its packets to the new pod went to a MAC no longer on the bridge (a connect hung 30 s). A GARP
    overrides an existing entry (the kernel's arp_process); sent a few times, as the first may leave before the
    new link carries."""
    with entered(ns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
    with sock:
        sock.bind((interface, ETH_P_ARP))
        mac = sock.getsockname()[4]
        arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 1, mac, address.packed, bytes(6), address.packed)
        frame = (BROADCAST + mac + struct.pack("!H", ETH_P_ARP) + arp).ljust(60, b"\0")
        for attempt in range(GARP_COUNT):
            if attempt:
                procs.sleep(GARP_INTERVAL_S)
            sock.send(frame)


@contextlib.contextmanager
def entered(ns: Namespace) -> Iterator[None]:
    """This thread inside `ns` for the block (setns is per thread): a socket made here stays in `ns` after it."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(ns.path, os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise NetnsError(f"setns into {ns.path}: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:  # a thread left in the site's namespace would be a bug
                raise NetnsError(f"setns back to this process's namespace: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(target)
        os.close(own)


def listener_in(ns: Namespace | None, host: str, port: int) -> socket.socket:
    """A listening TCP socket bound in `ns` (None: this process's namespace)."""
    with entered(ns) if ns else contextlib.nullcontext():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def connect_in(ns: Namespace, host: str, port: int, timeout: float = 5.0) -> socket.socket:
    """A TCP connection made from inside `ns` (e.g. the tests reading a pod's /metrics at its pod IP)."""
    with entered(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    # As http.client's own connect(): without it a request's writes wait on the peer's delayed ACK (+40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.connect((host, port))
    except OSError:
        sock.close()
        raise
    return sock
