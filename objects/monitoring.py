"""Monitoring's objects: PodMonitors (Prometheus Operator) for prefill, decode and the EPP, the stack's alerts (a
PrometheusRule of the rules core/alerts.py works out) and the P/D dashboard.

Engines expose vLLM metrics on their serving port(s) at /metrics (every DP rank on its own port);
the EPP on its metrics port. The dashboard JSON lives in observability/ and ships as a ConfigMap
labelled for Grafana's dashboard sidecar.

The EPP answers /metrics only to a bearer token whose account may `get` the non-resource URL /metrics: its
PodMonitor sends the token of a metrics-reader ServiceAccount (a service-account-token Secret the token controller
fills), bound to a ClusterRole that allows that and nothing else (non-resource URLs are cluster-wide RBAC only).
"""

from __future__ import annotations

import json
import pathlib

from pydantic import BaseModel, ConfigDict, Field

from core import alerts as stack_alerts
from core.formats import PrometheusDuration
from core.labels import PART_OF_LABEL
from objects import component, manifests
from objects.manifests import Child, cluster_scoped_name, manifest, object_meta

DASHBOARD_FILE = pathlib.Path(__file__).resolve().parent.parent / "observability" / "grafana-dashboard.json"
# In the dashboard file, the P/D decision counter's name, which differs between router generations.
DECISION_METRIC_PLACEHOLDER = "${pd_decision_metric}"
# The panels of autoscaled engines (desired vs current pods, the signal), added when a role is autoscaled; in them,
# the autoscaled Deployments (ScaledObjects of the same names) as a regex alternation.
AUTOSCALING_PANELS_FILE = DASHBOARD_FILE.parent / "grafana-autoscaling-panels.json"
AUTOSCALED_PLACEHOLDER = "${autoscaled_deployments}"


class MonitoredRole(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str = Field(description="Value of llm-d.ai/role, or `router` for the EPP.")
    selector: dict[str, str] = Field(description="Labels of the pods to scrape.")
    port_names: list[str] = Field(description="Container port names that serve /metrics.")
    token: bool = Field(
        description="The target checks a bearer token on /metrics (the EPP's "
        "--metrics-endpoint-auth): the PodMonitor sends the metrics reader's.",
    )


class MonitoringArgs(component.StackArgs):
    targets: list[MonitoredRole] = Field(description="What to scrape.")
    pod_monitors: bool = Field(description="Render the PodMonitors.")
    dashboard: bool = Field(description="Render the dashboard ConfigMap.")
    scrape_interval: PrometheusDuration = Field(description="Scrape interval.")
    decision_metric: str = Field(
        description="The EPP's P/D decision counter (core/versions/router.py, per "
        "generation), which the dashboard's P/D panel queries."
    )
    autoscaled: list[str] = Field(
        description="Deployments a ScaledObject scales (of the same "
        "name): the dashboard gets their desired vs current pods and their signal.",
    )
    alerts: list[stack_alerts.Alert] = Field(
        description="The stack's alerting rules (core/alerts.py), rendered as one PrometheusRule; empty: none."
    )
    runbook_url: str = Field(description="Each alert's runbook_url is this + `#<alert name in lower case>`.")


def metrics_reader_name(stack_name: str) -> str:
    """The ServiceAccount whose token Prometheus sends to targets that check one."""
    return f"{stack_name}-metrics-reader"


def metrics_reader_token(stack_name: str) -> str:
    return f"{metrics_reader_name(stack_name)}-token"


def metrics_reader(args: MonitoringArgs, labels: dict[str, str]) -> list[Child]:
    """The reader's ServiceAccount (no pod runs as it), its token Secret, and its right to `get /metrics`."""
    reader, ns = metrics_reader_name(args.stack_name), args.namespace
    cluster_name = cluster_scoped_name(ns, args.stack_name, "metrics-reader")
    sa = Child(
        f"{reader}-sa",
        manifest("v1", "ServiceAccount", object_meta(reader, ns, labels), automountServiceAccountToken=False),
    )
    return [
        sa,
        # The token controller fills it, and deletes a token whose account does not exist: created after it.
        Child(
            f"{reader}-token",
            manifest(
                "v1",
                "Secret",
                object_meta(
                    metrics_reader_token(args.stack_name), ns, labels, {"kubernetes.io/service-account.name": reader}
                ),
                type="kubernetes.io/service-account-token",
            ),
            after=(f"{reader}-sa",),
        ),
        *manifests.role_and_binding(
            sa,
            object_meta(cluster_name, None, labels),
            [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            role=reader,
            binding=f"{reader}-binding",
        ),
    ]


def monitoring(name: str, args: MonitoringArgs) -> list[Child]:
    if args.pod_monitors and not args.targets:
        raise ValueError(f"Monitoring {name}: PodMonitors are on but there is nothing to scrape.")
    labels = {PART_OF_LABEL: args.stack_name, component.COMPONENT_LABEL: "monitoring"}
    children = []
    if args.pod_monitors:
        if any(target.token for target in args.targets):
            children += metrics_reader(args, labels)
        token = {"authorization": {"credentials": {"name": metrics_reader_token(args.stack_name), "key": "token"}}}
        for target in args.targets:
            monitor_name = f"{args.stack_name}-{target.role}"
            children.append(
                Child(
                    f"{monitor_name}-podmonitor",
                    manifest(
                        "monitoring.coreos.com/v1",
                        "PodMonitor",
                        object_meta(monitor_name, args.namespace, labels),
                        spec={
                            "selector": manifests.match_labels(target.selector),
                            "podMetricsEndpoints": [
                                {
                                    "port": port,
                                    "path": "/metrics",
                                    "interval": args.scrape_interval,
                                    **(token if target.token else {}),
                                }
                                for port in target.port_names
                            ],
                        },
                    ),
                    after=(f"{metrics_reader_name(args.stack_name)}-token",) if target.token else (),
                )
            )
    if args.alerts:
        name = stack_alerts.rule_name(args.stack_name)
        children.append(
            Child(
                name,
                manifest(
                    stack_alerts.API_VERSION,
                    "PrometheusRule",
                    object_meta(name, args.namespace, labels),
                    spec={
                        "groups": stack_alerts.rule_groups(
                            args.stack_name, args.namespace, args.alerts, args.runbook_url
                        )
                    },
                ),
            )
        )
    if args.dashboard:
        children.append(
            Child(
                f"{args.stack_name}-dashboard",
                manifest(
                    "v1",
                    "ConfigMap",
                    object_meta(
                        f"{args.stack_name}-grafana-dashboard", args.namespace, {**labels, "grafana_dashboard": "1"}
                    ),
                    data={"rebel100-pd.json": dashboard(args)},
                ),
            )
        )
    return children


def dashboard(args: MonitoringArgs) -> str:
    """The dashboard JSON: the file as it is, with the autoscaling panels appended when a role is autoscaled."""
    text = DASHBOARD_FILE.read_text().replace(DECISION_METRIC_PLACEHOLDER, args.decision_metric)
    if not args.autoscaled:
        return text
    document = json.loads(text)
    panels = AUTOSCALING_PANELS_FILE.read_text().replace(AUTOSCALED_PLACEHOLDER, "|".join(args.autoscaled))
    document["panels"] += json.loads(panels)
    return json.dumps(document, indent=2) + "\n"
