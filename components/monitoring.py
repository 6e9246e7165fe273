"""Monitoring: PodMonitors (Prometheus Operator) for prefill, decode and the EPP, and the P/D dashboard.

Engines expose vLLM metrics on their serving port(s) at /metrics (every DP rank on its own port);
the EPP on its metrics port. The dashboard JSON lives in observability/ and ships as a ConfigMap
labelled for Grafana's dashboard sidecar.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

from components import pod

TYPE = "rebel100:serving:Monitoring"
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


class Monitoring(pulumi.ComponentResource):
    def __init__(self, name: str, args: MonitoringArgs, opts: Optional[pulumi.ResourceOptions] = None):
        if args.pod_monitors and not args.targets:
            raise ValueError(f"Monitoring {name}: PodMonitors are on but there is nothing to scrape.")
        super().__init__(TYPE, name, None, opts)
        child = pod.child_options(self, opts)
        labels = {pod.PART_OF_LABEL: args.stack_name, pod.COMPONENT_LABEL: "monitoring"}
        monitors = []
        if args.pod_monitors:
            for target in args.targets:
                monitor_name = f"{args.stack_name}-{target.role}"
                k8s.apiextensions.CustomResource(
                    f"{monitor_name}-podmonitor", api_version="monitoring.coreos.com/v1", kind="PodMonitor",
                    metadata=pod.object_meta(monitor_name, args.namespace, labels),
                    spec={
                        "selector": {"matchLabels": target.selector},
                        "podMetricsEndpoints": [{"port": port, "path": "/metrics", "interval": args.scrape_interval}
                                                for port in target.port_names],
                    },
                    opts=child)
                monitors.append(monitor_name)
        if args.dashboard:
            k8s.core.v1.ConfigMap(
                f"{args.stack_name}-dashboard", metadata=pod.object_meta(
                    f"{args.stack_name}-grafana-dashboard", args.namespace, {**labels, "grafana_dashboard": "1"}),
                data={"rebel100-pd.json": DASHBOARD_FILE.read_text()}, opts=child)
        self.register_outputs({"podMonitors": monitors})
