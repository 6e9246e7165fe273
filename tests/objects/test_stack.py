"""objects/stack.py: every component's objects, and what Pulumi is told about each of them (what it waits for,
what it keeps on destroy, how long it waits): the options the mock runtime cannot show."""

from core.config import StackConfig
from core.sizing import rollout_timeout_seconds
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
    engine = f"{rollout_timeout_seconds(240)}s"
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
        "t-epp": ("t-epp-config",),
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
