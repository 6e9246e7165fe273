"""Shared fixtures: Pulumi's mock runtime (installed per test, never at import) and stack configs."""

from __future__ import annotations

import copy
import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pulumi.runtime import mocks as pulumi_mocks  # noqa: E402
from pulumi.runtime.settings import SETTINGS  # noqa: E402
from pulumi.runtime.stack import run_pulumi_func  # noqa: E402
from pulumi.runtime.sync_await import _sync_await  # noqa: E402

from core.stackfile import read_config, stack_file  # noqa: E402
from stacks import sdk_runtime  # noqa: E402
from stacks.mocks import _RecordingMocks  # noqa: E402


def module_rank(item: pytest.Item) -> int:
    """0 for a module that deploys (marker `cluster`), 1 for one that runs the engine (`e2e`), 2 for the rest."""
    markers = {mark.name for mark in item.iter_markers()}
    return 0 if "cluster" in markers else 1 if "e2e" in markers else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `make test`'s workers (pytest-xdist, whole modules each, `--no-loadscope-reorder`), the modules that
    deploy go first and the short unit modules last, so that those fill the end of the run instead of one worker
    finishing a long site module alone. A module keeps its tests' order (several are steps of one deployment)."""
    if not hasattr(config, "workerinput"):
        return
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        rank[module] = min(rank.get(module, 2), module_rank(item))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


class Cluster:
    """What a program run under the mocks registered: Kubernetes objects by kind and name."""

    def __init__(self, recorder: _RecordingMocks):
        self._recorder = recorder

    @property
    def manifests(self) -> list[dict]:
        return self._recorder.manifests

    @property
    def types(self) -> list[str]:
        """The type token each manifest was registered with, in the same order."""
        return self._recorder.types

    def of_kind(self, kind: str) -> list[dict]:
        return [m for m in self.manifests if m["kind"] == kind]

    def get(self, kind: str, name: str) -> dict:
        found = [m for m in self.of_kind(kind) if m["metadata"]["name"] == name]
        assert found, f"no {kind} named {name}; have {[m['metadata']['name'] for m in self.of_kind(kind)]}"
        return found[0]


@pytest.fixture
def run_under_mocks() -> Callable[[Callable[[], Any]], Cluster]:
    """Run a function that creates resources under Pulumi's mock runtime; return what it created."""

    def run(fn: Callable[[], Any]) -> Cluster:
        recorder = _RecordingMocks()
        pulumi_mocks.set_mocks(recorder, project="rebel100-serving", stack="test", preview=False)
        SETTINGS.rpc_manager.clear()
        SETTINGS.outputs.clear()
        sdk_runtime.install()  # as the program and the render run
        _sync_await(run_pulumi_func(fn))
        return Cluster(recorder)

    return run


def stack_config(stack: str, **overrides: Any) -> dict[str, str]:
    """A stack file's config map with `rebel100:` keys overridden (objects merged one level deep)."""
    config, _ = read_config(stack_file(stack))
    for key, value in overrides.items():
        full = f"rebel100:{key}"
        if isinstance(value, dict) and full in config:
            merged = json.loads(config[full])
            merged.update(value)
            value = merged
        config[full] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return config


@pytest.fixture
def prod_config() -> dict[str, str]:
    return stack_config("prod-4p4d")


def container(deployment: dict, name: str, init: bool = False) -> dict:
    spec = deployment["spec"]["template"]["spec"]
    for item in spec.get("initContainers" if init else "containers", []):
        if item["name"] == name:
            return item
    raise AssertionError(f"no container {name}")


def arg_value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def env_map(item: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in item.get("env", [])}


def deep(obj: Any) -> Any:
    return copy.deepcopy(obj)


def written_stack(folder: pathlib.Path, text: str, name: str = "user") -> pathlib.Path:
    """A stack file as a user writes it: `text` is the YAML under `config:` (indented as in the file, or not)."""
    import textwrap

    body = textwrap.indent(textwrap.dedent(text).strip("\n"), "  ")
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(f"config:\n{body}\n")
    return path


def stack_file_refusals(folder: pathlib.Path, text: str) -> list[tuple[str, str, str]]:
    """(key path, message, policy) of every issue the gate finds in the stack file `text` (written_stack), read as
    `python -m stacks check` reads it; [] when it is valid."""
    from core.gate import ConfigError
    from core.stackfile import load_stack

    try:
        load_stack(written_stack(folder, text), "user")
    except ConfigError as error:
        return [(issue.path, issue.message, issue.policy) for issue in error.issues]
    return []
