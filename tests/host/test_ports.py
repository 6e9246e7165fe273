"""host/ports.py: a block of free ports on 127.0.0.1, one port held by another socket making it busy."""

from __future__ import annotations

import socket

from host import ports


def test_a_held_port_is_in_use_and_its_block_is_skipped():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert ports.in_use(port)
        assert not ports.block_free(port - 2, 6)
        found = ports.first_free_block([port - 2, port + 1], 6)
        assert found in (port + 1, None)
    assert not ports.in_use(port)
    assert ports.first_free_block([], 6) is None


def test_a_random_block_is_free_and_below_the_ephemeral_range():
    base = ports.random_free_block(6)
    assert base >= 20000 and base + 6 <= max(ports.ephemeral_low(), 21000)
    assert ports.block_free(base, 6)


def test_a_port_the_kernel_picks_is_free():
    assert not ports.in_use(ports.any_free_port())
