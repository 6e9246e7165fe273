"""The SDK runtime's two replacements (stacks/sdk_runtime.py): outputs awaited as they complete, at one callback each;
debug messages sent from a thread of their own, in order, none lost; and a bump of the SDK noticed."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import threading

import pulumi
import pulumi.log
import pulumi.runtime.stack as sdk_stack
import pytest
from pulumi.runtime.proto import engine_pb2
from pulumi.runtime.settings import SETTINGS

from stacks import sdk_runtime
from stacks.sdk_runtime import DebugSender

# sha256 of the SDK's own functions that stacks/sdk_runtime.py stands in for, as pulumi 3.272.0 writes them. When
# this fails, the SDK changed them: read the new ones, carry what changed into sdk_runtime.py (or drop the
# replacement if the SDK no longer needs it), then record the new digests.
SDK_SOURCES = {
    "wait_for_rpcs": (
        sdk_runtime.SDK_WAIT_FOR_RPCS,
        "c0f9027f85ad09255ded0a1908033b490f76d303a3e40b50d3cf47a69265469d",
    ),
    "log.debug": (sdk_runtime.SDK_DEBUG, "381cd6115cca6ca19ddc9416014d9afb086d7b7a9cb3ca8d80f2be24bdb44d6f"),
    "log._log": (pulumi.log._log, "185613096f9dc351865f2df9bd6613990ffd142409e78f01681158ed52743939"),
}


@pytest.mark.parametrize("name", sorted(SDK_SOURCES))
def test_the_sdk_functions_replaced_are_those_read(name: str) -> None:
    function, digest = SDK_SOURCES[name]
    assert hashlib.sha256(inspect.getsource(function).encode()).hexdigest() == digest, name


def test_install_puts_both_where_the_sdk_looks_them_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_stack, "wait_for_rpcs", sdk_runtime.SDK_WAIT_FOR_RPCS)
    monkeypatch.setattr(pulumi.log, "debug", sdk_runtime.SDK_DEBUG)
    monkeypatch.setattr(pulumi, "debug", sdk_runtime.SDK_DEBUG)
    sdk_runtime.install()
    assert sdk_stack.wait_for_rpcs is sdk_runtime.wait_for_rpcs
    assert pulumi.log.debug is pulumi.debug is sdk_runtime.debug
    # run_pulumi_func reads the module's name when it calls it, so the replacement is the one it runs.
    assert "wait_for_rpcs" in sdk_stack.run_pulumi_func.__code__.co_names


class CountingFuture(asyncio.Future):
    """A future that counts the callbacks added to it (asyncio.wait and as_completed add one per future awaited)."""

    added = 0

    def add_done_callback(self, fn, *, context=None):
        CountingFuture.added += 1
        super().add_done_callback(fn, context=context)


def run_outputs(wait, build) -> list[str]:
    """Run `wait` (a wait_for_rpcs) over the outputs `build(loop, done)` puts in SETTINGS.outputs on a loop of its
    own; what completed, in order."""
    loop = asyncio.new_event_loop()
    saved = set(SETTINGS.outputs)
    SETTINGS.outputs.clear()
    SETTINGS.rpc_manager.clear()
    done: list[str] = []
    try:
        build(loop, done)
        loop.run_until_complete(asyncio.wait_for(wait(), timeout=30))
    finally:
        SETTINGS.outputs.clear()
        SETTINGS.outputs.update(saved)
        loop.close()
    return done


def chain(count: int):
    """`count` outputs that complete one after another, each a loop step after the one before: the outputs of
    resources whose registrations come back one at a time."""

    def build(loop: asyncio.AbstractEventLoop, done: list[str]) -> None:
        futures = [CountingFuture(loop=loop) for _ in range(count)]
        SETTINGS.outputs.update(futures)

        def complete(index: int) -> None:
            futures[index].set_result(index)
            done.append(f"output {index}")
            if index + 1 < count:
                loop.call_soon(complete, index + 1)

        loop.call_soon(complete, 0)

    return build


def test_outputs_that_complete_one_at_a_time_cost_one_callback_each() -> None:
    count = 300
    CountingFuture.added = 0
    assert len(run_outputs(sdk_runtime.wait_for_rpcs, chain(count))) == count
    assert CountingFuture.added <= 2 * count
    # The SDK's loop, on the same outputs: a callback on every pending output at every wake-up (the n² of 256 pools).
    CountingFuture.added = 0
    assert len(run_outputs(sdk_runtime.SDK_WAIT_FOR_RPCS, chain(count))) == count
    assert CountingFuture.added > count * count / 8


def test_outputs_made_while_waiting_are_awaited_too() -> None:
    def build(loop: asyncio.AbstractEventLoop, done: list[str]) -> None:
        async def later(name: str) -> None:
            await asyncio.sleep(0)
            done.append(name)

        async def first() -> None:
            await asyncio.sleep(0)
            # An apply that runs when its input resolves makes an output of its own: tracked, not yet awaited.
            SETTINGS.outputs.add(asyncio.ensure_future(later("made while waiting")))
            done.append("first")

        SETTINGS.outputs.add(loop.create_task(first()))

    assert run_outputs(sdk_runtime.wait_for_rpcs, build) == ["first", "made while waiting"]


def test_a_failed_output_is_raised_at_once_though_another_never_completes() -> None:
    def build(loop: asyncio.AbstractEventLoop, done: list[str]) -> None:
        async def fail() -> None:
            await asyncio.sleep(0)
            raise ValueError("the apply failed")

        SETTINGS.outputs.add(loop.create_future())  # waits on something that will never come
        SETTINGS.outputs.add(loop.create_task(fail()))

    with pytest.raises(ValueError, match="the apply failed"):
        run_outputs(sdk_runtime.wait_for_rpcs, build)


class Engine:
    """An engine whose Log answers only once `release` is set, recording what it was sent and from which thread."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.sent: list[tuple[str, int, str]] = []

    def Log(self, request: engine_pb2.LogRequest) -> None:
        self.release.wait(30)
        self.sent.append((request.message, request.severity, threading.current_thread().name))


