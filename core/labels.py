"""Names on the objects: the labels and annotations the components write and the policy pack, the
placement check and the site reader look for, and the names of a role's pools. Written once here so
that a writer and its readers cannot drift apart."""
from __future__ import annotations

import json
from typing import Optional

from core import sizing

PART_OF_LABEL = "app.kubernetes.io/part-of"  # the stack (`name`) an object belongs to
ROLE_LABEL = "llm-d.ai/role"  # prefill / decode: what the router's filters and the pack read

# Node labels the engines require (the Rebellions NPU operator sets them; the local site too).
NPU_PRESENT_LABEL = "rebellions.ai/npu.present"
NPU_PRODUCT_LABEL = "rebellions.ai/npu.product"
RDS_PRESENT_LABEL = "rebellions.ai/rds.present"

# Read by the rds-memory-budget policy: the lmcache-rbln version of the engine's image ...
LMCACHE_VERSION_ANNOTATION = "rebel100.ai/lmcache-rbln-version"
# ... and, on RdsTier's LMCache ConfigMap, the budget inputs that are not in the LMCache environment.
RDS_BUDGET_ANNOTATION = "rebel100.ai/rds-budget"
RDS_BUDGET_KEYS = ("nvmeDrives", "chunkOverheadMib", "stagingBufferMib", "hbmPerChipletGib")


def rds_budget_annotation(budget: sizing.RdsBudget, hbm_per_chiplet_gib: float) -> str:
    values = (budget.drives, budget.chunk_overhead_mib, budget.staging_mib, hbm_per_chiplet_gib)
    return json.dumps(dict(zip(RDS_BUDGET_KEYS, values)), separators=(",", ":"))


def pool_names(stack_name: str, role: str, groups: int) -> list[tuple[Optional[str], str]]:
    """(node group, Deployment name) of each pool of a role: one pool named after the role, or one per
    node group g0..gN-1 (`placement.groups`)."""
    base = f"{stack_name}-{role}"
    if groups == 1:
        return [(None, base)]
    return [(f"g{i}", f"{base}-g{i}") for i in range(groups)]


def compile_cache_pvc_name(stack_name: str, role: str) -> str:
    """The compile-cache PVC of a role (shared by its pools): written by the components, checked against the
    live volume by the preflight (core/retained.py)."""
    return f"{stack_name}-{role}-compile-cache"
