"""lmcache's own loader over what the stacks render: `LMCacheEngineConfig.from_env()` of lmcache 0.5.6 reads the
LMCache ConfigMap of every stack that has one (the environment the prefill pod gets through envFrom), and every
LMCACHE_* name in it is one lmcache knows. The gate's list of known names (core/versions/data) is checked against
the same installed lmcache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from core import serving
from core.versions import lmcache as lmcache_facts
from tests.policy.conftest import STACKS
from tests.policy.fixtures import PREFILL

PROGRAM = f"lmcache=={lmcache_facts.VERSION}"
LMCACHE_CONFIG_MAP = "minimax-m27-lmcache"

# Runs in a child process with only lmcache on its path: the ConfigMap's keys are its whole LMCACHE_* environment.
LOAD = r"""
import json, os, sys, logging
from importlib.metadata import version
from lmcache.v1.config import LMCacheEngineConfig, _CONFIG_DEFINITIONS, _CONFIG_ALIASES
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep())
for name in ("lmcache", "lmcache.v1.config", "lmcache.v1.config_base"):
    logging.getLogger(name).addHandler(Keep())
config = LMCacheEngineConfig.from_env()
known = {"LMCACHE_" + k.upper(): k for k in list(_CONFIG_DEFINITIONS) + list(_CONFIG_ALIASES)}
given = {k: v for k, v in os.environ.items() if k.startswith("LMCACHE_")}
json.dump({"version": version("lmcache"),
           "unknown": sorted(k for k in given if k not in known),
           "values": {k: repr(getattr(config, known[k])) for k in given if k in known},
           "extra_config": config.extra_config,
           "warnings": [r for r in records if "Failed to parse" in r or "Unknown" in r]}, sys.stdout)
"""


def load_with_lmcache(cache, env: dict[str, str]) -> dict:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("LMCACHE_")}
    child_env.update(env)
    child_env["PYTHONPATH"] = str(cache / "lmcache")
    proc = subprocess.run([sys.executable, "-c", LOAD], env=child_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{PROGRAM} refused the environment:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def config_map_data(manifests) -> dict[str, str] | None:
    for manifest in manifests:
        if manifest.get("kind") == "ConfigMap" and manifest["metadata"]["name"] == LMCACHE_CONFIG_MAP:
            return {str(k): str(v) for k, v in manifest["data"].items()}
    return None


def prefill_env_from(manifests) -> list[str]:
    """The ConfigMaps the prefill engine takes its environment from (envFrom)."""
    for manifest in manifests:
        if manifest.get("kind") == "Deployment" and manifest["metadata"]["name"] == PREFILL:
            container = manifest["spec"]["template"]["spec"]["containers"][0]
            return [e["configMapRef"]["name"] for e in container.get("envFrom") or [] if "configMapRef" in e]
    return []


@pytest.mark.parametrize("stack", STACKS)
def test_lmcache_reads_the_rendered_config_map(renders, engine_consumers, stack):
    data = config_map_data(renders[stack])
    if data is None:
        assert stack == "agg", f"{stack} renders no LMCache ConfigMap"
        return
    assert LMCACHE_CONFIG_MAP in prefill_env_from(renders[stack]), "prefill does not take the ConfigMap through envFrom"
    loaded = load_with_lmcache(engine_consumers, data)
    assert loaded["version"] == lmcache_facts.VERSION
    assert loaded["unknown"] == [], f"{PROGRAM} does not read {loaded['unknown']}"
    assert loaded["warnings"] == []
    assert set(loaded["values"]) == set(data)
    assert loaded["values"]["LMCACHE_CHUNK_SIZE"] == data["LMCACHE_CHUNK_SIZE"]
    if "LMCACHE_EXTRA_CONFIG" in data:
        assert loaded["extra_config"] == json.loads(data["LMCACHE_EXTRA_CONFIG"])


def test_a_name_lmcache_does_not_read_is_ignored_by_lmcache_and_refused_by_the_gate(engine_consumers):
    """What makes the gate's refusal right: lmcache itself drops the name without a word."""
    loaded = load_with_lmcache(engine_consumers, {"LMCACHE_CHUNKSIZE": "512"})
    assert loaded["unknown"] == ["LMCACHE_CHUNKSIZE"] and loaded["warnings"] == []
    assert "Did you mean LMCACHE_CHUNK_SIZE?" in lmcache_facts.unknown_env("LMCACHE_CHUNKSIZE")


def test_known_names_data_is_lmcaches_own(engine_consumers):
    """core/versions/data/lmcache-0.5.6.json equals what the installed lmcache says (scripts/consumer_facts.py)."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "consumer_facts.py")
    proc = subprocess.run(
        [sys.executable, script, "lmcache"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(engine_consumers / "lmcache")},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == lmcache_facts.facts(), "stale: run `make consumer-facts`"


@pytest.mark.parametrize(
    "text", ['{"rds_max_chunks": 1000}', "{rds_max_chunks: 1000}", "rds_max_chunks=1000", "[1000]", '"x"', ""]
)
def test_the_pack_reads_lmcache_extra_config_as_lmcache_does(engine_consumers, text):
    """The pack judges the RDS budget from LMCACHE_EXTRA_CONFIG only where lmcache itself gets an object from it
    (core.serving.lmcache_extra_config): lmcache drops YAML and other non-JSON without failing."""
    loaded = load_with_lmcache(engine_consumers, {"LMCACHE_EXTRA_CONFIG": text})["extra_config"]
    extra, problem = serving.lmcache_extra_config(text)
    if isinstance(loaded, dict):
        assert (extra, problem) == (loaded, None)
    elif text:
        assert problem is not None and extra == {}, f"lmcache read {text!r} as {loaded!r}"
    else:
        assert (extra, problem, loaded) == ({}, None, None)  # set but empty: no extra config, nothing wrong