def test_debug_returns_before_the_engine_answers_and_sends_every_message_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = Engine()
    sender = DebugSender()
    monkeypatch.setattr(sdk_runtime, "SENDER", sender)
    monkeypatch.setattr(pulumi.log, "get_engine", lambda: engine)
    for n in range(50):
        sdk_runtime.debug(f"message {n}")  # would block here if sent on this thread: the engine has not answered
    assert engine.sent == []
    engine.release.set()
    sender.flush()
    assert engine.sent == [(f"message {n}", engine_pb2.DEBUG, "pulumi-debug-log") for n in range(50)]


def test_debug_of_a_resource_and_without_an_engine_go_the_sdks_way(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple] = []
    monkeypatch.setattr(sdk_runtime, "SDK_DEBUG", lambda *args: calls.append(args))
    sender = DebugSender()
    monkeypatch.setattr(sdk_runtime, "SENDER", sender)
    monkeypatch.setattr(pulumi.log, "get_engine", lambda: None)
    sdk_runtime.debug("no engine")
    resource = object()
    monkeypatch.setattr(pulumi.log, "get_engine", lambda: Engine())
    sdk_runtime.debug("of a resource", resource, 7)
    assert calls == [("no engine", None, None, None), ("of a resource", resource, 7, None)]
    assert sender._thread is None  # nothing went through the thread


def test_an_engine_gone_loses_only_its_debug_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A closed channel (ValueError) or an RPC error on one message: the thread goes on, and `flush` ends."""
    sent: list[str] = []

    class Gone:
        def Log(self, request: engine_pb2.LogRequest) -> None:
            if request.message == "closed":
                raise ValueError("Cannot invoke RPC on closed channel!")
            sent.append(request.message)

    sender = DebugSender()
    monkeypatch.setattr(sdk_runtime, "SENDER", sender)
    monkeypatch.setattr(pulumi.log, "get_engine", lambda: Gone())
    for message in ("before", "closed", "after"):
        sdk_runtime.debug(message)
    sender.flush()
    assert sent == ["before", "after"]
