"""Every number the stack derives: devices, ports, KV bytes, the RDS memory budget.

Pure functions of plain values, with no Pulumi import, so that the config gate, the components,
`python -m stacks plan` and the policy pack (which reads numbers back out of rendered resources)
all compute a figure the same way. The figures of the reference design are asserted in
`tests/core/test_sizing.py` (each figure at its boundaries).
"""

from __future__ import annotations

import dataclasses
import math

from core import formats
from core.versions import Version
from core.versions import engine as engine_versions

MIB = 1024 * 1024
GIB = 1024 * MIB

# vLLM's own default when `--gpu-memory-utilization` is not passed.
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

# Bytes one KV element takes per `--kv-cache-dtype`.
KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "auto": 2, "bfloat16": 2}

# InferencePool.spec.targetPorts allows at most this many ports (GAIE v1).
MAX_POOL_TARGET_PORTS = 8


def devices_per_pod(tensor_parallel: int, pipeline_parallel: int, data_parallel_local: int) -> int:
    """NPUs one engine pod needs: TP x PP x DP-local (all ranks of a pod run on its own devices)."""
    return tensor_parallel * pipeline_parallel * data_parallel_local


def rank_ports(first_port: int, data_parallel_local: int) -> list[int]:
    """Ports of the DP ranks of one pod: rank r listens on first_port + r."""
    return [first_port + rank for rank in range(data_parallel_local)]


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, kv_cache_dtype: str) -> int:
    """K and V for every layer: 2 x layers x KV heads x head dim x bytes per element."""
    return 2 * layers * kv_heads * head_dim * KV_DTYPE_BYTES.get(kv_cache_dtype, 2)


def prefix_reuse_unit(block_size: int, max_num_batched_tokens: int, sub_block_cache: bool) -> int:
    """Tokens of one prefix-reuse unit: the sub-block (= max-num-batched-tokens) when sub-block
    caching is on, otherwise the KV block."""
    return max_num_batched_tokens if sub_block_cache else block_size


def rds_tokens_per_rank(rds_max_chunks: int, chunk_size: int) -> int:
    """Tokens one engine rank keeps on RDS: rds_max_chunks x LMCACHE_CHUNK_SIZE."""
    return rds_max_chunks * chunk_size


