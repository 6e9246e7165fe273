"""RdsTier: tier-2 KV offload of the prefill engines through LMCache (RDS on NVMe, or host CPU).

It owns the LMCache environment of prefill, the placement on RDS nodes and the chiplet-0 memory
budget of reference design section 5; PrefillPool consumes `env` and `needs_rds_nodes`.
"""
from __future__ import annotations

import json
from typing import Literal, Optional

import pulumi
from pydantic import BaseModel, ConfigDict, Field

from components import sizing
from stacks.config import Hardware, KvTier

TYPE = "rebel100:serving:RdsTier"


class RdsTierArgs(BaseModel):
    model_config = ConfigDict(frozen=True)

    tier: KvTier = Field(KvTier(), description="The kvTier section: mode, chunks, staging, hash algorithm.")
    hardware: Hardware = Field(Hardware(), description="HBM per chiplet and NVMe drives per node.")
    gpu_memory_utilization: Optional[float] = Field(0.8, description="Prefill's --gpu-memory-utilization (null: engine default).")
    prefill_memory_limit: str = Field("256Gi", description="Prefill container memory limit (bounds the CPU tier).")


class RdsTier(pulumi.ComponentResource):
    mode: Literal["rds", "cpu", "off"]
    env: dict[str, str]
    needs_rds_nodes: bool
    budget: Optional[sizing.RdsBudget]
    tokens_per_rank: int

    def __init__(self, name: str, args: RdsTierArgs, opts: Optional[pulumi.ResourceOptions] = None):
        tier = args.tier
        drives = tier.rds_drives or args.hardware.nvme_drives_per_node
        budget = None
        if tier.mode == "rds":
            budget = sizing.rds_budget(
                rds_max_chunks=tier.rds_max_chunks, chunk_overhead_mib=tier.rds_chunk_overhead_mib, drives=drives,
                staging_mib=tier.staging_buffer_mib, hbm_per_chiplet_gib=args.hardware.hbm_per_chiplet_gib,
                gpu_memory_utilization=args.gpu_memory_utilization)
            if not budget.fits:
                raise ValueError(
                    f"RdsTier {name}: {tier.rds_max_chunks} chunks x {tier.rds_chunk_overhead_mib:g} MiB x {drives} drives "
                    f"+ {tier.staging_buffer_mib:g} MiB staging = {budget.used_mib:,.0f} MiB does not fit the "
                    f"{budget.free_mib:,.0f} MiB of chiplet 0 left by gpu-memory-utilization "
                    f"{budget.gpu_memory_utilization:g}; lower rds_max_chunks to {budget.max_chunks_that_fit} or less.")
        if tier.mode == "cpu" and tier.cpu_size_gib * sizing.GIB >= sizing.parse_quantity(args.prefill_memory_limit):
            raise ValueError(f"RdsTier {name}: a {tier.cpu_size_gib:g} GiB CPU tier does not fit the prefill memory limit {args.prefill_memory_limit}.")
        super().__init__(TYPE, name, None, opts)

        self.mode = tier.mode
        self.budget = budget
        self.needs_rds_nodes = tier.mode == "rds"
        self.tokens_per_rank = sizing.rds_tokens_per_rank(tier.rds_max_chunks, tier.chunk_size) if tier.mode == "rds" else 0
        self.env = lmcache_env(tier)
        self.register_outputs({
            "mode": tier.mode,
            "tokensPerRank": self.tokens_per_rank,
            "budget": budget_output(budget),
        })


def lmcache_env(tier: KvTier) -> dict[str, str]:
    """LMCache environment of prefill (the chart's modelserver.extraServeEnv.prefill)."""
    if tier.mode == "off":
        return {}
    env = {
        "LMCACHE_CHUNK_SIZE": str(tier.chunk_size),
        "LMCACHE_ENABLE_KV_EVENTS": "True" if tier.enable_kv_events else "False",
        "LMCACHE_PRE_CACHING_HASH_ALGORITHM": tier.hash_algorithm,
    }
    extra = dict(tier.extra_config)
    if tier.mode == "rds":
        env["LMCACHE_LOCAL_CPU"] = "False"
        extra = {"rds_max_chunks": tier.rds_max_chunks, **extra}
    else:
        env["LMCACHE_LOCAL_CPU"] = "True"
        env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = f"{tier.cpu_size_gib:g}"
    if extra:
        env["LMCACHE_EXTRA_CONFIG"] = json.dumps(extra, separators=(",", ":"))
    return env


def budget_output(budget: Optional[sizing.RdsBudget]) -> Optional[dict]:
    if budget is None:
        return None
    return {
        "chiplet0MiB": round(budget.chiplet0_mib, 1),
        "gpuMemoryUtilization": budget.gpu_memory_utilization,
        "freeMiB": round(budget.free_mib, 1),
        "chunksMiB": round(budget.chunks_mib, 1),
        "stagingMiB": round(budget.staging_mib, 1),
        "usedMiB": round(budget.used_mib, 1),
        "headroomMiB": round(budget.headroom_mib, 1),
    }
