"""The figures of the reference design, computed by core.sizing."""
import pytest

from core import sizing


def test_kv_bytes_per_token_fp8_is_124_kib():
    # 2 x 62 layers x 8 KV heads x 128 head dim x 1 byte
    assert sizing.kv_bytes_per_token(62, 8, 128, "fp8") == 126_976
    assert round(126_976 / 1024) == 124


def test_kv_bytes_double_without_fp8():
    assert sizing.kv_bytes_per_token(62, 8, 128, "auto") == 2 * 126_976


def test_devices_per_pod_prefill_and_decode():
    assert sizing.devices_per_pod(1, 4, 1) == 4  # prefill PP4
    assert sizing.devices_per_pod(1, 1, 4) == 4  # decode DP4


def test_rank_ports():
    assert sizing.rank_ports(8200, 4) == [8200, 8201, 8202, 8203]
    assert sizing.rank_ports(5600, 1) == [5600]


def test_rds_tokens_per_rank_default():
    assert sizing.rds_tokens_per_rank(1000, 4096) == 4_096_000


def test_decode_capacity_figure_is_69_blocks():
    assert 69 * 4096 == 282_624


def test_prefix_reuse_unit():
    assert sizing.prefix_reuse_unit(4096, 512, True) == 512
    assert sizing.prefix_reuse_unit(4096, 512, False) == 4096


def target_budget(**overrides):
    values = dict(rds_max_chunks=1000, chunk_overhead_mib=2.0, drives=2, staging_mib=512.0,
                  hbm_per_chiplet_gib=36.0, gpu_memory_utilization=0.8)
    values.update(overrides)
    return sizing.rds_budget(**values)


def test_rds_budget_target_configuration_fits():
    budget = target_budget()
    assert budget.chiplet0_mib == 36 * 1024
    assert budget.free_mib == pytest.approx(7372.8)
    assert budget.chunks_mib == 4000
    assert budget.used_mib == 4512
    assert budget.fits
    assert budget.max_chunks_that_fit == 1715  # (7372.8 - 512) // 4
    assert budget.max_utilization_that_fits == 0.87


def test_rds_budget_4000_chunks_is_over():
    budget = target_budget(rds_max_chunks=4000)
    assert budget.used_mib == 16_512
    assert not budget.fits
    assert budget.headroom_mib < 0


def test_rds_budget_without_utilization_uses_engine_default():
    budget = target_budget(gpu_memory_utilization=None)
    assert budget.gpu_memory_utilization == sizing.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    assert budget.free_mib == pytest.approx(3686.4)


@pytest.mark.parametrize("text,value", [("256Gi", 256 * 1024**3), ("64G", 64e9), ("500m", 0.5), ("32", 32.0)])
def test_parse_quantity(text, value):
    assert sizing.parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("version,reads", [("0.12.0", True), ("0.13.1rc2", True), ("0.11.9", False), ("v0.12", True), (None, None)])
def test_lmcache_reads_rds_max_chunks(version, reads):
    assert sizing.lmcache_reads_rds_max_chunks(version) is reads