@dataclasses.dataclass(frozen=True)
class RdsBudget:
    """Chiplet-0 memory left by --gpu-memory-utilization and what the RDS tier takes of it (MiB)."""

    chiplet0_mib: float
    gpu_memory_utilization: float
    free_mib: float
    rds_max_chunks: int
    chunk_overhead_mib: float
    drives: int
    chunks_mib: float
    staging_mib: float

    @property
    def used_mib(self) -> float:
        return self.chunks_mib + self.staging_mib

    @property
    def headroom_mib(self) -> float:
        return self.free_mib - self.used_mib

    @property
    def fits(self) -> bool:
        return self.used_mib <= self.free_mib

    @property
    def max_chunks_that_fit(self) -> int:
        """Largest rds_max_chunks that fits with the same drives, staging and utilization."""
        per_chunk = self.chunk_overhead_mib * self.drives
        if per_chunk <= 0:
            return 0
        return max(0, int((self.free_mib - self.staging_mib) // per_chunk))

    @property
    def max_utilization_that_fits(self) -> float:
        """Largest --gpu-memory-utilization that leaves room for this RDS tier (2 decimals, floor)."""
        needed = self.used_mib / self.chiplet0_mib
        if math.isinf(needed):  # a chiplet of almost nothing (5e-324 GiB): the tier fills it, whatever it is
            return 0.0
        return max(0.0, int((1.0 - needed) * 100) / 100)

    def as_output(self) -> dict[str, float]:
        """The budget as the stack exports it (MiB, one decimal)."""
        return {
            "chiplet0MiB": round(self.chiplet0_mib, 1),
            "gpuMemoryUtilization": self.gpu_memory_utilization,
            "freeMiB": round(self.free_mib, 1),
            "chunksMiB": round(self.chunks_mib, 1),
            "stagingMiB": round(self.staging_mib, 1),
            "usedMiB": round(self.used_mib, 1),
            "headroomMiB": round(self.headroom_mib, 1),
        }

    def lines(self) -> list[tuple[str, str]]:
        """The budget line by line, as the plan prints it."""
        return [
            ("chiplet-0 HBM", f"{self.chiplet0_mib:,.0f} MiB"),
            ("left by --gpu-memory-utilization", f"{self.free_mib:,.1f} MiB (x (1 - {self.gpu_memory_utilization:g}))"),
            (
                "RDS chunk index",
                f"{self.chunks_mib:,.0f} MiB ({self.rds_max_chunks} chunks x {self.chunk_overhead_mib:g} MiB x "
                f"{self.drives} drives)",
            ),
            ("staging buffer", f"{self.staging_mib:,.0f} MiB"),
            ("used", f"{self.used_mib:,.1f} MiB"),
            ("headroom", f"{self.headroom_mib:,.1f} MiB ({'fits' if self.fits else 'OVER BUDGET'})"),
        ]


def rds_budget(
    *,
    rds_max_chunks: int,
    chunk_overhead_mib: float,
    drives: int,
    staging_mib: float,
    hbm_per_chiplet_gib: float,
    gpu_memory_utilization: float | None,
) -> RdsBudget:
    """rds_max_chunks x 2 MiB x drives + staging must fit in chiplet 0 x (1 - gpu-memory-utilization)."""
    utilization = VLLM_DEFAULT_GPU_MEMORY_UTILIZATION if gpu_memory_utilization is None else gpu_memory_utilization
    chiplet0_mib = hbm_per_chiplet_gib * 1024
    return RdsBudget(
        chiplet0_mib=chiplet0_mib,
        gpu_memory_utilization=utilization,
        free_mib=chiplet0_mib * (1.0 - utilization),
        rds_max_chunks=rds_max_chunks,
        chunk_overhead_mib=chunk_overhead_mib,
        drives=drives,
        chunks_mib=rds_max_chunks * chunk_overhead_mib * drives,
        staging_mib=staging_mib,
    )


# The engines' startup probe (reference design section 8, the llm-d overlay): 15 s, then 30 s periods.
STARTUP_INITIAL_DELAY_S = 15
STARTUP_PERIOD_S = 30
# What `pulumi up` allows on top of the probe's budget for scheduling, image pull and rollout.
ROLLOUT_MARGIN_S = 300


def startup_budget_seconds(failure_threshold: int) -> int:
    """How long an engine may compile before its startup probe gives up: 15 s + 30 s x threshold."""
    return STARTUP_INITIAL_DELAY_S + STARTUP_PERIOD_S * failure_threshold


def rollout_timeout_seconds(failure_threshold: int, *, turns: int, stop_seconds: int) -> int:
    """How long `pulumi up` waits for an engine Deployment: `turns` one after the other, each an old pod's stop (at
    most `stop_seconds`, its grace period) and a new pod's start (its startup budget), plus a margin (not the
    provider's default 10 minutes, which a first compilation of hours always exceeds). A rolling update takes one
    turn per pod; Recreate stops and starts every pod in one."""
    return turns * (stop_seconds + startup_budget_seconds(failure_threshold)) + ROLLOUT_MARGIN_S


# The EPP's pod: the kubelet's SIGKILL comes terminationGracePeriodSeconds after deletion. The EPP drains for its
# --drain-timeout after SIGTERM, then stops its servers; the margin is for that stop, so SIGKILL never lands inside
# the drain (Kubernetes' default grace, 30 s, with the EPP's default drain, 30 s: SIGKILL as the drain ends).
EPP_GRACE_MARGIN_S = 10


def epp_grace_seconds(drain_seconds: int) -> int:
    """terminationGracePeriodSeconds of an EPP pod that drains for `drain_seconds` after SIGTERM."""
    return drain_seconds + EPP_GRACE_MARGIN_S


def parse_quantity(quantity: str) -> float:
    """A Kubernetes quantity ("256Gi", "64G", "500m", "32", "1e3") as a plain number (bytes or cores), read as
    the API server reads it (`core.formats.quantity_value`); ValueError for text that is not a quantity."""
    value = formats.quantity_value(str(quantity).strip())
    if value is None:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity: {formats.QUANTITY.rule}")
    return float(value)


def lmcache_reads_rds_max_chunks(version: str | None) -> bool | None:
    """True / False when the version is one (core.versions.Version.parse), None when it is unknown or no version
    (`latest`): lmcache-rbln reads `rds_max_chunks` from core.versions.engine's LMCACHE_RBLN_READS_RDS_MAX_CHUNKS on."""
    parsed = Version.parse(version) if version else None
    if parsed is None:
        return None
    return parsed >= engine_versions.LMCACHE_RBLN_READS_RDS_MAX_CHUNKS.since
