"""The InferencePool's endpoints as the EPP makes them from the render: every one of them leads to a port the pod
serves on (issue 23: prefill pods serve on 8000 only, the pool targets the decode sidecar's 8000-8003).

The EPP's reading is written out here from its source, not taken from core.labels: `extractActivePorts` of
pkg/epp/datastore/datastore.go in llm-d-router v0.10.0 (reads `llm-d.ai/active-ports`, else the legacy key) and in
gateway-api-inference-extension v1.4.0, the EPP of llm-d-inference-scheduler v0.7.1 (reads the legacy key only).
A pod without the annotation gets one endpoint per targetPort; with it, one per target port it lists
(comma-separated numbers; other ports and words are dropped).
"""

import pytest

from core.config import StackConfig
from objects.stack import stack_objects

EPP_LOOKUPS = {
    "llm-d-router v0.10.0": ("llm-d.ai/active-ports", "inference.networking.k8s.io/active-ports"),
    "llm-d-inference-scheduler v0.7.1": ("inference.networking.k8s.io/active-ports",),
}


def endpoint_ports(annotations: dict, targets: list[int], keys: tuple[str, ...]) -> list[int]:
    for key in keys:
        if key in annotations:
            listed = {int(word) for word in annotations[key].split(",") if word.strip().isdigit()}
            return sorted(listed & set(targets))
    return sorted(targets)


def serving_ports(spec: dict) -> list[int]:
    """Where a pod serves requests: its routing sidecar's ports when it has one, else its engine's `http` ports."""
    sidecars = [c for c in spec.get("initContainers") or [] if c["name"] == "routing-proxy"]
    containers = sidecars or [c for c in spec["containers"] if c["name"] == "vllm"]
    return sorted(p["containerPort"] for c in containers for p in c["ports"] if p["name"].startswith(("proxy", "http")))


def pool_and_templates(**config):
    manifests = stack_objects(StackConfig(name="t", namespace="ns", **config)).manifests()
    pool = next(m for m in manifests if m["kind"] == "InferencePool")
    selector = pool["spec"]["selector"]["matchLabels"]
    templates = {
        m["metadata"]["name"]: m["spec"]["template"]
        for m in manifests
        if m["kind"] == "Deployment" and selector.items() <= m["spec"]["template"]["metadata"]["labels"].items()
    }
    return [p["number"] for p in pool["spec"]["targetPorts"]], templates


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"topology": "agg", "prefill": {"replicas": 0}, "kvTier": {"mode": "off"}},
        {"decode": {"dataParallelSize": 2}},
        {"prefill": {"port": 8002}},
        {"placement": {"groups": 2}},
    ],
    ids=["pd", "agg", "decode-dp2", "prefill-on-8002", "two-groups"],
)
@pytest.mark.parametrize("epp", EPP_LOOKUPS)
def test_every_endpoint_the_epp_makes_of_a_selected_pod_leads_to_a_port_it_serves_on(config, epp):
    targets, templates = pool_and_templates(**config)
    assert templates, "the pool selects no Deployment"
    for name, template in templates.items():
        serving = serving_ports(template["spec"])
        endpoints = endpoint_ports(template["metadata"].get("annotations") or {}, targets, EPP_LOOKUPS[epp])
        assert endpoints, f"{epp} makes no endpoint of {name}"
        assert set(endpoints) <= set(serving), f"{epp}: {name} serves on {serving}, endpoints on {endpoints}"


def test_engine_pods_declare_the_target_ports_they_serve_on_under_both_keys():
    targets, templates = pool_and_templates()
    assert targets == [8000, 8001, 8002, 8003]
    for name, ports in (("t-prefill", "8000"), ("t-decode", "8000,8001,8002,8003")):
        annotations = templates[name]["metadata"]["annotations"]
        assert annotations["llm-d.ai/active-ports"] == annotations["inference.networking.k8s.io/active-ports"] == ports


def test_the_programs_active_ports_win_over_pod_annotations_of_the_same_key():
    """`engine.podAnnotations` may not replace what the program declares (the gate refuses such a key too)."""
    _, templates = pool_and_templates(engine={"podAnnotations": {"llm-d.ai/active-ports": "8001"}})
    assert templates["t-prefill"]["metadata"]["annotations"]["llm-d.ai/active-ports"] == "8000"


def test_the_pods_carry_every_key_some_router_generation_reads():
    """The pods carry the keys core/versions/router.py says some generation reads, and those are the EPPs' own."""
    from core.versions import router

    _, templates = pool_and_templates()
    for template in templates.values():
        carried = {k for k in template["metadata"]["annotations"] if k.endswith("/active-ports")}
        assert carried == set(router.every_active_ports_annotation())
    assert {key for g in router.GENERATIONS for key in g.active_ports} == {
        key for keys in EPP_LOOKUPS.values() for key in keys
    }
