"""objects/stack.py: every component's objects, and what Pulumi is told about each of them (what it waits for,
what it keeps on destroy, how long it waits): the options the mock runtime cannot show."""

from core.config import StackConfig
from core.sizing import rollout_timeout_seconds
from objects.stack import stack_objects


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
