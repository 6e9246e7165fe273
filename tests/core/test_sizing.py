"""The figures of the reference design, computed by core.sizing, and each figure at its boundaries.

Every expected number is written by hand (the arithmetic in a comment beside it), never computed by
the function under test.
"""

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


def test_prefix_reuse_unit():
    assert sizing.prefix_reuse_unit(4096, 512, True) == 512
    assert sizing.prefix_reuse_unit(4096, 512, False) == 4096


def target_budget(**overrides):
    values = dict(
        rds_max_chunks=1000,
        chunk_overhead_mib=2.0,
        drives=2,
        staging_mib=512.0,
        hbm_per_chiplet_gib=36.0,
        gpu_memory_utilization=0.8,
    )
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


@pytest.mark.parametrize(
    "version,reads", [("0.12.0", True), ("0.13.1rc2", True), ("0.11.9", False), ("v0.12", True), (None, None)]
)
def test_lmcache_reads_rds_max_chunks(version, reads):
    assert sizing.lmcache_reads_rds_max_chunks(version) is reads


# --- each figure at its boundaries -----------------------------------------------------------------


@pytest.mark.parametrize(
    "tp, pp, dp_local, devices",
    [
        (1, 1, 1, 1),
        (4, 1, 1, 4),
        (1, 4, 1, 4),
        (1, 1, 4, 4),
        (2, 2, 2, 8),
        (2, 3, 1, 6),
    ],
)
def test_devices_per_pod_is_the_product(tp, pp, dp_local, devices):
    assert sizing.devices_per_pod(tp, pp, dp_local) == devices


def test_rank_ports_of_no_rank_is_empty():
    assert sizing.rank_ports(8200, 0) == []


@pytest.mark.parametrize(
    "dtype, per_token",
    [
        ("fp8", 126_976),
        ("fp8_e4m3", 126_976),
        ("fp8_e5m2", 126_976),  # 2 x 62 x 8 x 128 x 1 B
        ("auto", 253_952),
        ("bfloat16", 253_952),  # x 2 B
        ("float32-unknown", 253_952),  # an unknown dtype counts 2 B, vLLM's default
    ],
)
def test_kv_bytes_per_token_by_dtype(dtype, per_token):
    assert sizing.kv_bytes_per_token(62, 8, 128, dtype) == per_token


def test_kv_bytes_per_token_counts_every_factor():
    assert sizing.kv_bytes_per_token(1, 1, 1, "fp8") == 2  # K and V
    assert sizing.kv_bytes_per_token(3, 5, 7, "fp8") == 210  # 2 x 3 x 5 x 7


def test_rds_tokens_per_rank_small():
    assert sizing.rds_tokens_per_rank(1, 256) == 256
    assert sizing.rds_tokens_per_rank(3, 4096) == 12_288


def test_rds_budget_at_exact_equality_fits():
    """Section 5: 2176 chunks x 2 MiB x 2 drives + 512 MiB staging = 9216 MiB, and 36 GiB = 36864 MiB x
    (1 - 0.75) = 9216 MiB: equal is within budget (`<=`), one chunk more (9220 MiB) is not."""
    budget = target_budget(rds_max_chunks=2176, gpu_memory_utilization=0.75)
    assert budget.free_mib == 9216 and budget.chunks_mib == 8704 and budget.used_mib == 9216
    assert budget.fits and budget.headroom_mib == 0
    assert budget.max_chunks_that_fit == 2176  # (9216 - 512) // 4
    assert budget.max_utilization_that_fits == 0.75  # 1 - 9216 / 36864
    over = target_budget(rds_max_chunks=2177, gpu_memory_utilization=0.75)
    assert over.used_mib == 9220 and not over.fits and over.headroom_mib == -4
    assert over.max_chunks_that_fit == 2176
    assert over.max_utilization_that_fits == 0.74  # floor(100 x (1 - 9220 / 36864)) / 100 = floor(74.98) / 100


def test_rds_budget_keeps_its_inputs():
    budget = target_budget(
        rds_max_chunks=7,
        chunk_overhead_mib=1.5,
        drives=3,
        staging_mib=10.0,
        hbm_per_chiplet_gib=2.0,
        gpu_memory_utilization=0.5,
    )
    assert (budget.rds_max_chunks, budget.chunk_overhead_mib, budget.drives, budget.staging_mib) == (7, 1.5, 3, 10.0)
    assert budget.gpu_memory_utilization == 0.5
    assert budget.chiplet0_mib == 2048 and budget.free_mib == 1024  # 2 GiB x (1 - 0.5)
    assert budget.chunks_mib == 31.5 and budget.used_mib == 41.5  # 7 x 1.5 x 3 + 10
    assert budget.headroom_mib == 982.5
    assert budget.max_chunks_that_fit == 225  # (1024 - 10) // 4.5 = 225.3


def test_rds_budget_without_drives_fits_no_chunk():
    budget = target_budget(drives=0)
    assert budget.chunks_mib == 0 and budget.max_chunks_that_fit == 0


def test_rds_budget_whose_staging_exceeds_free_fits_no_chunk():
    budget = target_budget(staging_mib=8000.0)  # 8000 > 7372.8 on its own
    assert budget.max_chunks_that_fit == 0
    assert budget.max_utilization_that_fits == 0.67  # floor(100 x (1 - 12000 / 36864)) / 100 = floor(67.4) / 100


