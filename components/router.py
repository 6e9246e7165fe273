"""Router: the llm-d Endpoint Picker (EPP) and the InferencePool it serves (`objects.router`)."""

from __future__ import annotations

import pulumi

from components import resources
from core.labels import epp_name
from objects.router import RouterArgs, epp_labels, pool_name, router

__all__ = ["Router", "RouterArgs"]

TYPE = "rebel100:serving:Router"


class Router(pulumi.ComponentResource):
    pool_name: str
    service_name: str
    labels: dict[str, str]

    def __init__(self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None):
        children = router(name, args)  # refuses bad args before anything is registered
        super().__init__(TYPE, name, None, opts)
        resources.register(self, children, opts)
        self.pool_name = pool_name(args.stack_name)
        self.service_name = epp_name(args.stack_name)
        self.labels = epp_labels(args.stack_name)
        self.register_outputs(
            {
                "poolName": self.pool_name,
                "serviceName": self.service_name,
                "deploymentName": self.service_name,
            }
        )
