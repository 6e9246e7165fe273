"""RdsTier's objects: tier-2 KV offload of the prefill engines through LMCache (RDS on NVMe, or host CPU).

It owns the ConfigMap that prefill takes its LMCache environment from (`envFrom`), annotated with
the chiplet-0 budget the values were checked against, so that the policy pack judges the same
drives, chunk overhead, staging buffer and HBM as the config gate did.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from core import labels, sizing
from core.formats import EnvVarName
from core.labels import PART_OF_LABEL, RDS_BUDGET_ANNOTATION, rds_budget_annotation
from objects import component
from objects.manifests import Child, manifest, object_meta


class RdsTierArgs(component.StackArgs):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    mode: Literal["rds", "cpu"] = Field(description="`rds`: NVMe via Rebellions Direct Storage; `cpu`: host memory.")
    env: dict[EnvVarName, str] = Field(description="LMCache environment of prefill (core.serving.lmcache_env).")
    budget: sizing.RdsBudget | None = Field(
        description="Chiplet-0 budget of the RDS tier (core.derive); None for the CPU tier."
    )
    hbm_per_chiplet_gib: float = Field(description="HBM per chiplet the budget was computed with, GiB.")
    tokens_per_rank: int = Field(description="Tokens each engine rank keeps on RDS (0 for the CPU tier).")


def config_map_name(args: RdsTierArgs) -> str:
    return f"{args.stack_name}-lmcache"


def needs_rds_nodes(args: RdsTierArgs) -> bool:
    """Whether the prefill pods beside this tier need nodes with RDS (core.labels.needs_rds_nodes)."""
    return labels.needs_rds_nodes("prefill", args.mode)


def rds_tier(name: str, args: RdsTierArgs) -> list[Child]:
    annotations = (
        {RDS_BUDGET_ANNOTATION: rds_budget_annotation(args.budget, args.hbm_per_chiplet_gib)} if args.budget else None
    )
    return [
        Child(
            f"{name}-lmcache",
            manifest(
                "v1",
                "ConfigMap",
                object_meta(config_map_name(args), args.namespace, {PART_OF_LABEL: args.stack_name}, annotations),
                data=args.env,
            ),
        )
    ]
