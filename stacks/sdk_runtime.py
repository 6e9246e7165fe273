"""Two costs of the Pulumi Python SDK's runtime (pulumi 3.272.0) that grow with the stack, removed before a program
runs: under the engine (`__main__.py`) and under the mock runtime (`python -m stacks render`, the unit tests).

1. `pulumi.runtime.stack.wait_for_rpcs` waits for the program's outstanding outputs with `asyncio.wait(every one,
   FIRST_COMPLETED)` in a loop: each wake-up adds and then removes a callback on every output still pending, so a
   stack of n resources costs about n² (at 256 pools, 558 resources: 3 s of the program's 7 s of CPU,
   docs/performance.md). `wait_for_rpcs` here is the SDK's with that loop awaiting the outputs as they complete
   (`asyncio.as_completed`, one callback each): the same outputs awaited, the first failure raised as soon as it
   happens, outputs made meanwhile picked up by the next round.
2. `pulumi.log.debug` sends each message to the engine and waits for the answer on the program's event loop; the SDK
   logs about four a resource (2,232 round trips at 256 pools, 1.8 s of the loop's time). Here a message not tied to
   a resource goes to the engine from one thread of its own, in order, and the rest is sent at exit, so
   `pulumi preview --debug` shows the same lines.

`tests/stacks/test_sdk_runtime.py` fails when the SDK's own `wait_for_rpcs` or `log.debug` changes, so that a bump of
the SDK re-reads them.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import queue
import threading
from typing import Any

import grpc
import pulumi
import pulumi.log
import pulumi.runtime.settings as sdk_settings
import pulumi.runtime.stack as sdk_stack
from pulumi.runtime.proto import engine_pb2
from pulumi.runtime.settings import SETTINGS, _get_rpc_manager

# The SDK's own functions, as it defines them.
SDK_WAIT_FOR_RPCS = sdk_stack.wait_for_rpcs
SDK_DEBUG = pulumi.log.debug


async def wait_for_rpcs(await_all_outstanding_tasks: bool = True) -> None:
    """The SDK's `wait_for_rpcs` (pulumi/runtime/stack.py), its outputs awaited in the order they complete."""
    pulumi.log.debug("Waiting for outstanding RPCs to complete")
    rpc_manager = _get_rpc_manager()
    while True:
        # As the SDK: await each RPC in turn, re-raising an RPC's failure with its own traceback.
        while len(rpc_manager.rpcs) > 0:
            await asyncio.sleep(0)
            if sdk_settings.excessive_debug_output:
                pulumi.log.debug(f"waiting for quiescence; {len(rpc_manager.rpcs)} RPCs outstanding")
            try:
                await rpc_manager.rpcs.pop()
            except Exception as exn:
                if rpc_manager.unhandled_exception is not None:
                    raise exn from rpc_manager.unhandled_exception.with_traceback(rpc_manager.exception_traceback)
                raise
        if rpc_manager.unhandled_exception is not None:
            raise rpc_manager.unhandled_exception.with_traceback(rpc_manager.exception_traceback)
        pulumi.log.debug("RPCs successfully completed")
        if await_all_outstanding_tasks:
            while True:
                with SETTINGS.lock:
                    if len(SETTINGS.outputs) == 0:
                        break
                    # Taken out of the set, so that outputs made while these are awaited make the next round.
                    pending = list(SETTINGS.outputs)
                    SETTINGS.outputs.clear()
                for completed in asyncio.as_completed(pending):
                    await completed
            pulumi.log.debug("All outstanding outputs completed.")
        # More RPCs or outputs scheduled by what completed: another round.
        if len(rpc_manager.rpcs) == 0:
            break


class DebugSender:
    """Sends debug messages to the engine from a thread of its own, in the order given; `flush` sends what is left."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, engine_pb2.LogRequest] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def send(self, engine: Any, request: engine_pb2.LogRequest) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pulumi-debug-log", daemon=True)
                self._thread.start()
                atexit.register(self.flush)
        self._queue.put((engine, request))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            engine, request = item
            # The engine gone (an RPC error) or its channel closed (ValueError): the program's next call to it reports
            # that, not a debug line, and the rest of the queue is still taken so that `flush` ends.
            with contextlib.suppress(grpc.RpcError, ValueError):
                engine.Log(request)

    def flush(self, timeout: float = 10.0) -> None:
        """Send what is queued and stop the thread (at exit, or a test's end)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)


SENDER = DebugSender()


def debug(msg: str, resource: Any = None, stream_id: int | None = None, ephemeral: bool | None = None) -> None:
    """`pulumi.log.debug` without waiting for the engine; a message tied to a resource goes the SDK's way (it waits
    for the resource's URN, not for the engine)."""
    engine = pulumi.log.get_engine()
    if engine is None or resource is not None:
        SDK_DEBUG(msg, resource, stream_id, ephemeral)
        return
    request = engine_pb2.LogRequest(
        severity=engine_pb2.DEBUG, message=msg, urn="", streamId=stream_id or 0, ephemeral=bool(ephemeral)
    )
    SENDER.send(engine, request)


def install() -> None:
    """Put both in the SDK's modules, where the SDK looks them up when it calls them."""
    sdk_stack.wait_for_rpcs = wait_for_rpcs
    pulumi.log.debug = debug
    pulumi.debug = debug
