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
from core import serving
from core.config import Prefill

TYPE = "rebel100:serving:PrefillPool"


class PrefillPoolArgs(pod.EnginePoolArgs):
    role: Prefill = Field(Prefill(), description="The prefill section: replicas, parallelism, serving arguments.")
    kv_tier_config_map: Optional[str] = Field(None, description="ConfigMap with the LMCache environment (RdsTier's); None: no KV tier.")
    rds_nodes: bool = Field(False, description="Schedule only on nodes labelled rebellions.ai/rds.present=true.")


class PrefillPool(pulumi.ComponentResource):
    deployments: list[k8s.apps.v1.Deployment]
    devices_per_pod: int

    def __init__(self, name: str, args: PrefillPoolArgs, opts: Optional[pulumi.ResourceOptions] = None):
        role = args.role
        resolved = serving.role_serving(args.engine, role)
        super().__init__(TYPE, name, None, opts)

        # DP is rare on prefill (PP4/DP1 is the reference) but, when configured, reaches the engine.
        dp_args = (serving.data_parallel_args(role, dp_local=resolved.data_parallel_local, rpc_port=None)
                   if role.data_parallel_size > 1 else [])
        kv_transfer = serving.kv_transfer_config(nixl=True, lmcache=args.kv_tier_config_map is not None)
        # The pipeline spans every NPU the pod claims.
        env = {**serving.engine_env(args.engine), "RBLN_DEVICES": ",".join(str(i) for i in range(resolved.devices)),
               **role.extra_env}
        container = pod.engine_container(
            name="vllm",
            image=args.engine.image,
            args=serving.serve_args(args.model, args.engine, role, kv_transfer=kv_transfer, role_args=dp_args,
                                    revision=args.weights.revision, draft_revision=args.weights.draft_revision),
            env=env,
            hf_token_secret=args.hf_token_secret,
            env_from_config_map=args.kv_tier_config_map,
            ports=[("http", role.port), ("nixl", resolved.side_channel_ports[0])],
            rank_ports=resolved.rank_ports,
            resources=role.resources,
            startup_failure_threshold=args.engine.startup_failure_threshold,
            security=args.security,
        )
        deployments = pod.engine_pool(self, name, role_name="prefill", args=args, role=role, devices=resolved.devices,
                                           containers=[container], rds_nodes=args.rds_nodes, opts=opts)
        self.deployments = deployments
        self.devices_per_pod = resolved.devices
        self.register_outputs({
            "deploymentNames": [d.metadata.name for d in deployments],
            "replicas": role.replicas,
            "devicesPerPod": resolved.devices,
            "ports": resolved.rank_ports,
        })
