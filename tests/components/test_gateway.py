"""Gateway alone: the Gateway listener and the HTTPRoute to the InferencePool."""

import pytest

from components.gateway import Gateway
from tests import defaults


def test_gateway_and_route(run_under_mocks):
    holder = {}

    def program():
        holder["gw"] = Gateway("t-gateway", defaults.gateway_args(pool_name="t-pool"))

    cluster = run_under_mocks(program)
    gateway = cluster.get("Gateway", "t-gateway")
    assert gateway["spec"]["gatewayClassName"] == "istio"
    assert gateway["spec"]["listeners"][0]["port"] == 80
    route = cluster.get("HTTPRoute", "t-route")
    assert route["spec"]["parentRefs"][0]["name"] == "t-gateway"
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "t-pool"}
    ]
    assert holder["gw"].base_url == "http://t-gateway-istio.ns.svc.cluster.local:80/v1"


def test_agentgateway_class(run_under_mocks):
    args = defaults.gateway_args(defaults.config(gateway={"className": "agentgateway", "hostname": "llm.example.com"}))
    cluster = run_under_mocks(lambda: Gateway("g", args))
    listener = cluster.get("Gateway", "t-gateway")["spec"]["listeners"][0]
    assert listener["hostname"] == "llm.example.com"


def test_refuses_empty_pool():
    with pytest.raises(ValueError, match="needs an InferencePool"):
        Gateway("g", defaults.gateway_args(pool_name=""))
