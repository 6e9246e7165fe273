"""Monitoring: PodMonitors per role, the alerts' PrometheusRule and the dashboard ConfigMap."""

import json

from components.monitoring import MonitoredRole, Monitoring
from tests import defaults


def test_pod_monitors_and_dashboard(run_under_mocks):
    targets = [
        MonitoredRole(
            role="decode", selector={"llm-d.ai/role": "decode"}, port_names=["http-0", "http-1"], token=False
        ),
        MonitoredRole(role="epp", selector={"app": "epp"}, port_names=["metrics"], token=False),
    ]
    cluster = run_under_mocks(
        lambda: Monitoring("m", defaults.monitoring_args(decision_metric="pd_counter", targets=targets))
    )
    decode = cluster.get("PodMonitor", "t-decode")
    assert decode["apiVersion"] == "monitoring.coreos.com/v1"
    assert [e["port"] for e in decode["spec"]["podMetricsEndpoints"]] == ["http-0", "http-1"]
    dashboard = cluster.get("ConfigMap", "t-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    panels = json.loads(dashboard["data"]["rebel100-pd.json"])["panels"]
    titles = " ".join(p["title"] for p in panels)
    for metric in (
        "Time to first token",
        "Inter-token latency",
        "KV cache usage",
        "Prefix cache hit rate",
        "P/D decisions",
    ):
        assert metric in titles
    [pd] = [p for p in panels if p["title"].startswith("P/D decisions")]
    assert [t["expr"] for t in pd["targets"]] == [
        'sum by (decision_type) (rate(pd_counter{namespace="$namespace"}[5m]))'
    ]


def test_off(run_under_mocks):
    cluster = run_under_mocks(
        lambda: Monitoring(
            "m",
            defaults.monitoring_args(
                decision_metric="pd_counter",
                targets=[],
                pod_monitors=False,
                dashboard=False,
                alerts=[],
            ),
        )
    )
    assert cluster.manifests == []


def test_a_target_that_checks_tokens_is_sent_the_metrics_readers(run_under_mocks):
    targets = [
        MonitoredRole(role="decode", selector={"llm-d.ai/role": "decode"}, port_names=["http-0"], token=False),
        MonitoredRole(role="epp", selector={"app": "epp"}, port_names=["metrics"], token=True),
    ]
    cluster = run_under_mocks(
        lambda: Monitoring("m", defaults.monitoring_args(decision_metric="pd_counter", targets=targets))
    )
    assert cluster.get("PodMonitor", "t-epp")["spec"]["podMetricsEndpoints"][0]["authorization"] == {
        "credentials": {"name": "t-metrics-reader-token", "key": "token"}
    }
    assert "authorization" not in cluster.get("PodMonitor", "t-decode")["spec"]["podMetricsEndpoints"][0]
    secret = cluster.get("Secret", "t-metrics-reader-token")
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.name"] == "t-metrics-reader"
    assert cluster.get("ClusterRole", "ns-t-metrics-reader")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    assert cluster.get("ClusterRoleBinding", "ns-t-metrics-reader")["subjects"] == [
        {"kind": "ServiceAccount", "name": "t-metrics-reader", "namespace": "ns"}
    ]


def test_no_reader_when_no_target_checks_tokens(run_under_mocks):
    targets = [MonitoredRole(role="decode", selector={"llm-d.ai/role": "decode"}, port_names=["http-0"], token=False)]
    cluster = run_under_mocks(
        lambda: Monitoring("m", defaults.monitoring_args(decision_metric="pd_counter", targets=targets))
    )
    assert {m["kind"] for m in cluster.manifests} == {"PodMonitor", "ConfigMap", "PrometheusRule"}


def test_the_alerts_are_one_prometheus_rule_in_the_namespace(run_under_mocks):
    cluster = run_under_mocks(lambda: Monitoring("m", defaults.monitoring_args(runbook_url="https://runbooks/ops")))
    rule = cluster.get("PrometheusRule", "t-alerts")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["namespace"] == "ns"
    [group] = rule["spec"]["groups"]
    assert group["name"] == "rebel100-t"
    first = group["rules"][0]
    assert first["alert"] == "Rebel100EppUnavailable"
    assert first["labels"] == {"severity": "critical", "role": "epp", "namespace": "ns"}
    assert first["annotations"]["runbook_url"] == "https://runbooks/ops#rebel100eppunavailable"
