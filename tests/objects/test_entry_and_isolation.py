"""The Gateway, its HTTPRoute and the NetworkPolicies against values written out by hand (issue 25).

The serving paths of docs/what-it-deploys.md (Network isolation): the gateway's pods reach the EPP's ext-proc port
and the decode sidecars (in AGG the decode ranks); decode reaches prefill's engine port and NIXL side channel, prefill
decode's side channels; the EPP and the monitoring namespace read the engines' metrics; everything else of the stack
is denied ingress. Literals, never computed by a call into core/ or objects/; `make mutate SCOPE=objects` found
these unchecked.
"""

from __future__ import annotations

import pytest

from core.gate import load_config
from objects.gateway import gateway
from objects.network_isolation import NetworkIsolationArgs, network_isolation
from objects.stack import stack_objects
from tests import defaults
from tests.conftest import stack_config

NS, STACK = "rebel100", "minimax-m27"
GATEWAY, ROUTE = f"{STACK}-gateway", f"{STACK}-route"


def children_of(stack: str, **overrides) -> dict[tuple[str, str], object]:
    cfg = load_config(stack_config(stack, **overrides))
    return {(child.kind, child.name): child for child in stack_objects(cfg).children()}


def meta(name: str, component: str) -> dict:
    return {
        "name": name,
        "namespace": NS,
        "labels": {"app.kubernetes.io/part-of": STACK, "app.kubernetes.io/component": component},
        "annotations": {"pulumi.com/patchForce": "true"},
    }


# --- the Gateway and the HTTPRoute ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, class_name, listener",
    [
        pytest.param({}, "istio", {"name": "http", "port": 80, "protocol": "HTTP"}, id="default"),
        pytest.param(
            {"gateway": {"className": "agentgateway", "port": 8080, "hostname": "llm.example.com"}},
            "agentgateway",
            {"name": "http", "port": 8080, "protocol": "HTTP", "hostname": "llm.example.com"},
            id="agentgateway-8080-host",
        ),
    ],
)
def test_the_gateway_listens_for_routes_of_its_namespace_and_the_route_sends_all_to_the_pool(
    overrides, class_name, listener
):
    children = children_of("prod-4p4d", **overrides)
    entry, route = children[("Gateway", GATEWAY)], children[("HTTPRoute", ROUTE)]
    assert entry.manifest == {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": meta(GATEWAY, "gateway"),
        "spec": {
            "gatewayClassName": class_name,
            "listeners": [{**listener, "allowedRoutes": {"namespaces": {"from": "Same"}}}],
        },
    }
    assert route.manifest == {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": meta(ROUTE, "gateway"),
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": f"{STACK}-pool"}
                    ],
                }
            ],
        },
    }
    assert (entry.resource_name, route.resource_name, route.after) == (GATEWAY, ROUTE, (GATEWAY,))


@pytest.mark.parametrize(
    "overrides, url",
    [
        pytest.param({}, "http://minimax-m27-gateway-istio.rebel100.svc.cluster.local:80/v1", id="istio"),
        # agentgateway names the Service after the Gateway alone.
        pytest.param(
            {"gateway": {"className": "agentgateway", "port": 8080}},
            "http://minimax-m27-gateway.rebel100.svc.cluster.local:8080/v1",
            id="agentgateway",
        ),
    ],
)
def test_the_stack_outputs_the_in_cluster_base_url_of_the_gateways_service(overrides, url):
    cfg = load_config(stack_config("prod-4p4d", **overrides))
    assert stack_objects(cfg).outputs["openaiBaseUrl"] == url


def test_a_gateway_without_a_pool_is_refused():
    with pytest.raises(ValueError) as error:
        gateway("g", defaults.gateway_args(defaults.config(STACK, NS), pool_name=""))
    assert str(error.value) == ("Gateway g: pool_name is empty; the route needs an InferencePool to send requests to.")


# --- the NetworkPolicies ----------------------------------------------------------------------------------------------

GATEWAY_PODS = {"podSelector": {"matchLabels": {"gateway.networking.k8s.io/gateway-name": GATEWAY}}}
MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
EPP_PODS = {
    "podSelector": {
        "matchLabels": {
            "app.kubernetes.io/part-of": STACK,
            "app.kubernetes.io/name": f"{STACK}-epp",
            "app.kubernetes.io/component": "router",
        }
    }
}


def role_pods(role: str) -> dict:
    return {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": STACK, "llm-d.ai/role": role}}}


def tcp(*ports: int) -> list[dict]:
    return [{"port": port, "protocol": "TCP"} for port in ports]


def network_policy(suffix: str, selector: dict, ingress: list[dict] | None) -> dict:
    spec = {"podSelector": selector, "policyTypes": ["Ingress"]}
    if ingress is not None:
        spec["ingress"] = ingress
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(f"{STACK}-{suffix}", "network-policy"),
        "spec": spec,
    }


