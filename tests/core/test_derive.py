"""core/derive.py: the facts of a stack, figures written by hand from the reference design."""
from core.derive import derive, rds_drives
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
    assert outputs["memoryBudget"] == {"chiplet0MiB": 36864.0, "gpuMemoryUtilization": 0.8, "freeMiB": 7372.8,
                                       "chunksMiB": 4000.0, "stagingMiB": 512.0, "usedMiB": 4512.0,
                                       "headroomMiB": 2860.8}
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