def test_a_chiplet_of_almost_no_memory_leaves_no_utilization_rather_than_a_traceback():
    """The smallest positive float the schema takes (found by tests/cluster/test_gate_subset.py's property test):
    the tier over it is an infinite ratio, which int() cannot take."""
    assert target_budget(hbm_per_chiplet_gib=5e-324).max_utilization_that_fits == 0.0


def test_rds_budget_larger_than_the_chiplet_leaves_no_utilization():
    budget = target_budget(rds_max_chunks=10_000)  # 40,512 MiB > 36,864 MiB
    assert budget.max_utilization_that_fits == 0.0


def test_rds_budget_as_output_rounds_to_one_decimal():
    assert target_budget().as_output() == {
        "chiplet0MiB": 36864.0,
        "gpuMemoryUtilization": 0.8,
        "freeMiB": 7372.8,
        "chunksMiB": 4000.0,
        "stagingMiB": 512.0,
        "usedMiB": 4512.0,
        "headroomMiB": 2860.8,  # 7372.8 - 4512
    }


def test_rds_budget_as_output_rounds_every_figure_to_one_decimal():
    budget = target_budget(
        rds_max_chunks=1,
        chunk_overhead_mib=1.33,
        drives=1,
        staging_mib=10.26,
        hbm_per_chiplet_gib=1.00015,
        gpu_memory_utilization=0.5,
    )
    assert budget.as_output() == {
        "chiplet0MiB": 1024.2,  # 1.00015 GiB = 1024.1536 MiB
        "gpuMemoryUtilization": 0.5,
        "freeMiB": 512.1,  # x (1 - 0.5) = 512.0768
        "chunksMiB": 1.3,  # 1 x 1.33 x 1
        "stagingMiB": 10.3,  # 10.26
        "usedMiB": 11.6,  # 1.33 + 10.26 = 11.59
        "headroomMiB": 500.5,  # 512.0768 - 11.59 = 500.4868
    }


def test_rds_budget_lines_as_the_plan_prints_them():
    assert target_budget().lines() == [
        ("chiplet-0 HBM", "36,864 MiB"),
        ("left by --gpu-memory-utilization", "7,372.8 MiB (x (1 - 0.8))"),
        ("RDS chunk index", "4,000 MiB (1000 chunks x 2 MiB x 2 drives)"),
        ("staging buffer", "512 MiB"),
        ("used", "4,512.0 MiB"),
        ("headroom", "2,860.8 MiB (fits)"),
    ]
    assert target_budget(rds_max_chunks=4000).lines()[-1] == (
        "headroom",
        "-9,139.2 MiB (OVER BUDGET)",
    )  # 7372.8 - 16512


@pytest.mark.parametrize(
    "threshold, startup, rollout",
    [
        (0, 15, 315),  # 15 s initial delay, + 300 s margin
        (1, 45, 345),  # 15 + 30
        (320, 9615, 9915),  # 15 + 30 x 320: VLLM_ENGINE_READY_TIMEOUT_S 9600 and one period more
    ],
)
def test_startup_and_rollout_budgets(threshold, startup, rollout):
    assert sizing.startup_budget_seconds(threshold) == startup
    assert sizing.rollout_timeout_seconds(threshold, turns=1, stop_seconds=0) == rollout


@pytest.mark.parametrize(
    "turns, stop, rollout",
    [
        (1, 120, 7635),  # Recreate: every pod stops (120 s) and compiles (15 + 30 x 240) at once, + 300
        (4, 120, 29640),  # one pod after another: 4 x (120 + 7215) + 300
        (2, 0, 14730),  # 2 x 7215 + 300
    ],
)
def test_a_rolling_update_waits_for_every_pods_stop_and_start(turns, stop, rollout):
    assert sizing.rollout_timeout_seconds(240, turns=turns, stop_seconds=stop) == rollout


@pytest.mark.parametrize(
    "text, value",
    [
        ("1Ki", 1024),
        ("1Mi", 1024**2),
        ("1Gi", 1024**3),
        ("1Ti", 1024**4),
        ("1Pi", 1024**5),
        ("2k", 2000),
        ("3M", 3e6),
        ("4G", 4e9),
        ("5T", 5e12),
        ("6P", 6e15),
        ("250m", 0.25),
        ("1.5Gi", 1.5 * 1024**3),
        (" 32 ", 32.0),
        ("0", 0.0),
    ],
)
def test_parse_quantity_every_suffix(text, value):
    assert sizing.parse_quantity(text) == value


@pytest.mark.parametrize(
    "version, reads",
    [
        ("", None),
        (None, None),
        ("latest", None),  # no version: not judged, not taken for an old one
        ("0.11.99", False),
        ("0.12", True),
        ("v0.12.0", True),
        ("0.12.0rc1", True),
        ("1.0.0", True),
    ],
)
def test_lmcache_reads_rds_max_chunks_boundaries(version, reads):
    assert sizing.lmcache_reads_rds_max_chunks(version) is reads


def test_parse_quantity_refuses_text_that_is_no_quantity():
    with pytest.raises(ValueError, match=r"^'many' is not a Kubernetes quantity: "):
        sizing.parse_quantity("many")
