"""objects/stack.py: every component's objects, and what Pulumi is told about each of them (what it waits for,
what it keeps on destroy, how long it waits): the options the mock runtime cannot show."""

import json

import yaml

from core.config import StackConfig
from objects.stack import hf_token_withheld, stack_objects


def children(**config):
    """The stack's parts, and its objects by (kind, resource name): a URN names the type, so one name may serve
    two kinds (the Deployment `t-decode` and the NetworkPolicy `t-decode`)."""
    parts = stack_objects(StackConfig(name="t", namespace="ns", **config))
    return parts, {(child.kind, child.resource_name): child for child in parts.children()}


def test_resource_names_are_unique_per_kind_and_made_from_the_components_names():
    parts, by_name = children(weights={"source": "download"})
    assert len(by_name) == len(parts.children())
    for part in (parts.weights, parts.kv_tier, parts.prefill, parts.decode, parts.router, parts.gateway):
        assert all(child.resource_name.startswith("t-") for child in part.children), part.name


def test_data_volumes_and_their_namespace_are_kept_on_destroy():
    _, by_name = children(weights={"source": "download"})
    kept = sorted(child.name for child in by_name.values() if child.retain_on_delete)
    assert kept == ["model-weights", "ns", "t-decode-compile-cache", "t-prefill-compile-cache"]
    _, not_kept = children(weights={"source": "download"}, storage={"retainOnDelete": False})
    assert not any(child.retain_on_delete for child in not_kept.values())


def test_up_waits_for_engine_rollouts_and_the_download_as_long_as_they_may_take():
    _, by_name = children(weights={"source": "download", "timeoutMinutes": 90})
    engine = "29640s"  # 4 pods one after another, each 120 s of stop and 15 + 30 x 240 s of start; + 300 s
    assert {c.name: c.timeout for c in by_name.values() if c.timeout} == {
        "t-prefill": engine,
        "t-decode": engine,
        next(c.name for c in by_name.values() if c.kind == "Job"): "90m",
    }


def test_siblings_wait_for_what_they_refer_to():
    _, by_name = children(weights={"source": "download"})
    after = {name: child.after for (_, name), child in by_name.items() if child.after}
    assert after == {
        "t-weights-download": ("t-weights-pvc",),
        "t-epp-rolebinding": ("t-epp-sa", "t-epp-role"),
        "t-epp-metrics-auth-binding": ("t-epp-sa", "t-epp-metrics-auth"),
        "t-metrics-reader-token": ("t-metrics-reader-sa",),
        "t-metrics-reader-binding": ("t-metrics-reader-sa", "t-metrics-reader"),
        "t-epp-podmonitor": ("t-metrics-reader-token",),
        "t-epp": ("t-epp-config", "t-epp-tls"),
        "t-decode-rolebinding": ("t-decode-sa", "t-decode-role"),
        "t-decode": ("t-decode-rolebinding",),  # which is after the account and the Role
        "t-pool": ("t-epp-svc",),
        "t-route": ("t-gateway",),
    }
    names = {name for _, name in by_name}
    for name, waits_for in after.items():
        assert set(waits_for) <= names, name


def test_agg_has_neither_prefill_nor_kv_tier():
    parts, _ = children(topology="agg")
    assert parts.prefill is None and parts.kv_tier is None
    assert parts.decode.args.sidecar is None


def test_the_namespace_and_the_token_secret_written_out():
    parts, by_name = children(hfTokenSecret="hub-token")
    assert by_name[("Namespace", "namespace")].manifest == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "labels": {"app.kubernetes.io/part-of": "t"}},
    }
    assert parts.hf_token is None  # no token given: no Secret
    with_token = stack_objects(StackConfig(name="t", namespace="ns", hfTokenSecret="hub-token"), hf_token="hf_abc")
    assert with_token.hf_token.resource_name == "hf-token"
    assert with_token.hf_token.manifest == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "hub-token",
            "namespace": "ns",
            "labels": {"app.kubernetes.io/part-of": "t"},
            "annotations": {"pulumi.com/patchForce": "true"},
        },
        "type": "Opaque",
        "stringData": {"token": "hf_abc"},
    }
    assert with_token.children()[:2] == [with_token.namespace, with_token.hf_token]


