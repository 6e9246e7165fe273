"""Gateway: the client entry point (Gateway API) and the HTTPRoute that sends traffic to the pool."""
from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components import pod
from components.router import POOL_GROUP

TYPE = "rebel100:serving:Gateway"
GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"


class GatewayArgs(pod.StackArgs):
    pool_name: str = Field(description="InferencePool the route sends every request to.")
    class_name: str = Field("istio", min_length=1, description="GatewayClass of the Gateway (`istio` or `agentgateway`).")
    port: int = Field(80, ge=1, le=65535, description="Client port of the HTTP listener.")
    hostname: Optional[str] = Field(None, description="Listener hostname; None accepts any.")


def service_host(gateway_name: str, class_name: str, namespace: str) -> str:
    """In-cluster address of the Service a gateway implementation creates (istio appends the class)."""
    service = f"{gateway_name}-{class_name}" if class_name == "istio" else gateway_name
    return f"{service}.{namespace}.svc.cluster.local"


class Gateway(pulumi.ComponentResource):
    base_url: str
    gateway_name: str

    def __init__(self, name: str, args: GatewayArgs, opts: Optional[pulumi.ResourceOptions] = None):
        if not args.pool_name:
            raise ValueError(f"Gateway {name}: pool_name is empty; the route needs an InferencePool to send requests to.")
        super().__init__(TYPE, name, None, opts)
        child = pod.child_options(self, opts)
        gateway_name = f"{args.stack_name}-gateway"
        labels = {pod.PART_OF_LABEL: args.stack_name, pod.COMPONENT_LABEL: "gateway"}
        listener = {"name": "http", "port": args.port, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}}
        if args.hostname:
            listener["hostname"] = args.hostname
        gateway = k8s.apiextensions.CustomResource(
            gateway_name, api_version=GATEWAY_API_VERSION, kind="Gateway",
            metadata=pod.object_meta(gateway_name, args.namespace, labels),
            spec={"gatewayClassName": args.class_name, "listeners": [listener]},
            opts=child)
        route_name = f"{args.stack_name}-route"
        k8s.apiextensions.CustomResource(
            route_name, api_version=GATEWAY_API_VERSION, kind="HTTPRoute",
            metadata=pod.object_meta(route_name, args.namespace, labels),
            spec={
                "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway_name}],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"group": POOL_GROUP, "kind": "InferencePool", "name": args.pool_name}],
                }],
            },
            opts=pod.child_options(self, opts, gateway))
        self.gateway_name = gateway_name
        self.base_url = f"http://{service_host(gateway_name, args.class_name, args.namespace)}:{args.port}/v1"
        self.register_outputs({"gatewayName": gateway_name, "routeName": route_name, "baseUrl": self.base_url})
