"""localsite/kvrelay.py: what a rank's simulator publishes reaches the EPP's subscriber unchanged, rank by rank."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import threading
import time

import pytest
import zmq

from host import ports
from localsite import kvrelay

PROJECT = pathlib.Path(__file__).resolve().parents[2]


def test_the_relay_forwards_each_ranks_messages_to_that_ranks_subscribers_only():
    first = ports.random_free_block(4)
    pairs = [(first, first + 2), (first + 1, first + 3)]
    stop = threading.Event()
    relay = threading.Thread(target=kvrelay.serve, args=("127.0.0.1", pairs, stop), daemon=True)
    relay.start()
    context = zmq.Context()
    try:
        subscribers, publishers = [], []
        for outer, inner in pairs:
            sub = context.socket(zmq.SUB)
            sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
            sub.setsockopt(zmq.RCVTIMEO, 3000)
            sub.connect(f"tcp://127.0.0.1:{outer}")  # the EPP dials the pod
            pub = context.socket(zmq.PUB)
            pub.connect(f"tcp://127.0.0.1:{inner}")  # the simulator dials too
            subscribers.append(sub)
            publishers.append(pub)
        frames = [b"kv@127.1.0.7@m", b"\x00" * 8, b"payload"]
        got: list[list[bytes]] = [[], []]
        deadline = time.monotonic() + 10
        while not all(got) and time.monotonic() < deadline:  # a PUB drops what it sends before the SUB has joined
            for rank, pub in enumerate(publishers):
                pub.send_multipart([*frames[:2], f"rank{rank}".encode()])
            for rank, sub in enumerate(subscribers):
                try:
                    got[rank] = sub.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    time.sleep(0.05)
        assert got == [[*frames[:2], b"rank0"], [*frames[:2], b"rank1"]]
    finally:
        for socket in [*subscribers, *publishers]:
            socket.close(0)
        context.term()
        stop.set()
        relay.join(5)
    assert not relay.is_alive()


@pytest.mark.parametrize("spec", ["5557", "a:b", "5557:", ":1"])
def test_a_port_pair_that_is_not_two_numbers_is_refused(spec):
    with pytest.raises(ValueError, match="OUTER:INNER"):
        kvrelay.pairs([spec])
    assert kvrelay.main(["127.0.0.1", spec]) == 2


def test_the_sites_stop_command_runs_without_pyzmq(tmp_path):
    """`make down` runs `python -m localsite stop` with the system's Python, which has no pyzmq: nothing on that path
    may import it (it did once, through localsite.programs, and `make down` failed with ModuleNotFoundError)."""
    blocked = "import runpy, sys; sys.modules['zmq'] = None; sys.argv[0] = 'localsite'; "
    blocked += "runpy.run_module('localsite', run_name='__main__', alter_sys=True)"
    proc = subprocess.run(
        [sys.executable, "-c", blocked, "stop", "--dir", str(tmp_path / "site")],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
