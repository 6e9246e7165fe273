"""DecodePool: the decode engines (DP4 + expert parallel), fronted by the llm-d routing sidecar in P/D;
its objects are `objects.decode_pool`'s."""

from __future__ import annotations

import pulumi

from components import resources
from objects.decode_pool import DecodePoolArgs, SidecarSpec, decode_pool, target_ports

__all__ = ["DecodePool", "DecodePoolArgs", "SidecarSpec"]

TYPE = "rebel100:serving:DecodePool"


class DecodePool(pulumi.ComponentResource):
    deployments: list[resources.KubeObject]
    target_ports: list[int]
    devices_per_pod: int

    def __init__(self, name: str, args: DecodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        children = decode_pool(name, args)
        made = resources.register(self, children, opts)
        self.deployments = [made[c.resource_name] for c in children if c.kind == "Deployment"]
        self.devices_per_pod = args.claim.npus
        self.target_ports = target_ports(args)
        self.register_outputs(
            {
                "deploymentNames": [c.name for c in children if c.kind == "Deployment"],
                "replicas": args.replicas,
                "devicesPerPod": args.claim.npus,
                "targetPorts": self.target_ports,
            }
        )
