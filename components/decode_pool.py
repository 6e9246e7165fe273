"""DecodePool: the decode engines (DP4 + expert parallel), fronted by the llm-d routing sidecar.

In P/D the sidecar, a native sidecar, listens on 8000-8003, sends the prompt to the prefill
instance the router chose, and forwards to the ranks on 8200-8203; the ranks pull KV over NIXL.
In the AGG recipe the same engines serve whole requests and the pool targets the ranks directly.
"""
from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components import pod
from core import serving
from core.config import Decode

TYPE = "rebel100:serving:DecodePool"


class DecodePoolArgs(pod.EnginePoolArgs):
    role: Decode = Field(Decode(), description="The decode section: replicas, DP/EP, sidecar.")
    disaggregated: bool = Field(True, description="P/D: add the routing sidecar and the NIXL connector; false for AGG.")


def sidecar_container(args: DecodePoolArgs) -> pod.core.ContainerArgs:
    """The routing sidecar as a native sidecar (an init container that keeps running)."""
    role = args.role
    ports = serving.sidecar_ports(role)
    return pod.core.ContainerArgs(
        name="routing-proxy",
        image=role.sidecar.image,
        restart_policy="Always",
        args=[
            "--port", str(role.sidecar.port),
            "--vllm-port", str(role.port),
            "--data-parallel-size", str(len(ports)),
            "--kv-connector", role.sidecar.kv_connector,
            "--secure-proxy=false",
        ],
        ports=pod.container_ports([(f"proxy-{i}", p) for i, p in enumerate(ports)]),
        resources=pod.core.ResourceRequirementsArgs(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "4", "memory": "4Gi"}),
        readiness_probe=pod.core.ProbeArgs(tcp_socket=pod.core.TCPSocketActionArgs(port=ports[0]), period_seconds=10),
        security_context=pod.restricted_security_context(),
    )


class DecodePool(pulumi.ComponentResource):
    deployments: list[k8s.apps.v1.Deployment]
    target_ports: list[int]
    devices_per_pod: int

    def __init__(self, name: str, args: DecodePoolArgs, opts: Optional[pulumi.ResourceOptions] = None):
        role = args.role
        resolved = serving.role_serving(args.engine, role)
        super().__init__(TYPE, name, None, opts)

        kv_transfer = serving.kv_transfer_config(nixl=args.disaggregated, lmcache=False)
        ports = [(f"http-{i}", p) for i, p in enumerate(resolved.rank_ports)]
        if role.data_parallel_size > 1:
            ports.append(("dp-rpc", role.data_parallel_rpc_port))
        ports += [(f"nixl-{i}", p) for i, p in enumerate(resolved.side_channel_ports)]
        container = pod.engine_container(
            name="vllm",
            image=args.engine.image,
            args=serving.serve_args(args.model, args.engine, role, kv_transfer=kv_transfer,
                                    role_args=serving.data_parallel_args(role, dp_local=resolved.data_parallel_local, rpc_port=role.data_parallel_rpc_port),
                                    revision=args.weights.revision, draft_revision=args.weights.draft_revision),
            env={**serving.engine_env(args.engine), **role.extra_env},
            hf_token_secret=args.hf_token_secret,
            ports=ports,
            rank_ports=resolved.rank_ports,
            resources=role.resources,
            startup_failure_threshold=args.engine.startup_failure_threshold,
            security=args.security,
        )
        init = [sidecar_container(args)] if args.disaggregated else None
        deployments = pod.engine_pool(self, name, role_name="decode", args=args, role=role, devices=resolved.devices,
                                           containers=[container], init_containers=init, opts=opts)
        self.deployments = deployments
        self.devices_per_pod = resolved.devices
        # What the InferencePool targets: the sidecar in P/D, the ranks themselves in AGG.
        self.target_ports = serving.sidecar_ports(role) if args.disaggregated else resolved.rank_ports
        self.register_outputs({
            "deploymentNames": [d.metadata.name for d in deployments],
            "replicas": role.replicas,
            "devicesPerPod": resolved.devices,
            "targetPorts": self.target_ports,
        })
