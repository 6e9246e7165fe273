"""python -m localsite.kvrelay ADDRESS OUTER:INNER ...: an engine pod's KV-event sockets, as vLLM binds them.

A vLLM engine binds a ZMQ publisher on each rank's port (`--kv-events-config` endpoint `tcp://*:P`, rank r on P + r)
and the EPP's precise prefix cache dials each pod there. The simulator standing for the engine only dials out
(llm-d-inference-sim v0.10.2 pkg/common/publisher.go, `--zmq-endpoint`), so for each rank this relay binds a SUB
socket on ADDRESS:INNER, where that rank's simulator publishes, and a PUB socket on ADDRESS:OUTER, where the EPP
subscribes, and forwards every message unchanged (upstream's perf test pairs its simulators with the same kind of
proxy: llm-d-router v0.10.0 test/perf/config/llm-d-sim-deployment-zmq.yaml). Runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import signal
import sys
import threading

from host import signals

# Where a rank's simulator publishes for the relay: its pod's KV-event port + this (a port no render uses there).
INNER_OFFSET = 10_000


def pairs(specs: list[str]) -> list[tuple[int, int]]:
    """(outer, inner) port of each `OUTER:INNER` argument."""
    found = []
    for spec in specs:
        outer, sep, inner = spec.partition(":")
        if not sep or not outer.isdigit() or not inner.isdigit():
            raise ValueError(f"{spec!r} is not OUTER:INNER (two port numbers)")
        found.append((int(outer), int(inner)))
    return found


def serve(address: str, ports: list[tuple[int, int]], stop: threading.Event | signals.StopSignals) -> None:
    # Imported here: the site's other modules import this one for INNER_OFFSET, and `make down` runs
    # `python -m localsite stop` with the system's Python, which has no pyzmq.
    import zmq

    context = zmq.Context()
    sockets = []
    try:
        for outer, inner in ports:
            sub = context.socket(zmq.SUB)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.setsockopt(zmq.LINGER, 0)
            sub.bind(f"tcp://{address}:{inner}")
            pub = context.socket(zmq.PUB)
            pub.setsockopt(zmq.LINGER, 0)
            pub.bind(f"tcp://{address}:{outer}")
            sockets.append((sub, pub))
        poller = zmq.Poller()
        for sub, _pub in sockets:
            poller.register(sub, zmq.POLLIN)
        while not stop.is_set():
            for sub, _event in poller.poll(200):
                pub = next(p for s, p in sockets if s is sub)
                pub.send_multipart(sub.recv_multipart())
    finally:
        for sub, pub in sockets:
            sub.close()
            pub.close()
        context.term()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    try:
        ports = pairs(argv[1:])
    except ValueError as err:
        print(f"kvrelay: {err}", file=sys.stderr)
        return 2
    serve(argv[0], ports, signals.StopSignals(signal.SIGTERM, signal.SIGINT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
