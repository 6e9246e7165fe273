"""PrefillPool: the prefill engines (PP4 in the Target Configuration), one pod per slot; its objects
are `objects.prefill_pool`'s."""

from __future__ import annotations

import pulumi

from components import resources
from objects.prefill_pool import PrefillPoolArgs, prefill_pool

__all__ = ["PrefillPool", "PrefillPoolArgs"]

TYPE = "rebel100:serving:PrefillPool"


class PrefillPool(pulumi.ComponentResource):
    deployments: list[resources.KubeObject]
    devices_per_pod: int

    def __init__(self, name: str, args: PrefillPoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        children = prefill_pool(name, args)
        made = resources.register(self, children, opts)
        self.deployments = [made[c.resource_name] for c in children if c.kind == "Deployment"]
        self.devices_per_pod = args.claim.npus
        self.register_outputs(
            {
                "deploymentNames": [c.name for c in children if c.kind == "Deployment"],
                "replicas": args.replicas,
                "devicesPerPod": args.claim.npus,
                "ports": list(args.engine.rank_ports),
            }
        )
