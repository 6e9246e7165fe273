"""core/derive.py: the facts of a stack, figures written by hand from the reference design."""

import json

import pytest

from core.config import StackConfig
from core.derive import derive, engine_commands, rds_drives
from core.gate import load_config
from tests.conftest import stack_config


def facts(stack: str = "prod-4p4d", **overrides):
    return derive(load_config(stack_config(stack, **overrides)))


def test_target_configuration_outputs():
    """4 prefill pods of PP4 and 4 decode pods of DP4: 4 NPUs each, 32 in all; fp8 KV 2 x 62 x 8 x 128 B; RDS
    1000 chunks x 4096 tokens per rank; the section 5 budget of 36 GiB chiplet 0 at utilization 0.8."""
    outputs = facts().outputs()
    assert outputs["prefill"] == {"replicas": 4, "devicesPerPod": 4, "devices": 16}
    assert outputs["decode"] == {"replicas": 4, "devicesPerPod": 4, "devices": 16}
    assert outputs["totalDevices"] == 32
    assert outputs["kvBytesPerToken"] == 126_976
    assert outputs["kvTier"] == "rds"
    assert outputs["rdsTokensPerRank"] == 4_096_000
    assert outputs["memoryBudget"] == {
        "chiplet0MiB": 36864.0,
        "gpuMemoryUtilization": 0.8,
        "freeMiB": 7372.8,
        "chunksMiB": 4000.0,
        "stagingMiB": 512.0,
        "usedMiB": 4512.0,
        "headroomMiB": 2860.8,
    }
    assert outputs["weights"]["source"] == "pvc"


def test_target_configuration_facts():
    value = facts()
    assert value.pd and value.kv_tier == "rds" and value.rds_drives == 2
    assert value.prefix_reuse_unit == 512  # sub-block caching: max-num-batched-tokens
    assert value.decode.rank_ports == [8200, 8201, 8202, 8203]
    assert value.lmcache_env["LMCACHE_CHUNK_SIZE"] == "4096"
    assert value.lmcache_env["LMCACHE_EXTRA_CONFIG"] == '{"rds_max_chunks":1000}'


def test_agg_has_no_prefill_and_no_kv_tier():
    value = facts("agg")
    outputs = value.outputs()
    assert "prefill" not in outputs and outputs["totalDevices"] == 16
    assert not value.pd and value.kv_tier == "off"
    assert value.rds_budget is None and outputs["memoryBudget"] is None
    assert value.rds_tokens_per_rank == 0 and value.lmcache_env == {}


def test_cpu_tier_has_no_rds_budget():
    value = facts(kvTier={"mode": "cpu"})
    assert value.kv_tier == "cpu" and value.rds_budget is None and value.rds_tokens_per_rank == 0
    assert value.lmcache_env  # LMCache still runs, on host memory


def test_rds_drives_from_the_tier_before_the_node():
    value = facts(kvTier={"rdsDrives": 1, "rdsMaxChunks": 1000})
    assert value.rds_drives == 1
    assert value.rds_budget.chunks_mib == 2000  # 1000 x 2 MiB x 1 drive
    cfg = load_config(stack_config("prod-4p4d", hardware={"nvmeDrivesPerNode": 3}))
    assert rds_drives(cfg) == 3


def test_budget_reads_prefill_utilization_and_chunk_size():
    value = facts(prefill={"gpuMemoryUtilization": 0.75}, kvTier={"rdsMaxChunks": 500, "chunkSize": 256})
    assert value.rds_budget.free_mib == 9216  # 36,864 x 0.25
    assert value.rds_budget.used_mib == 2512  # 500 x 2 x 2 + 512
    assert value.rds_tokens_per_rank == 128_000  # 500 x 256


def test_devices_per_pod_follow_dp_local():
    value = facts(decode={"dataParallelSizeLocal": 2, "replicas": 8}, hardware={"nodes": 8})
    assert value.roles["decode"].output() == {"replicas": 8, "devicesPerPod": 2, "devices": 16}
    assert value.decode.rank_ports == [8200, 8201]


