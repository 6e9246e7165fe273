"""NetworkIsolation: default deny, then only the serving paths."""

import pytest

from components.network_isolation import NetworkIsolation
from tests import defaults

EPP = {"app.kubernetes.io/part-of": "t", "app.kubernetes.io/component": "router"}


def args(**overrides):
    """The reference stack's (P/D: entry 8000-8003, decode ranks 8200-8203 and NIXL 5600-5603, prefill 8000 and
    NIXL 5600), with `overrides`."""
    return defaults.network_args(**overrides)


def ingress(policy):
    return [
        (
            {
                tuple(sorted((p.get("podSelector") or p.get("namespaceSelector"))["matchLabels"].items()))
                for p in rule["from"]
            },
            [port["port"] for port in rule["ports"]],
        )
        for rule in policy["spec"].get("ingress", [])
    ]


def test_pd_policies(run_under_mocks):
    cluster = run_under_mocks(lambda: NetworkIsolation("n", args()))
    deny = cluster.get("NetworkPolicy", "t-default-deny")
    assert deny["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/part-of": "t"}
    assert deny["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in deny["spec"]
    gateway = (("gateway.networking.k8s.io/gateway-name", "t-gateway"),)
    decode = ingress(cluster.get("NetworkPolicy", "t-decode"))
    assert ({gateway}, [8000, 8001, 8002, 8003]) in decode
    prefill_pods = (("app.kubernetes.io/part-of", "t"), ("llm-d.ai/role", "prefill"))
    assert ({prefill_pods}, [5600, 5601, 5602, 5603]) in decode
    prefill = ingress(cluster.get("NetworkPolicy", "t-prefill"))
    decode_pods = (("app.kubernetes.io/part-of", "t"), ("llm-d.ai/role", "decode"))
    assert ({decode_pods}, [8000, 5600]) in prefill
    assert all(gateway not in peers for peers, _ in prefill), "the gateway must not reach prefill directly"
    epp = ingress(cluster.get("NetworkPolicy", "t-epp"))
    assert ({gateway}, [9002]) in epp


def test_agg_has_no_prefill_policy(run_under_mocks):
    cluster = run_under_mocks(
        lambda: NetworkIsolation(
            "n", args(topology="agg", entry_ports=[8200, 8201, 8202, 8203], prefill_port=None, prefill_nixl_ports=[])
        )
    )
    assert {p["metadata"]["name"] for p in cluster.of_kind("NetworkPolicy")} == {"t-default-deny", "t-epp", "t-decode"}


def test_refuses_pd_without_prefill_port():
    with pytest.raises(ValueError, match="needs prefill_port"):
        NetworkIsolation("n", args(prefill_port=None))
