"""The monitoring objects against values written out by hand (issue 25): the PodMonitors of prefill, decode and the EPP
(each rank's port, /metrics, the scrape interval; the EPP's with the metrics reader's token), the reader's account,
token Secret and ClusterRole, and the Grafana dashboard ConfigMap with the router generation's decision counter and,
for autoscaled roles, the autoscaling panels. Literals from docs/operations.md (Observability), docs/what-it-deploys.md
and the dashboard files, never computed by a call into core/ or objects/; `make mutate SCOPE=objects` found these
unchecked.
"""

from __future__ import annotations

import json

import pytest

from core.gate import load_config
from objects.monitoring import monitoring
from objects.stack import stack_objects
from tests import defaults
from tests.conftest import stack_config

NS, STACK = "rebel100", "minimax-m27"
READER = f"{STACK}-metrics-reader"
LABELS = {"app.kubernetes.io/part-of": STACK, "app.kubernetes.io/component": "monitoring"}


def children_of(stack: str, **overrides) -> dict[tuple[str, str], object]:
    cfg = load_config(stack_config(stack, **overrides))
    return {(child.kind, child.name): child for child in stack_objects(cfg).children()}


def meta(name: str, namespace: str | None = NS, labels: dict = LABELS, **annotations: str) -> dict:
    found = {"name": name, "labels": labels, "annotations": {"pulumi.com/patchForce": "true", **annotations}}
    if namespace is not None:
        found["namespace"] = namespace
    return found


def endpoints(ports: list[str], interval: str = "30s", token: bool = False) -> list[dict]:
    auth = {"authorization": {"credentials": {"name": f"{READER}-token", "key": "token"}}} if token else {}
    return [{"port": port, "path": "/metrics", "interval": interval, **auth} for port in ports]


def pod_monitor(role: str, selector: dict, ports: list[str], **kwargs) -> dict:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": meta(f"{STACK}-{role}"),
        "spec": {"selector": {"matchLabels": selector}, "podMetricsEndpoints": endpoints(ports, **kwargs)},
    }


EPP_SELECTOR = {
    "app.kubernetes.io/part-of": STACK,
    "app.kubernetes.io/name": f"{STACK}-epp",
    "app.kubernetes.io/component": "router",
}


@pytest.mark.parametrize("interval", ["30s", "15s"])
def test_each_role_is_scraped_on_every_rank_and_the_epp_with_the_readers_token(interval):
    children = children_of("prod-4p4d", observability={"scrapeInterval": interval})
    monitors = {name: child for (kind, name), child in children.items() if kind == "PodMonitor"}
    # In the order of the serving flow, as the stack registers and renders them.
    assert list(monitors) == [f"{STACK}-prefill", f"{STACK}-decode", f"{STACK}-epp"]
    assert {name: child.manifest for name, child in monitors.items()} == {
        f"{STACK}-prefill": pod_monitor(
            "prefill", {"app.kubernetes.io/part-of": STACK, "llm-d.ai/role": "prefill"}, ["http"], interval=interval
        ),
        f"{STACK}-decode": pod_monitor(
            "decode",
            {"app.kubernetes.io/part-of": STACK, "llm-d.ai/role": "decode"},
            ["http-0", "http-1", "http-2", "http-3"],
            interval=interval,
        ),
        f"{STACK}-epp": pod_monitor("epp", EPP_SELECTOR, ["metrics"], interval=interval, token=True),
    }
    assert {name: (child.resource_name, child.after) for name, child in monitors.items()} == {
        f"{STACK}-prefill": (f"{STACK}-prefill-podmonitor", ()),
        f"{STACK}-decode": (f"{STACK}-decode-podmonitor", ()),
        f"{STACK}-epp": (f"{STACK}-epp-podmonitor", (f"{READER}-token",)),  # the token must exist first
    }


def test_the_metrics_reader_its_token_and_its_right_to_get_metrics():
    children = children_of("prod-4p4d")
    cluster_name = f"{NS}-{STACK}-metrics-reader"
    account = children[("ServiceAccount", READER)]
    assert account.manifest == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(READER),
        "automountServiceAccountToken": False,
    }
    secret = children[("Secret", f"{READER}-token")]
    assert secret.manifest == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(f"{READER}-token", **{"kubernetes.io/service-account.name": READER}),
        "type": "kubernetes.io/service-account-token",
    }
    role = children[("ClusterRole", cluster_name)]
    assert role.manifest == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta(cluster_name, namespace=None),
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    binding = children[("ClusterRoleBinding", cluster_name)]
    assert binding.manifest == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta(cluster_name, namespace=None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_name},
        "subjects": [{"kind": "ServiceAccount", "name": READER, "namespace": NS}],
    }
    assert [(c.resource_name, c.after) for c in (account, secret, role, binding)] == [
        (f"{READER}-sa", ()),
        (f"{READER}-token", (f"{READER}-sa",)),
        (READER, ()),
        (f"{READER}-binding", (f"{READER}-sa", READER)),
    ]


