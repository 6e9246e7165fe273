"""Property tests: the config gate and the policy pack judge the same stack the same way.

For generated configs within the schema, the gate's verdict (core.gate) and the pack's verdict on the
render of the same config (stacks.render.render_unchecked, which skips the gate as a hand edit past it
would) agree for every rule both apply; rendering never raises anything but the gate's own error.
Random and malformed stack files always end in one clear error line, never a traceback.
"""
from __future__ import annotations

import pathlib

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import gate, stackfile
from core.config import StackConfig
from policy import catalog, facts
from stacks.render import render_unchecked

# The rules the gate and the pack both apply (the gate tags its issues with the policy's name).
SHARED = ("pp-with-dp", "npu-devices-fit-node", "parallelism-fits-model", "engine-args-in-range", "rds-memory-budget",
          "lmcache-reads-rds-max-chunks", "engine-image-has-features", "vllm-args-known", "lmcache-env-known")
PROD = catalog.load_config(catalog.environment_config("prod"))

role = st.fixed_dictionaries({}, optional={
    "replicas": st.integers(1, 4),
    "tensorParallelSize": st.sampled_from([1, 2, 4]),
    "pipelineParallelSize": st.sampled_from([1, 2, 4, 8, 64]),
    "dataParallelSize": st.sampled_from([1, 2, 3, 4, 8]),
    "enableExpertParallel": st.booleans(),
    "gpuMemoryUtilization": st.sampled_from([None, 0.0, 0.5, 0.8, 0.9, 1.0, 1.2]),
    "extraArgs": st.sampled_from([[], ["--enforce-eager"], ["--foo"], ["--max-logprobs", "5", "--foo_bar=1"]]),
    "extraEnv": st.sampled_from([{}, {"LMCACHE_LOG_LEVEL": "INFO"}, {"LMCACHE_CHUNKSIZE": "512"}]),
})
stack_config = st.fixed_dictionaries({}, optional={
    "hardware": st.fixed_dictionaries({}, optional={
        "npusPerNode": st.sampled_from([4, 8, 16]),
        "nvmeDrivesPerNode": st.integers(1, 4),
        "hbmPerChipletGib": st.sampled_from([24.0, 36.0, 64.0]),
    }),
    "model": st.fixed_dictionaries({}, optional={
        "layers": st.sampled_from([3, 62]), "experts": st.sampled_from([0, 6, 256]),
        "maxContext": st.sampled_from([100000, 204800]),
    }),
    "engine": st.fixed_dictionaries({}, optional={
        "blockSize": st.sampled_from([1024, 4000, 4096]),
        "maxNumBatchedTokens": st.sampled_from([512, 1000]),
        "maxModelLen": st.sampled_from([8192, 204800, 300000]),
        "subBlockCache": st.booleans(),
        # The lmcache-rbln version is the image's; 0.10.x also lacks features the render uses.
        "image": st.sampled_from([f"rebellions/vllm-rbln:{tag}" for tag in ("0.10.2", "0.10.4", "0.11.2", "0.12.0", "v0.13")]),
    }),
    "prefill": role,
    "decode": role,
    "kvTier": st.fixed_dictionaries({}, optional={
        "mode": st.sampled_from(["rds", "cpu", "off"]),
        "rdsMaxChunks": st.integers(1, 5000),
        "rdsDrives": st.one_of(st.none(), st.integers(1, 4)),
        "stagingBufferMib": st.sampled_from([0.0, 512.0, 4096.0]),
        "rdsChunkOverheadMib": st.sampled_from([1.0, 2.0]),
    }),
})


def gate_verdict(cfg: StackConfig) -> set[str]:
    return {issue.policy for issue in gate.validate(cfg) if issue.policy in SHARED}


def pack_verdict(cfg: StackConfig) -> set[str]:
    config = catalog.with_facts(PROD, facts.stack_values(cfg))
    return {v.policy for v in catalog.evaluate(render_unchecked(cfg), config) if v.policy in SHARED}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack_config)
def test_gate_and_pack_agree(values):
    cfg = StackConfig.model_validate(values)
    assert gate_verdict(cfg) == pack_verdict(cfg), values


def test_drives_reach_the_pack():
    """One drive and 3000 chunks: 3000 x 2 MiB x 1 + 512 = 6512 MiB fits 7372.8 MiB in both gates."""
    cfg = StackConfig.model_validate({"kvTier": {"rdsDrives": 1, "rdsMaxChunks": 3000}})
    assert gate.validate(cfg) == []
    assert pack_verdict(cfg) == set()
    two_drives = StackConfig.model_validate({"kvTier": {"rdsMaxChunks": 3000}})
    assert gate_verdict(two_drives) == pack_verdict(two_drives) == {"rds-memory-budget"}


# --- stack files: any content gets one clear line ---------------------------------------------

def read(tmp_path: pathlib.Path, content: bytes):
    path = tmp_path / "Pulumi.fuzz.yaml"
    path.write_bytes(content)
    return stackfile.load_stack(path, "fuzz")


def expect_clear_error(tmp_path: pathlib.Path, content: bytes) -> str:
    with pytest.raises((stackfile.StackFileError, gate.ConfigError)) as caught:
        read(tmp_path, content)
    return str(caught.value)


@pytest.mark.parametrize("content, says", [
    (b"config:\n  - rebel100:name: x\n", "`config:` must be a mapping"),
    (b"config: {rebel100:prefill: [1, 2\n", "YAML syntax error"),
    (b"- a\n- b\n", "expected a mapping with a `config:` key, got a YAML list"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a UTF-8 text file"),
    (b"config:\n  rebel100:prefill: just-a-string\n", "rebel100:prefill"),
    (b"config:\n  rebel100:prefill:\n    replicas: many\n", "rebel100:prefill.replicas"),
])
def test_malformed_stack_file_is_one_clear_error(tmp_path, content, says):
    message = expect_clear_error(tmp_path, content)
    assert says in message
    if isinstance(message, str) and "is invalid" not in message:
        assert "\n" not in message and str(tmp_path) in message


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3),
    max_leaves=12)
sections = st.sampled_from(["prefill", "decode", "engine", "kvTier", "hardware", "router", "model", "storage", "name",
                            "placement", "topology", "hfToken"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(sections.map(lambda s: f"rebel100:{s}"), yaml_values, max_size=4) | yaml_values)
def test_random_stack_files_never_raise_anything_else(tmp_path, document):
    content = yaml.safe_dump(document if not isinstance(document, dict) or not document else {"config": document}).encode()
    try:
        read(tmp_path, content)
    except (stackfile.StackFileError, gate.ConfigError):
        pass


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_else(tmp_path, content):
    try:
        read(tmp_path, content)
    except (stackfile.StackFileError, gate.ConfigError):
        pass
