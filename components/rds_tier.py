"""RdsTier: tier-2 KV offload of the prefill engines through LMCache (RDS on NVMe, or host CPU): the
ConfigMap prefill takes its LMCache environment from (`objects.rds_tier`)."""

from __future__ import annotations

import pulumi

from components import resources
from objects.rds_tier import RdsTierArgs, config_map_name, needs_rds_nodes, rds_tier

__all__ = ["RdsTier", "RdsTierArgs"]

TYPE = "rebel100:serving:RdsTier"


class RdsTier(pulumi.ComponentResource):
    config_map_name: str
    needs_rds_nodes: bool

    def __init__(self, name: str, args: RdsTierArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        resources.register(self, rds_tier(name, args), opts)
        self.config_map_name = config_map_name(args)
        self.needs_rds_nodes = needs_rds_nodes(args)
        self.register_outputs(
            {
                "mode": args.mode,
                "configMap": self.config_map_name,
                "tokensPerRank": args.tokens_per_rank,
                "budget": args.budget.as_output() if args.budget else None,
            }
        )