def dashboard_of(stack: str, **overrides) -> tuple[object, dict]:
    child = children_of(stack, **overrides)[("ConfigMap", f"{STACK}-grafana-dashboard")]
    (name,) = child.manifest["data"]
    assert name == "rebel100-pd.json"
    return child, json.loads(child.manifest["data"][name])


@pytest.mark.parametrize(
    "stack, counter",
    [
        ("prod-4p4d", "llm_d_epp_disagg_decision_total"),
        ("pd-router07", "llm_d_inference_scheduler_disagg_decision_total"),
    ],
)
def test_the_dashboard_is_labelled_for_grafana_and_queries_the_routers_decision_counter(stack, counter):
    child, document = dashboard_of(stack)
    assert child.resource_name == f"{STACK}-dashboard"
    assert (child.manifest["apiVersion"], child.manifest["kind"]) == ("v1", "ConfigMap")
    assert child.manifest["metadata"] == meta(f"{STACK}-grafana-dashboard", labels={**LABELS, "grafana_dashboard": "1"})
    text = json.dumps(document)
    assert counter in text and "${pd_decision_metric}" not in text
    # Six panels of the P/D stack; the autoscaling ones only with an autoscaled role.
    assert len(document["panels"]) == 6
    assert "autoscaler" not in text.lower()


def test_an_autoscaled_stack_gets_the_autoscaling_panels_of_its_deployments():
    _, document = dashboard_of(
        "prod-autoscale",
        placement={"groups": 2},
        prefill={"autoscaling": {"minReplicas": 2, "maxReplicas": 4}},
        decode={"autoscaling": {"minReplicas": 2, "maxReplicas": 4}},
    )
    panels = document["panels"]
    assert len(panels) == 8
    assert [panel["title"] for panel in panels[6:]] == [
        "Engine pods: desired by the autoscaler vs current",
        "Autoscaler signal per ScaledObject (KEDA)",
    ]
    text = json.dumps(panels[6:])
    alternation = "minimax-m27-prefill-g0|minimax-m27-prefill-g1|minimax-m27-decode-g0|minimax-m27-decode-g1"
    assert alternation in text and "${autoscaled_deployments}" not in text
    assert "llm_d_epp_disagg_decision_total" in json.dumps(panels[:6])


def test_the_autoscaled_dashboard_keeps_the_files_layout():
    """Laid out like observability/grafana-dashboard.json (two-space indent, a final newline), so the rendered
    ConfigMap reads like the file and a diff of it shows the added panels, not every line re-indented."""
    child, _ = dashboard_of("prod-autoscale")
    text = child.manifest["data"]["rebel100-pd.json"]
    assert text.startswith('{\n  "title": "Rebel100 serving: P/D",\n  "uid": ')
    assert text.endswith("\n  ]\n}\n")


def test_dev_has_neither_pod_monitors_nor_a_dashboard():
    kinds = {kind for kind, _ in children_of("dev")}
    assert "PodMonitor" not in kinds
    assert ("ConfigMap", f"{STACK}-grafana-dashboard") not in children_of("dev")


def test_a_dashboard_without_pod_monitors_has_no_reader():
    children = children_of("prod-4p4d", observability={"podMonitors": False})
    assert ("ConfigMap", f"{STACK}-grafana-dashboard") in children
    assert [key for key in children if key[0] == "PodMonitor" or key[1] == READER] == []


def test_pod_monitors_with_nothing_to_scrape_are_refused():
    args = defaults.monitoring_args(defaults.config(STACK, NS), targets=[], decision_metric="x")
    with pytest.raises(ValueError) as error:
        monitoring("m", args)
    assert str(error.value) == "Monitoring m: PodMonitors are on but there is nothing to scrape."


def test_pod_monitors_without_the_dashboard():
    children = children_of("prod-4p4d", observability={"grafanaDashboard": False})
    assert ("ConfigMap", f"{STACK}-grafana-dashboard") not in children
    assert len([key for key in children if key[0] == "PodMonitor"]) == 3
