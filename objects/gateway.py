"""Gateway's objects: the client entry point (Gateway API) and the HTTPRoute that sends traffic to the pool."""

from __future__ import annotations

from pydantic import Field

from core.formats import Dns1123Subdomain, GatewayHostname, Port
from core.labels import PART_OF_LABEL
from objects import component
from objects.manifests import Child, manifest, object_meta
from objects.router import POOL_GROUP

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"


class GatewayArgs(component.StackArgs):
    pool_name: str = Field(description="InferencePool the route sends every request to.")
    class_name: Dns1123Subdomain = Field(description="GatewayClass of the Gateway (`istio` or `agentgateway`).")
    port: Port = Field(description="Client port of the HTTP listener.")
    hostname: GatewayHostname | None = Field(description="Listener hostname; None accepts any.")


def service_host(gateway_name: str, class_name: str, namespace: str) -> str:
    """In-cluster address of the Service a gateway implementation creates (istio appends the class)."""
    service = f"{gateway_name}-{class_name}" if class_name == "istio" else gateway_name
    return f"{service}.{namespace}.svc.cluster.local"


def gateway_name(stack_name: str) -> str:
    return f"{stack_name}-gateway"


def route_name(stack_name: str) -> str:
    return f"{stack_name}-route"


def base_url(args: GatewayArgs) -> str:
    """The OpenAI-compatible base URL clients in the cluster use."""
    return f"http://{service_host(gateway_name(args.stack_name), args.class_name, args.namespace)}:{args.port}/v1"


def gateway(name: str, args: GatewayArgs) -> list[Child]:
    if not args.pool_name:
        raise ValueError(f"Gateway {name}: pool_name is empty; the route needs an InferencePool to send requests to.")
    entry_name = gateway_name(args.stack_name)
    route = route_name(args.stack_name)
    labels = {PART_OF_LABEL: args.stack_name, component.COMPONENT_LABEL: "gateway"}
    listener = {
        "name": "http",
        "port": args.port,
        "protocol": "HTTP",
        "allowedRoutes": {"namespaces": {"from": "Same"}},
        "hostname": args.hostname or None,
    }
    return [
        Child(
            entry_name,
            manifest(
                GATEWAY_API_VERSION,
                "Gateway",
                object_meta(entry_name, args.namespace, labels),
                spec={"gatewayClassName": args.class_name, "listeners": [listener]},
            ),
        ),
        Child(
            route,
            manifest(
                GATEWAY_API_VERSION,
                "HTTPRoute",
                object_meta(route, args.namespace, labels),
                spec={
                    "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": entry_name}],
                    "rules": [
                        {
                            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                            "backendRefs": [{"group": POOL_GROUP, "kind": "InferencePool", "name": args.pool_name}],
                        }
                    ],
                },
            ),
            after=(entry_name,),
        ),
    ]