DEFAULT_DENY = network_policy("default-deny", {"matchLabels": {"app.kubernetes.io/part-of": STACK}}, None)
EPP_POLICY = network_policy(
    "epp",
    EPP_PODS["podSelector"],
    [{"from": [GATEWAY_PODS], "ports": tcp(9002)}, {"from": [MONITORING], "ports": tcp(9090)}],
)


def policies(stack: str, **overrides) -> dict[str, dict]:
    children = children_of(stack, **overrides)
    found = {name: child for (kind, name), child in children.items() if kind == "NetworkPolicy"}
    assert all(child.resource_name == name for name, child in found.items())
    return {name: child.manifest for name, child in found.items()}


def test_pd_admits_only_the_serving_paths():
    assert policies("prod-4p4d") == {
        f"{STACK}-default-deny": DEFAULT_DENY,
        f"{STACK}-epp": EPP_POLICY,
        f"{STACK}-decode": network_policy(
            "decode",
            role_pods("decode")["podSelector"],
            [
                {"from": [GATEWAY_PODS], "ports": tcp(8000, 8001, 8002, 8003)},  # the sidecar
                {"from": [EPP_PODS, MONITORING], "ports": tcp(8200, 8201, 8202, 8203)},  # the ranks' metrics
                {"from": [role_pods("prefill")], "ports": tcp(5600, 5601, 5602, 5603)},  # NIXL handshake
            ],
        ),
        f"{STACK}-prefill": network_policy(
            "prefill",
            role_pods("prefill")["podSelector"],
            [
                {"from": [role_pods("decode")], "ports": tcp(8000, 5600)},
                {"from": [EPP_PODS, MONITORING], "ports": tcp(8000)},
            ],
        ),
    }


def test_agg_admits_the_gateway_at_the_ranks_and_has_no_prefill():
    assert policies("agg") == {
        f"{STACK}-default-deny": DEFAULT_DENY,
        f"{STACK}-epp": EPP_POLICY,
        f"{STACK}-decode": network_policy(
            "decode",
            role_pods("decode")["podSelector"],
            [
                {"from": [GATEWAY_PODS], "ports": tcp(8200, 8201, 8202, 8203)},
                {"from": [EPP_PODS, MONITORING], "ports": tcp(8200, 8201, 8202, 8203)},
            ],
        ),
    }


def test_the_monitoring_namespace_and_the_gateway_label_of_the_config():
    found = policies(
        "prod-4p4d", security={"monitoringNamespace": "observe", "gatewayPodLabel": "istio.io/gateway-name"}
    )
    (gateway_rule, metrics_rule) = found[f"{STACK}-epp"]["spec"]["ingress"]
    assert gateway_rule["from"] == [{"podSelector": {"matchLabels": {"istio.io/gateway-name": GATEWAY}}}]
    assert metrics_rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observe"}}}]


def test_no_network_policies_when_turned_off():
    assert policies("prod-4p4d", security={"networkPolicies": False}) == {}


def isolation_args(**fields) -> NetworkIsolationArgs:
    """The reference stack's isolation with one decode rank, no prefill port, and `fields`."""
    base = dict(
        gateway_name=GATEWAY,
        epp_labels={"app": "epp"},
        decode_ports=[8200],
        decode_nixl_ports=[5600],
        prefill_port=None,
        prefill_nixl_ports=[],
    )
    return defaults.network_args(defaults.config(STACK, NS), **{**base, **fields})


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"entry_ports": [8000]},
            "NetworkIsolation n: a P/D stack needs prefill_port to let decode reach prefill.",
        ),
        (
            {"entry_ports": [], "prefill_port": 8000},
            "NetworkIsolation n: entry_ports is empty; the gateway could reach no serving pod.",
        ),
        (
            {"entry_ports": [], "topology": "agg"},
            "NetworkIsolation n: entry_ports is empty; the gateway could reach no serving pod.",
        ),
    ],
)
def test_isolation_without_the_ports_it_must_open_is_refused(fields, message):
    with pytest.raises(ValueError) as error:
        network_isolation("n", isolation_args(**fields))
    assert str(error.value) == message


def test_agg_needs_no_prefill_port():
    names = [child.name for child in network_isolation("n", isolation_args(entry_ports=[8200], topology="agg"))]
    assert names == [f"{STACK}-default-deny", f"{STACK}-epp", f"{STACK}-decode"]
