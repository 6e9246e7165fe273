"""Gateway: the client entry point (Gateway API) and the HTTPRoute that sends traffic to the pool
(`objects.gateway`)."""

from __future__ import annotations

import pulumi

from components import resources
from objects.gateway import GatewayArgs, base_url, gateway, gateway_name, route_name

__all__ = ["Gateway", "GatewayArgs"]

TYPE = "rebel100:serving:Gateway"


class Gateway(pulumi.ComponentResource):
    base_url: str
    gateway_name: str

    def __init__(self, name: str, args: GatewayArgs, opts: pulumi.ResourceOptions | None = None):
        children = gateway(name, args)  # refuses bad args before anything is registered
        super().__init__(TYPE, name, None, opts)
        resources.register(self, children, opts)
        self.gateway_name = gateway_name(args.stack_name)
        self.base_url = base_url(args)
        self.register_outputs(
            {"gatewayName": self.gateway_name, "routeName": route_name(args.stack_name), "baseUrl": self.base_url}
        )
