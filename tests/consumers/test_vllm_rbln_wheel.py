"""The vllm-rbln names the render relies on, read from the target release's own wheel (vllm-rbln 0.12.0, downloaded by
scripts/consumers-engine; its +cpu vLLM and rebel-compiler are not served, so it is read, not installed): every KV
connector class of every stack's `--kv-transfer-config` is registered, every VLLM_RBLN_* variable is one it reads."""

from __future__ import annotations

import ast
import zipfile

import pytest

from core.versions import engine as engine_versions
from policy.read.engines import engines, kv_connectors
from policy.read.env import env_value
from tests.policy.conftest import STACKS

PROGRAM = f"vllm-rbln=={engine_versions.TARGET}"
VLLM_OWN_CONNECTORS = {"MultiConnector"}  # registered by vLLM itself, not by the plugin


def wheel_sources(cache) -> dict[str, str]:
    wheels = sorted((cache / "wheels").glob(f"vllm_rbln-{engine_versions.TARGET}-*.whl"))
    assert wheels, f"no {PROGRAM} wheel in {cache / 'wheels'}"
    with zipfile.ZipFile(wheels[0]) as wheel:
        return {
            name: wheel.read(name).decode()
            for name in wheel.namelist()
            if name.endswith(".py") or name.endswith(".dist-info/METADATA")
        }


def registered_connectors(sources: dict[str, str]) -> set[str]:
    """First argument of every `KVConnectorFactory.register_connector("Name", module, class)` call."""
    names = set()
    for text in (text for name, text in sources.items() if name.endswith(".py")):
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "register_connector"
                and "ECConnector" not in ast.unparse(node.func)
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(node.args[0].value)
    return names


def env_names(sources: dict[str, str]) -> set[str]:
    """Keys of `environment_variables` in vllm_rbln/envs.py: the variables vllm-rbln reads."""
    tree = ast.parse(sources["vllm_rbln/envs.py"])
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "environment_variables" for t in node.targets):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError("vllm_rbln/envs.py has no environment_variables")


@pytest.fixture(scope="module")
def sources(engine_consumers):
    return wheel_sources(engine_consumers)


def test_the_wheel_pins_what_the_release_facts_say(sources):
    """core.versions.engine's target release: the vLLM and lmcache-rbln the wheel's METADATA pins."""
    metadata = sources[f"vllm_rbln-{engine_versions.TARGET}.dist-info/METADATA"].splitlines()
    release = engine_versions.target_release()
    assert f"Version: {release.vllm_rbln}" in metadata
    assert f"Requires-Dist: vllm=={release.vllm}+cpu" in metadata
    assert any(
        line.startswith("Requires-Dist: lmcache-rbln") and f">={release.lmcache_rbln}" in line for line in metadata
    )


@pytest.mark.parametrize("stack", STACKS)
def test_every_connector_and_env_name_of_the_render_is_in_the_wheel(renders, sources, stack):
    connectors, variables = set(), set()
    for engine in engines(renders[stack]):
        connectors.update(kv_connectors(engine.flags))
        variables.update(e["name"] for e in engine.container.get("env") or [] if e["name"].startswith("VLLM_RBLN_"))
        assert env_value(engine.container, "VLLM_RBLN_USE_DEVICE_TENSOR") == "1"
    missing = (connectors - VLLM_OWN_CONNECTORS) - registered_connectors(sources)
    assert not missing, f"{PROGRAM} registers no connector {sorted(missing)}"
    unread = variables - env_names(sources)
    assert not unread, f"{PROGRAM} reads no {sorted(unread)}"
    assert variables, f"{stack} renders no VLLM_RBLN_* variable"
    if stack != "agg":
        assert "RblnNixlConnector" in connectors


def test_the_facts_name_what_the_wheel_has(sources):
    """core.versions.engine's connector and env facts are names the target wheel really has."""
    plugin_connectors = {f.name for f in engine_versions.CONNECTORS} - VLLM_OWN_CONNECTORS
    assert plugin_connectors <= registered_connectors(sources)
    assert engine_versions.env_names_read() <= env_names(sources)