def test_a_render_stack_withholds_the_token_secret_and_says_how_to_create_it():
    assert hf_token_withheld(StackConfig(name="t", namespace="ns"), "prod") is None
    cfg = StackConfig(name="t", namespace="ns", renderDirectory="out/prod", hfTokenSecret="hub-token")
    assert hf_token_withheld(cfg, "prod") == (
        "rebel100:hfToken is set, but stack 'prod' renders to out/prod, which would hold the token in plain text: "
        "the Secret hub-token is not rendered. Create it where the render is applied: kubectl create secret generic "
        "hub-token --from-literal=token=... -n ns"
    )


def test_the_outputs_name_the_served_model_and_the_base_url():
    outputs = stack_objects(StackConfig(name="t", namespace="ns")).outputs
    assert (outputs["servedModelName"], outputs["openaiBaseUrl"]) == (
        "MiniMaxAI/MiniMax-M2.7",
        "http://t-gateway-istio.ns.svc.cluster.local:80/v1",
    )
    served = stack_objects(StackConfig(name="t", namespace="ns", model={"servedName": "m27"})).outputs
    assert served["servedModelName"] == "m27"


def test_each_part_is_named_after_the_stack_and_its_component():
    parts, _ = children()
    named = [parts.weights, parts.kv_tier, parts.prefill, parts.decode, parts.router, parts.gateway]
    assert [part.name for part in [*named, parts.network, parts.monitoring]] == [
        "t-weights",
        "t-kv-tier",
        "t-prefill",
        "t-decode",
        "t-router",
        "t-gateway",
        "t-network",
        "t-monitoring",
    ]


def test_the_decode_objects_are_named_after_the_decode_part_without_the_api_reading_sidecar_too():
    """AGG (no sidecar) and the v0.7 sidecar (no SSRF allowlist, no API access): the same resource names."""
    for config in (
        {"topology": "agg"},
        {"decode": {"sidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"}}},
    ):
        parts, _ = children(**config)
        assert [child.resource_name for child in parts.decode.children] == [
            "t-decode-claim",
            "t-decode-compile-cache",
            "t-decode",
            "t-decode-pdb",
        ]


def test_the_kv_tier_is_told_the_chiplets_hbm_and_the_tokens_each_rank_keeps():
    parts, by_name = children(hardware={"hbmPerChipletGib": 48}, kvTier={"mode": "rds", "rdsMaxChunks": 1000})
    # 1000 chunks of LMCache's 4096 tokens on RDS per rank.
    assert parts.kv_tier.args.tokens_per_rank == 4_096_000
    budget = json.loads(
        by_name[("ConfigMap", "t-kv-tier-lmcache")].manifest["metadata"]["annotations"]["rebel100.ai/rds-budget"]
    )
    assert budget["hbmPerChipletGib"] == 48.0


def test_the_router_section_reaches_the_pool_the_epp_config_and_the_network_policy():
    _, by_name = children(router={"failureMode": "FailClose", "grpcPort": 9102, "metricsPort": 9190})
    assert by_name[("InferencePool", "t-pool")].manifest["spec"]["endpointPickerRef"]["failureMode"] == "FailClose"
    (gateway_rule, metrics_rule) = by_name[("NetworkPolicy", "t-epp")].manifest["spec"]["ingress"]
    assert (gateway_rule["ports"], metrics_rule["ports"]) == (
        [{"port": 9102, "protocol": "TCP"}],
        [{"port": 9190, "protocol": "TCP"}],
    )


def epp_plugins(**config) -> list[str]:
    _, by_name = children(**config)
    document = yaml.safe_load(by_name[("ConfigMap", "t-epp-config")].manifest["data"]["epp-config.yaml"])
    return [plugin["type"] for plugin in document["plugins"]]


def test_agg_routes_without_the_pd_plugins():
    """P/D filters prefill and decode pods and decides per request; AGG has one role and nothing to decide."""
    pd, agg = epp_plugins(), epp_plugins(topology="agg")
    assert {"prefill-filter", "decode-filter", "prefix-based-pd-decider", "disagg-profile-handler"} <= set(pd)
    assert not {"prefill-filter", "decode-filter", "prefix-based-pd-decider", "disagg-profile-handler"} & set(agg)


def test_the_weights_of_another_model_are_what_the_job_downloads():
    _, by_name = children(weights={"source": "download"}, model={"name": "MiniMaxAI/MiniMax-M2.5"})
    (job,) = [child.manifest for (kind, _), child in by_name.items() if kind == "Job"]
    assert job["metadata"]["annotations"]["rebel100.ai/model"] == "MiniMaxAI/MiniMax-M2.5"
