"""Monitoring's objects: PodMonitors (Prometheus Operator) for prefill, decode and the EPP, and the P/D dashboard.

Engines expose vLLM metrics on their serving port(s) at /metrics (every DP rank on its own port);
the EPP on its metrics port. The dashboard JSON lives in observability/ and ships as a ConfigMap
labelled for Grafana's dashboard sidecar.
"""
from __future__ import annotations

import pathlib

from pydantic import BaseModel, ConfigDict, Field

from objects import pod
from objects.kube import Child, manifest, object_meta

DASHBOARD_FILE = pathlib.Path(__file__).resolve().parent.parent / "observability" / "grafana-dashboard.json"


class MonitoredRole(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str = Field(description="Value of llm-d.ai/role, or `router` for the EPP.")
    selector: dict[str, str] = Field(description="Labels of the pods to scrape.")
    port_names: list[str] = Field(description="Container port names that serve /metrics.")


class MonitoringArgs(pod.StackArgs):
    targets: list[MonitoredRole] = Field(description="What to scrape.")
    pod_monitors: bool = Field(True, description="Render the PodMonitors.")
    dashboard: bool = Field(True, description="Render the dashboard ConfigMap.")
    scrape_interval: str = Field("30s", description="Scrape interval.")


def monitoring(name: str, args: MonitoringArgs) -> list[Child]:
    if args.pod_monitors and not args.targets:
        raise ValueError(f"Monitoring {name}: PodMonitors are on but there is nothing to scrape.")
    labels = {pod.PART_OF_LABEL: args.stack_name, pod.COMPONENT_LABEL: "monitoring"}
    children = []
    if args.pod_monitors:
        for target in args.targets:
            monitor_name = f"{args.stack_name}-{target.role}"
            children.append(Child(f"{monitor_name}-podmonitor", manifest(
                "monitoring.coreos.com/v1", "PodMonitor", object_meta(monitor_name, args.namespace, labels), spec={
                    "selector": pod.match_labels(target.selector),
                    "podMetricsEndpoints": [{"port": port, "path": "/metrics", "interval": args.scrape_interval}
                                            for port in target.port_names],
                })))
    if args.dashboard:
        children.append(Child(f"{args.stack_name}-dashboard", manifest("v1", "ConfigMap", object_meta(
            f"{args.stack_name}-grafana-dashboard", args.namespace, {**labels, "grafana_dashboard": "1"}),
            data={"rebel100-pd.json": DASHBOARD_FILE.read_text()})))
    return children
