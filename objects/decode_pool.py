"""DecodePool's objects: the decode engines (DP4 + expert parallel), fronted by the llm-d routing sidecar.

In P/D the sidecar, a native sidecar, listens on 8000-8003, sends the prompt to the prefill
instance the router chose, and forwards to the ranks on 8200-8203; the ranks pull KV over NIXL.
In the AGG recipe the same engines serve whole requests and the pool targets the ranks directly.

A sidecar with SSRF protection (core.serving.sidecar_args: every pin that can run it) calls only prefill hosts that
are pods of the InferencePool, which it lists and watches through the API: the pool then also has a ServiceAccount for
the decode pods, a Role that may list and watch pods and InferencePools of the namespace (nothing else), and its
RoleBinding. Only the sidecar mounts the account's token (a projected volume); the pod mounts none, so the engine
container has no API credential.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.formats import Image, Port
from core.labels import PART_OF_LABEL
from core.versions import image_version
from core.versions import router as router_versions
from objects import component, engine_pool, manifests, pod
from objects.manifests import Child, manifest, object_meta
from objects.router import POOL_GROUP

API_TOKEN_VOLUME = "api-token"  # the sidecar's projected ServiceAccount token
# What the sidecar's allowlist does through the API (pkg/sidecar/proxy/allowlist.go of v0.7.1 and v0.10.0): list and
# watch the one InferencePool (a field selector on its name) and the pods its selector matches, in the pool's namespace.
ALLOWLIST_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": ["list", "watch"]},
]


class SidecarSpec(pod.Spec):
    """The llm-d routing sidecar of each decode pod, its values already worked out (core.serving)."""

    image: Image = Field(description="Routing sidecar image.")
    args: list[str] = Field(description="Arguments of the sidecar (core.serving.sidecar_args).")
    ports: list[Port] = Field(
        min_length=1, description="Ports it listens on, one per DP rank: what the InferencePool targets."
    )


class DecodePoolArgs(engine_pool.EnginePoolArgs):
    sidecar: SidecarSpec | None = Field(
        description="The routing sidecar (P/D); None for AGG, where the pool targets the ranks."
    )
    active_ports: list[Port] = Field(
        description=(
            "The InferencePool's target ports the pods serve on (the sidecar's in P/D), declared in the active-ports "
            "annotations."
        ),
    )


def reads_api(sidecar: SidecarSpec) -> bool:
    """The sidecar lists pods and the InferencePool through the API: its SSRF protection is on."""
    return router_versions.ssrf_protection_on(router_versions.sidecar_flags(sidecar.args))


def sidecar_container(sidecar: SidecarSpec) -> dict[str, Any]:
    """The routing sidecar as a native sidecar (an init container that keeps running), with the API token when it
    reads the API."""
    return {
        "name": "routing-proxy",
        "image": sidecar.image,
        "restartPolicy": "Always",
        "args": list(sidecar.args),
        "env": router_versions.tracing_env(image_version(sidecar.image)) or None,
        "ports": manifests.container_ports([(f"proxy-{i}", p) for i, p in enumerate(sidecar.ports)]),
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}},
        "readinessProbe": {"tcpSocket": {"port": sidecar.ports[0]}, "periodSeconds": 10},
        "securityContext": manifests.restricted_security_context(),
        "volumeMounts": [{"name": API_TOKEN_VOLUME, "mountPath": manifests.API_TOKEN_MOUNT, "readOnly": True}]
        if reads_api(sidecar)
        else None,
    }


def sidecar_account(stack_name: str) -> str:
    """The decode pods' ServiceAccount, its Role and RoleBinding (P/D)."""
    return f"{stack_name}-decode"


def sidecar_access(name: str, args: DecodePoolArgs) -> list[Child]:
    """The ServiceAccount the sidecar's allowlist reads the API as, its Role and RoleBinding."""
    account = sidecar_account(args.stack_name)
    labels = {PART_OF_LABEL: args.stack_name, component.NAME_LABEL: account, component.COMPONENT_LABEL: "decode"}
    meta = object_meta(account, args.namespace, labels)
    sa = Child(f"{name}-sa", manifest("v1", "ServiceAccount", meta, automountServiceAccountToken=False))
    return [
        sa,
        *manifests.role_and_binding(sa, meta, ALLOWLIST_RULES, role=f"{name}-role", binding=f"{name}-rolebinding"),
    ]


def target_ports(args: DecodePoolArgs) -> list[int]:
    """What the InferencePool targets: the sidecar in P/D, the ranks themselves in AGG."""
    return list(args.sidecar.ports if args.sidecar is not None else args.engine.rank_ports)


def decode_pool(name: str, args: DecodePoolArgs) -> list[Child]:
    container = pod.engine_container(
        args.engine, name="vllm", hf_token_secret=args.hf_token_secret, hf_token_required=args.hf_token_required
    )
    if args.sidecar is None or not reads_api(args.sidecar):
        init = [sidecar_container(args.sidecar)] if args.sidecar is not None else None
        return engine_pool.engine_pool(
            name, role_name="decode", args=args, containers=[container], init_containers=init
        )
    access = sidecar_access(name, args)
    # After the RoleBinding, which is after the account and the Role: one edge per Deployment, not three (with
    # one Deployment per node group, each edge is paid once per group).
    return access + engine_pool.engine_pool(
        name,
        role_name="decode",
        args=args,
        containers=[container],
        init_containers=[sidecar_container(args.sidecar)],
        service_account=sidecar_account(args.stack_name),
        volumes=[manifests.api_token_volume(API_TOKEN_VOLUME)],
        after=tuple(child.resource_name for child in access if child.kind == "RoleBinding"),
    )
