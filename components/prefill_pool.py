"""PrefillPool: the prefill engines (PP4 in the Target Configuration), one pod per slot.

Prefill computes the prompt's KV; decode pulls it over NIXL. With a KV tier, prefill also
stores and looks up KV in LMCache (RDS or CPU) through a MultiConnector.
"""
from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components import pod

TYPE = "rebel100:serving:PrefillPool"


class PrefillPoolArgs(pod.EnginePoolArgs):
    kv_tier_config_map: Optional[str] = Field(None, description="ConfigMap with the LMCache environment (RdsTier's); None: no KV tier.")


class PrefillPool(pulumi.ComponentResource):
    deployments: list[k8s.apps.v1.Deployment]
    devices_per_pod: int

    def __init__(self, name: str, args: PrefillPoolArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        container = pod.engine_container(args.engine, name="vllm", hf_token_secret=args.hf_token_secret,
                                         env_from_config_map=args.kv_tier_config_map)
        deployments = pod.engine_pool(self, name, role_name="prefill", args=args, containers=[container], opts=opts)
        self.deployments = deployments
        self.devices_per_pod = args.claim.npus
        self.register_outputs({
            "deploymentNames": [d.metadata.name for d in deployments],
            "replicas": args.replicas,
            "devicesPerPod": args.claim.npus,
            "ports": list(args.engine.rank_ports),
        })
