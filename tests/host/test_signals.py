"""host/signals.py: a stop signal noted without a lock, so that a second signal landing inside the first one's handler
cannot leave the process waiting for itself."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

from host import signals

PROJECT = pathlib.Path(__file__).resolve().parents[2]
WAIT = 10.0  # seconds a harness that should return gets; one that deadlocked never does

# SIGINT, as Ctrl-C sends it, and then a SIGTERM at each line Python runs inside the handlers (up to 20): the second
# signal of `make serve`'s Ctrl-C (scripts/serve's trap) at every point where it can land. argv[1]: `event`, the
# threading.Event the site used to set, or `stop-signals`.
HARNESS = """
import os, signal, sys, threading
from host.signals import StopSignals

if sys.argv[1] == "event":
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
else:
    stop = StopSignals(signal.SIGINT, signal.SIGTERM)
sent = 0

def tracer(frame, event, arg):
    global sent
    if event == "line" and sent < 20 and frame.f_code.co_filename != "<string>":
        sent += 1
        os.kill(os.getpid(), signal.SIGTERM)
    return tracer

sys.settrace(tracer)
os.kill(os.getpid(), signal.SIGINT)
sys.settrace(None)
print(stop.is_set(), sent)
"""


def run_harness(kind: str) -> subprocess.CompletedProcess[str] | None:
    """The harness's result, or None when it did not return within WAIT (then it is killed)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HARNESS, kind], cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = process.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_a_second_signal_inside_the_handler_is_noted_too():
    done = run_harness("stop-signals")
    assert done is not None, "the handler waited for itself"
    assert done.returncode == 0, done.stderr
    is_set, sent = done.stdout.split()
    assert is_set == "True" and int(sent) >= 1, done.stdout


def test_the_harness_catches_a_handler_that_takes_a_lock():
    """The contrast: threading.Event's set, interrupted by the second signal while it holds its lock, never returns
    (what kept scripts/serve from stopping once)."""
    assert run_harness("event") is None


def test_signals_arrive_in_order_and_the_loop_reads_them(monkeypatch):
    installed: dict[int, object] = {}
    monkeypatch.setattr(signals.signal, "signal", lambda signum, handler: installed.setdefault(signum, handler))
    stop = signals.StopSignals(signal.SIGTERM, signal.SIGINT)
    assert sorted(installed) == sorted([signal.SIGTERM, signal.SIGINT]) and not stop.is_set()
    installed[signal.SIGTERM](signal.SIGTERM, None)  # type: ignore[operator]
    installed[signal.SIGINT](signal.SIGINT, None)  # type: ignore[operator]
    assert stop.is_set() and stop.received == [signal.SIGTERM, signal.SIGINT]