SHA = "0123456789abcdef0123456789abcdef01234567"
DRAFT_SHA = "f" * 40


def test_roles_know_their_names():
    value = facts()
    assert [(name, role.name) for name, role in value.roles.items()] == [("prefill", "prefill"), ("decode", "decode")]


def test_prefix_reuse_unit_is_the_block_without_sub_block_caching():
    assert facts(engine={"subBlockCache": False}, router={"autoTune": True}).prefix_reuse_unit == 4096


def test_weights_plan_reads_the_volume_at_hf_home():
    """A pre-loaded PVC at the branch main: the engines wait for each repository's ref under /models."""
    assert facts().weights.wait_paths == (
        "/models/hub/models--MiniMaxAI--MiniMax-M2.7/refs/main",
        "/models/hub/models--asherszhang--MiniMax-M2.7-EAGLE3-draft-vocab200k/refs/main",
    )


@pytest.mark.parametrize(
    "settings",
    [
        {"topology": "agg", "prefill": {"replicas": 0}},  # kvTier rds by default, but no prefill pods to offload
        {"topology": "pd", "prefill": {"replicas": 0}},  # refused by the gate; derive still gives no tier
    ],
)
def test_no_prefill_pods_means_no_kv_tier_whatever_the_mode(settings):
    value = derive(StackConfig.model_validate(settings))
    assert value.kv_tier == "off" and value.rds_budget is None and value.rds_tokens_per_rank == 0
    assert value.lmcache_env == {}


def test_engine_commands_carry_the_pinned_revisions_and_the_connectors_of_the_stack():
    cfg = load_config(stack_config("prod-4p4d", weights={"revision": SHA, "draftRevision": DRAFT_SHA}))
    commands = engine_commands(cfg, derive(cfg))
    assert list(commands) == ["prefill", "decode"]
    for command in commands.values():
        args = command.args
        assert args[1:3] == ["--revision", SHA]
        assert json.loads(args[args.index("--speculative-config") + 1])["revision"] == DRAFT_SHA
    # P/D with RDS: prefill speaks NIXL and LMCache, decode NIXL.
    prefill = json.loads(commands["prefill"].args[commands["prefill"].args.index("--kv-transfer-config") + 1])
    assert prefill["kv_connector"] == "MultiConnector"
    decode = json.loads(commands["decode"].args[commands["decode"].args.index("--kv-transfer-config") + 1])
    assert decode["kv_connector"] == "RblnNixlConnector"


def test_engine_commands_without_kv_tier_give_prefill_nixl_alone():
    cfg = load_config(stack_config("prod-4p4d", kvTier={"mode": "off"}))
    args = engine_commands(cfg, derive(cfg))["prefill"].args
    assert json.loads(args[args.index("--kv-transfer-config") + 1])["kv_connector"] == "RblnNixlConnector"


def test_engine_commands_of_agg_have_decode_alone_without_connector():
    commands = engine_commands(agg := load_config(stack_config("agg")), derive(agg))
    assert list(commands) == ["decode"] and "--kv-transfer-config" not in commands["decode"].args


@pytest.mark.parametrize(
    "stack, target, active",
    [
        # reference design section 4: the sidecar listens on 8000-8003, the pool targets them, prefill serves on 8000
        ("prod-4p4d", [8000, 8001, 8002, 8003], {"prefill": [8000], "decode": [8000, 8001, 8002, 8003]}),
        # AGG: no sidecar; the pool targets the decode ranks, which listen on --port 8200 and up
        ("agg", [8200, 8201, 8202, 8203], {"decode": [8200, 8201, 8202, 8203]}),
    ],
)
def test_pool_ports_and_the_ports_each_role_declares_active(stack, target, active):
    ports = derive(load_config(stack_config(stack))).pool_ports
    assert ports.target == target
    assert {role: ports.active(role) for role in active} == active
