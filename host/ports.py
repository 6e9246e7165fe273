"""Free ports on 127.0.0.1: a block of ports no program holds, for a local cluster (scripts/cluster) or a site of its
own (sitetests/harness.py, benchmarks/bench.py), below the kernel's ephemeral range. Standard library only."""

from __future__ import annotations

import pathlib
import random
import socket
from collections.abc import Iterable


def in_use(port: int) -> bool:
    """Some program holds `port` on 127.0.0.1 (a port in TIME_WAIT is free: servers bind with SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def block_free(base: int, span: int) -> bool:
    """The `span` ports from `base` are all free."""
    return not any(in_use(port) for port in range(base, base + span))


def first_free_block(bases: Iterable[int], span: int) -> int | None:
    """The first of `bases` whose `span` ports are free; None when none is."""
    return next((base for base in bases if block_free(base, span)), None)


def any_free_port() -> int:
    """A free port the kernel picks (from its ephemeral range), for a server started at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (the ports it hands out to outgoing connections)."""
    return int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def random_free_block(span: int, low: int = 20000, tries: int = 200) -> int:
    """A free block of `span` ports from a random base between `low` and the ephemeral range: one that a run beside
    another (a second checkout's tests) is unlikely to take at the same time."""
    high = max(ephemeral_low(), low + 1000) - span
    found = first_free_block((random.randrange(low, high) for _ in range(tries)), span)
    if found is None:
        raise RuntimeError("no free block of ports on 127.0.0.1")
    return found
