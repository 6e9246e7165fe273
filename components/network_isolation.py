"""NetworkIsolation: default-deny ingress for the stack's pods, then only the serving paths
(`objects.network_isolation`)."""

from __future__ import annotations

import pulumi

from components import resources
from objects.network_isolation import NetworkIsolationArgs, network_isolation

__all__ = ["NetworkIsolation", "NetworkIsolationArgs"]

TYPE = "rebel100:serving:NetworkIsolation"


class NetworkIsolation(pulumi.ComponentResource):
    def __init__(self, name: str, args: NetworkIsolationArgs, opts: pulumi.ResourceOptions | None = None):
        children = network_isolation(name, args)  # refuses bad args before anything is registered
        super().__init__(TYPE, name, None, opts)
        resources.register(self, children, opts)
        self.register_outputs({"policies": [c.name for c in children]})
