"""The real program under Pulumi's mock runtime: what it registers and exports, for the tests that hold
the offline render (`stacks/render.py`) to it and for the component tests."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.settings import SETTINGS, get_root_resource, set_root_resource
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from core.gate import load_config
from core.stackfile import program_config
from objects.manifests import plain
from stacks import sdk_runtime
from stacks.render import Rendered

PROJECT = "rebel100-serving"
KUBERNETES_PREFIX = "kubernetes:"


@dataclasses.dataclass(frozen=True)
class Registration:
    """One `RegisterResource` request as the engine would get it: the resource and the URNs it depends on (its
    `dependencies`: what `depends_on` expanded to, and the resources its inputs' Outputs came from)."""

    urn: str
    type: str
    custom: bool
    parent: str  # the parent's URN (the stack's for a top-level resource)
    dependencies: tuple[str, ...]


class _RecordingMocks(pulumi.runtime.Mocks):
    """Records the inputs of every Kubernetes resource; returns them as the resource's state."""

    def __init__(self) -> None:
        self.manifests: list[dict] = []
        self.types: list[str] = []  # the type token of each manifest, in the same order
        # Every registration but the stack's, in the order the monitor got them (from the SDK's executor threads).
        self.registrations: list[Registration] = []
        self._lock = threading.Lock()

    def registered(self, registration: Registration) -> None:
        with self._lock:
            self.registrations.append(registration)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if args.custom and args.typ.startswith(KUBERNETES_PREFIX):
            self.manifests.append(_manifest(args.inputs))
            self.types.append(args.typ)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock monitor, also recording each registration's dependencies (MockResourceArgs does not carry them)."""

    def __init__(self, mocks: _RecordingMocks) -> None:
        super().__init__(mocks)
        self.recorder = mocks

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.recorder.registered(
                Registration(
                    response.urn, request.type, bool(request.custom), request.parent, tuple(request.dependencies)
                )
            )
        return response


def _manifest(inputs: dict) -> dict:
    """The object as Kubernetes sees it, without what Pulumi adds (`__`-prefixed keys) and with a
    secret's value in place of its wrapper."""
    return plain(_unwrap_secrets({k: v for k, v in inputs.items() if not k.startswith("__")}))


def _unwrap_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return _unwrap_secrets(value["value"])
        return {k: _unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v) for v in value]
    return value


class _RecordingLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """The default policy, recording every loop it makes: the mock monitor gives each of its executor
    threads a loop of its own, and those are closed with `close_loops` when the run is over. Left to
    the garbage collector, a loop's socket may be finalised before the loop, and its __del__ then prints
    "Exception ignored ... Invalid file descriptor: -1" at exit. (Recording them is what finds them
    cheaply: a scan of every object in the heap took a fifth of the render.)"""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[asyncio.AbstractEventLoop] = []

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        self.loops.append(loop)
        return loop

    def close_loops(self) -> None:
        for loop in self.loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()


def run_under_mocks(body: Callable[[], Any], config: dict[str, str], secret_keys: list[str], stack: str) -> Rendered:
    """Run `body` (a Pulumi program) under the mock runtime and record what it registers."""
    recorder, outputs = _record(body, config, secret_keys, stack)
    return Rendered(manifests=recorder.manifests, outputs=outputs)


def _record(
    body: Callable[[], Any], config: dict[str, str], secret_keys: list[str], stack: str
) -> tuple[_RecordingMocks, dict]:
    # A loop of our own, set before the mocks make their futures, and closed when done together with
    # the executor threads (the mock monitor gives each thread a loop of its own): a loop left for the
    # garbage collector at exit prints "Exception ignored in BaseEventLoop.__del__".
    previous_policy = asyncio.get_event_loop_policy()
    policy = _RecordingLoopPolicy()
    asyncio.set_event_loop_policy(policy)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        recorder = _RecordingMocks()
        # A stack resource of its own: set_mocks makes one only when none is set, and the one an earlier run in this
        # thread left would keep that run's exports (a P/D stack's `prefill` in an AGG stack's outputs).
        set_root_resource(None)  # type: ignore[arg-type]  # None unsets it; the stub types only a resource
        pulumi_mocks.set_mocks(
            recorder, project=PROJECT, stack=stack, preview=False, monitor=_RecordingMonitor(recorder)
        )
        runtime_config.set_all_config(dict(config), secret_keys)
        SETTINGS.rpc_manager.clear()
        SETTINGS.outputs.clear()
        sdk_runtime.install()
        _sync_await(run_pulumi_func(body))
        root = get_root_resource()
        outputs = dict(getattr(root, "outputs", None) or {})
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        policy.close_loops()
        asyncio.set_event_loop(None)
        asyncio.set_event_loop_policy(previous_policy)
    return recorder, outputs


def run_program(config: dict[str, str], secret_keys: list[str], stack: str) -> Rendered:
    """Run stacks.program.main under mocks with this config; the config gate runs first, as under the engine."""
    from stacks import program  # imported here so that set_mocks is in place first

    load_config(program_config(config), source=f"stack {stack!r}")  # ConfigError before the mock runtime starts
    return run_under_mocks(program.main, config, secret_keys, stack)


def registrations(
    body: Callable[[], Any],
    config: dict[str, str] | None = None,
    secret_keys: Sequence[str] = (),
    stack: str = "test",
) -> list[Registration]:
    """Every resource `body` registers under the mock runtime (components, providers and the built-in resources
    included, the stack itself not), with its dependencies, in the order the monitor got them."""
    recorder, _ = _record(body, dict(config or {}), list(secret_keys), stack)
    return recorder.registrations


def program_registrations(config: dict[str, str], secret_keys: list[str], stack: str) -> list[Registration]:
    """`registrations` of stacks.program.main with this config; the config gate runs first, as under the engine."""
    from stacks import program

    load_config(program_config(config), source=f"stack {stack!r}")
    return registrations(program.main, config, secret_keys, stack)
