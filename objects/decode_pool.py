"""DecodePool's objects: the decode engines (DP4 + expert parallel), fronted by the llm-d routing sidecar.

In P/D the sidecar, a native sidecar, listens on 8000-8003, sends the prompt to the prefill
instance the router chose, and forwards to the ranks on 8200-8203; the ranks pull KV over NIXL.
In the AGG recipe the same engines serve whole requests and the pool targets the ranks directly.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from core.versions import router as router_versions
from objects import pod
from objects.kube import Child


class SidecarSpec(pod.Spec):
    """The llm-d routing sidecar of each decode pod, its values already worked out (core.serving)."""

    image: str = Field(router_versions.SIDECAR_IMAGE, min_length=1, description="Routing sidecar image.")
    args: list[str] = Field(["--port", "8000", "--vllm-port", "8200", "--data-parallel-size", "4",
                             "--kv-connector", "nixlv2", "--secure-proxy=false"],
                            description="Arguments of the sidecar (core.serving.sidecar_args).")
    ports: list[int] = Field([8000, 8001, 8002, 8003], min_length=1, description="Ports it listens on, one per DP rank: what the InferencePool targets.")


class DecodePoolArgs(pod.EnginePoolArgs):
    sidecar: Optional[SidecarSpec] = Field(SidecarSpec(), description="The routing sidecar (P/D); None for AGG, where the pool targets the ranks.")
    active_ports: list[int] = Field([8000, 8001, 8002, 8003], description="The InferencePool's target ports the pods "
                                    "serve on (the sidecar's in P/D), declared in the active-ports annotations.")


def sidecar_container(sidecar: SidecarSpec) -> dict:
    """The routing sidecar as a native sidecar (an init container that keeps running)."""
    return {
        "name": "routing-proxy",
        "image": sidecar.image,
        "restartPolicy": "Always",
        "args": list(sidecar.args),
        "ports": pod.container_ports([(f"proxy-{i}", p) for i, p in enumerate(sidecar.ports)]),
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}},
        "readinessProbe": {"tcpSocket": {"port": sidecar.ports[0]}, "periodSeconds": 10},
        "securityContext": pod.restricted_security_context(),
    }


def target_ports(args: DecodePoolArgs) -> list[int]:
    """What the InferencePool targets: the sidecar in P/D, the ranks themselves in AGG."""
    return list(args.sidecar.ports if args.sidecar is not None else args.engine.rank_ports)


def decode_pool(name: str, args: DecodePoolArgs) -> list[Child]:
    container = pod.engine_container(args.engine, name="vllm", hf_token_secret=args.hf_token_secret)
    init = [sidecar_container(args.sidecar)] if args.sidecar is not None else None
    return pod.engine_pool(name, role_name="decode", args=args, containers=[container], init_containers=init)
