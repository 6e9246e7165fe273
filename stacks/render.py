"""Offline render: run the real program under Pulumi's mock runtime and collect the Kubernetes objects.

The files are named as the Kubernetes provider's renderYamlToDirectory names them
(`1-manifest/<apiVersion>-<kind>-<namespace>-<name>.yaml`), so a render of `python -m stacks
render` and of `pulumi up` can be compared file by file.
"""
from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import shutil
import tempfile
from typing import Any, Callable

import pulumi
import pulumi.runtime.config as runtime_config
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.settings import SETTINGS, get_root_resource
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from core.stackfile import program_config, read_config
from core.config import StackConfig
from core.gate import load_config

PROJECT = "rebel100-serving"
KUBERNETES_PREFIX = "kubernetes:"


@dataclasses.dataclass
class Rendered:
    manifests: list[dict]
    outputs: dict[str, Any]


class _RecordingMocks(pulumi.runtime.Mocks):
    """Records the inputs of every Kubernetes resource; returns them as the resource's state."""

    def __init__(self) -> None:
        self.manifests: list[dict] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if args.custom and args.typ.startswith(KUBERNETES_PREFIX):
            self.manifests.append(_manifest(args.inputs))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def _manifest(inputs: dict) -> dict:
    """The object as Kubernetes sees it, without what Pulumi adds (`__`-prefixed keys)."""
    return _plain({k: v for k, v in inputs.items() if not k.startswith("__")})


# Keys that lead an object when it is written (`name` first reads like hand-written YAML).
_LEADING_KEYS = ("apiVersion", "kind", "metadata", "name")


def _plain(value: Any) -> Any:
    """Plain YAML-able data in a stable key order; whole numbers back to int (the wire carries doubles)."""
    if isinstance(value, dict):
        keys = [k for k in _LEADING_KEYS if k in value] + sorted(k for k in value if k not in _LEADING_KEYS)
        return {k: _plain(value[k]) for k in keys if value[k] is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
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
        pulumi_mocks.set_mocks(recorder, project=PROJECT, stack=stack, preview=False)
        runtime_config.set_all_config(dict(config), secret_keys)
        SETTINGS.rpc_manager.clear()
        SETTINGS.outputs.clear()
        _sync_await(run_pulumi_func(body))
        root = get_root_resource()
        outputs = dict(getattr(root, "outputs", None) or {})
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        policy.close_loops()
        asyncio.set_event_loop(None)
        asyncio.set_event_loop_policy(previous_policy)
    return Rendered(manifests=recorder.manifests, outputs=outputs)


def run_program(config: dict[str, str], secret_keys: list[str], stack: str) -> Rendered:
    """Run stacks.program.main under mocks with this config; the config gate runs first, as under the engine."""
    from stacks import program  # imported here so that set_mocks is in place first

    load_config(program_config(config), source=f"stack {stack!r}")  # ConfigError before the mock runtime starts
    return run_under_mocks(program.main, config, secret_keys, stack)


def render_unchecked(cfg: StackConfig, stack: str = "unchecked") -> list[dict]:
    """The objects of a parsed config that skipped the gate's cross-field rules: what the pack alone
    would see. For tests that compare the two gates; a user's path always goes through the gate."""
    from stacks import compose

    return run_under_mocks(lambda: compose.build(cfg), {}, [], stack).manifests


def render_stack_file(path: pathlib.Path, stack: str) -> Rendered:
    config, secrets = read_config(path)
    return run_program(config, secrets, stack)


def manifest_path(manifest: dict) -> str:
    """The provider's file name for an object (`:` and `/` become `_`; cluster objects in `default`)."""
    def sanitise(text: str) -> str:
        return text.replace("/", "_").replace(":", "_")
    namespace = manifest.get("metadata", {}).get("namespace") or "default"
    folder = "0-crd" if manifest["kind"] == "CustomResourceDefinition" else "1-manifest"
    return f"{folder}/{sanitise(manifest['apiVersion'])}-{manifest['kind'].lower()}-{namespace}-{manifest['metadata']['name']}.yaml"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the EPP config, probe scripts) as literal blocks, readable in review."""


def _str(dumper: yaml.SafeDumper, text: str):
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(manifest: dict) -> str:
    return yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, width=120)


def write(manifests: list[dict], out: pathlib.Path) -> list[pathlib.Path]:
    """Replace `out` with one YAML file per object, atomically: a failed render leaves `out` as it was."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    written = []
    try:
        for manifest in manifests:
            target = staging / manifest_path(manifest)
            if target.exists():
                raise ValueError(f"two objects render to {manifest_path(manifest)}: object names must be unique")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(to_yaml(manifest))
            written.append(out / target.relative_to(staging))
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return sorted(written)
