"""Rules of the gate on the KV tier: the RDS budget, lmcache-rbln reading rds_max_chunks, the CPU tier's memory."""

from __future__ import annotations

from collections.abc import Iterable

from core import rules, sizing
from core.config import StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key
from core.versions import engine as engine_versions
from core.versions import image_version


def rule_kv_tier(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    tier = cfg.kv_tier
    if tier.mode == "off":
        return
    if cfg.topology != "pd" or cfg.prefill.replicas == 0:
        yield Issue(
            key("kvTier.mode"),
            f"kvTier.mode {tier.mode!r} offloads prefill KV, but this stack has no prefill pods "
            f"(topology {cfg.topology!r}, prefill.replicas {cfg.prefill.replicas}): set kvTier.mode off.",
        )
        return
    if tier.mode == "rds":
        if facts.rds_drives == 0:
            yield Issue(
                key("hardware.nvmeDrivesPerNode"),
                "RDS needs NVMe drives: set hardware.nvmeDrivesPerNode or kvTier.rdsDrives, or use kvTier.mode cpu.",
            )
        elif facts.rds_budget is not None:
            problem = rules.rds_budget_fits(
                facts.rds_budget, chunks_name="kvTier.rdsMaxChunks", utilization_name="prefill.gpuMemoryUtilization"
            )
            if problem:
                yield Issue(key("kvTier.rdsMaxChunks"), problem, "rds-memory-budget")
            lmcache_rbln = engine_versions.lmcache_rbln_version(image_version(cfg.engine.image))
            problem = rules.lmcache_reads_rds_max_chunks(
                str(lmcache_rbln) if lmcache_rbln else None, tier.rds_max_chunks
            )
            if problem:
                yield Issue(
                    key("engine.image"),
                    f"{cfg.engine.image} ships lmcache-rbln {lmcache_rbln}: {problem}",
                    "lmcache-reads-rds-max-chunks",
                )
    if tier.mode == "cpu":
        limit = sizing.parse_quantity(cfg.prefill.resources.memory)
        if tier.cpu_size_gib * sizing.GIB >= limit:
            yield Issue(
                key("kvTier.cpuSizeGib"),
                f"the CPU KV tier of {tier.cpu_size_gib:g} GiB does not fit in the prefill memory limit "
                f"{cfg.prefill.resources.memory} (prefill.resources.memory): raise the limit or shrink the tier.",
            )
