"""Monitoring: PodMonitors (Prometheus Operator) for prefill, decode and the EPP, the stack's alerts (a
PrometheusRule) and the P/D dashboard (`objects.monitoring`)."""

from __future__ import annotations

import pulumi

from components import resources
from objects.monitoring import MonitoredRole, MonitoringArgs, monitoring

__all__ = ["MonitoredRole", "Monitoring", "MonitoringArgs"]

TYPE = "rebel100:serving:Monitoring"


class Monitoring(pulumi.ComponentResource):
    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        children = monitoring(name, args)  # refuses bad args before anything is registered
        super().__init__(TYPE, name, None, opts)
        resources.register(self, children, opts)
        self.register_outputs(
            {
                "podMonitors": [c.name for c in children if c.kind == "PodMonitor"],
                "prometheusRules": [c.name for c in children if c.kind == "PrometheusRule"],
            }
        )
