"""RdsTier: tier-2 KV offload of the prefill engines through LMCache (RDS on NVMe, or host CPU).

It owns the ConfigMap that prefill takes its LMCache environment from (`envFrom`), annotated with
the chiplet-0 budget the values were checked against, so that the policy pack judges the same
drives, chunk overhead, staging buffer and HBM as the config gate did.
"""
from __future__ import annotations

from typing import Literal, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import ConfigDict, Field

from components import pod
from core import sizing
from core.labels import RDS_BUDGET_ANNOTATION, rds_budget_annotation

TYPE = "rebel100:serving:RdsTier"
class RdsTierArgs(pod.StackArgs):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    mode: Literal["rds", "cpu"] = Field("rds", description="`rds`: NVMe via Rebellions Direct Storage; `cpu`: host memory.")
    env: dict[str, str] = Field(default_factory=dict, description="LMCache environment of prefill (core.serving.lmcache_env).")
    budget: Optional[sizing.RdsBudget] = Field(None, description="Chiplet-0 budget of the RDS tier (core.derive); None for the CPU tier.")
    hbm_per_chiplet_gib: float = Field(36.0, description="HBM per chiplet the budget was computed with, GiB.")
    tokens_per_rank: int = Field(0, description="Tokens each engine rank keeps on RDS (0 for the CPU tier).")


class RdsTier(pulumi.ComponentResource):
    config_map_name: str
    needs_rds_nodes: bool

    def __init__(self, name: str, args: RdsTierArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        annotations = {RDS_BUDGET_ANNOTATION: rds_budget_annotation(args.budget, args.hbm_per_chiplet_gib)} if args.budget else None
        self.config_map_name = f"{args.stack_name}-lmcache"
        k8s.core.v1.ConfigMap(
            f"{name}-lmcache",
            metadata=pod.object_meta(self.config_map_name, args.namespace, {pod.PART_OF_LABEL: args.stack_name}, annotations),
            data=args.env,
            opts=pod.child_options(self, opts))
        self.needs_rds_nodes = args.mode == "rds"
        self.register_outputs({
            "mode": args.mode,
            "configMap": self.config_map_name,
            "tokensPerRank": args.tokens_per_rank,
            "budget": args.budget.as_output() if args.budget else None,
        })
