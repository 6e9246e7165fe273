"""Router's objects: the llm-d Endpoint Picker (EPP) and the InferencePool it serves.

Objects: ServiceAccount, a namespace-scoped Role (read pods and pools, nothing else) and its
RoleBinding, the EndpointPickerConfig ConfigMap, the EPP Deployment and Service, the InferencePool.
The plugin set, the P/D one or the AGG one, is worked out in core.routing.

The EPP checks a bearer token on /metrics (`--metrics-endpoint-auth`, on by default: a TokenReview of the token and
a SubjectAccessReview of `get /metrics` for its user), so its ServiceAccount may also create those two reviews,
cluster-wide as they are (a ClusterRole named after the namespace and the stack). Who may read the metrics is the
monitoring's (objects/monitoring.py).
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import Field

from core.formats import Image, Port
from core.labels import PART_OF_LABEL, inference_pool_name
from core.versions import image_version
from core.versions import router as router_versions
from objects import kube, pod
from objects.kube import Child, cluster_scoped_name, manifest, object_meta

POOL_GROUP = "inference.networking.k8s.io"
POOL_API_VERSION = f"{POOL_GROUP}/v1"
CONFIG_FILE = "epp-config.yaml"
CONFIG_MOUNT = "/etc/epp"
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
# What controller-runtime's metrics filter creates to check a scrape's token: it asks, the API server stores nothing.
REVIEW_RULES = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
]


class RouterArgs(pod.StackArgs):
    target_ports: list[Port] = Field(
        description="Ports of the serving pods the pool targets (the decode sidecar in P/D)."
    )
    image: Image = Field(description="EPP image.")
    replicas: int = Field(ge=1, description="EPP replicas.")
    epp_config: dict[str, Any] = Field(
        description="The EndpointPickerConfig document (core.routing.endpoint_picker_config)."
    )
    grpc_port: Port = Field(description="EPP ext-proc port (the pool's endpointPickerRef).")
    health_port: Port = Field(description="EPP gRPC health port (the probes').")
    metrics_port: Port = Field(description="EPP metrics port.")
    refresh_metrics_interval_ms: int = Field(
        ge=1, description="How often the EPP scrapes each endpoint's metrics (ms)."
    )
    failure_mode: Literal["FailClose", "FailOpen"] = Field(
        description="What the gateway does when the EPP is unreachable."
    )
    max_unavailable: int = Field(ge=1, description="PodDisruptionBudget maxUnavailable of the EPP.")


def pool_name(stack_name: str) -> str:
    return inference_pool_name(stack_name)


def epp_name(stack_name: str) -> str:
    """The EPP's ServiceAccount, Role, Deployment and Service."""
    return f"{stack_name}-epp"


def epp_labels(stack_name: str) -> dict[str, str]:
    return {PART_OF_LABEL: stack_name, pod.NAME_LABEL: epp_name(stack_name), pod.COMPONENT_LABEL: "router"}


def metrics_auth_name(namespace: str, stack_name: str) -> str:
    """The ClusterRole and ClusterRoleBinding that let the EPP check the tokens of metrics scrapes."""
    return cluster_scoped_name(namespace, stack_name, "epp-metrics-auth")


def router(name: str, args: RouterArgs) -> list[Child]:
    if not args.target_ports:
        raise ValueError(f"Router {name}: the pool needs at least one target port.")
    # More than the pool's 8 target ports is refused by the gate and the pack (core.rules.pool_target_ports_fit),
    # not here: the unchecked render shows the pack what a hand edit past the gate would deploy.
    base = epp_name(args.stack_name)
    ns = args.namespace
    labels = epp_labels(args.stack_name)
    meta = object_meta(base, ns, labels)
    read = ["get", "list", "watch"]
    auth = metrics_auth_name(ns, args.stack_name)
    grpc_health = {"port": args.health_port, "service": "inference-extension"}
    deployment = manifest(
        "apps/v1",
        "Deployment",
        meta,
        spec={
            "replicas": args.replicas,
            "selector": kube.match_labels(labels),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": base,
                    "securityContext": kube.pod_security_context(),
                    "containers": [
                        {
                            "name": "epp",
                            "image": args.image,
                            "env": router_versions.tracing_env(image_version(args.image)) or None,
                            "args": [
                                "--pool-name",
                                pool_name(args.stack_name),
                                "--pool-namespace",
                                ns,
                                "--pool-group",
                                POOL_GROUP,
                                "--config-file",
                                f"{CONFIG_MOUNT}/{CONFIG_FILE}",
                                "--grpc-port",
                                str(args.grpc_port),
                                "--grpc-health-port",
                                str(args.health_port),
                                "--metrics-port",
                                str(args.metrics_port),
                                f"--refresh-metrics-interval={args.refresh_metrics_interval_ms}ms",
                                "--zap-encoder",
                                "json",
                                # Tracing off, as upstream's chart renders it unless tracing is configured: on by
                                # default (--tracing, a bool: one token), the EPP exports spans with the `console`
                                # exporter unless OTEL_TRACES_EXPORTER says otherwise, pretty-printed into the JSON log
                                # above, for every request a tracing gateway samples (parent-based sampler) and 1 in 10
                                # of the others: about 1,500 lines a sampled request at v0.10.0 (tests/localsite). GIE
                                # v1.4.0 (the runner of llm-d-inference-scheduler v0.7.1) and llm-d-router v0.10.0
                                # pkg/epp/server/options.go, pkg/common/observability/tracing/telemetry.go; v0.10.0
                                # config/charts/routerlib.
                                "--tracing=false",
                            ],
                            "ports": kube.container_ports(
                                [
                                    ("grpc", args.grpc_port),
                                    ("grpc-health", args.health_port),
                                    ("metrics", args.metrics_port),
                                ]
                            ),
                            "readinessProbe": {"grpc": grpc_health, "periodSeconds": 5},
                            "livenessProbe": {"grpc": grpc_health, "periodSeconds": 10},
                            "resources": {
                                "requests": {"cpu": "2", "memory": "2Gi"},
                                "limits": {"cpu": "4", "memory": "4Gi"},
                            },
                            "volumeMounts": [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}],
                            "securityContext": kube.restricted_security_context(),
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": f"{base}-config"}}],
                },
            },
        },
    )
    return [
        Child(f"{base}-sa", manifest("v1", "ServiceAccount", meta)),
        Child(
            f"{base}-role",
            manifest(
                "rbac.authorization.k8s.io/v1",
                "Role",
                meta,
                rules=[
                    {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                    {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": read},
                    {
                        "apiGroups": ["inference.networking.x-k8s.io"],
                        "resources": ["inferenceobjectives"],
                        "verbs": read,
                    },
                ],
            ),
        ),
        Child(
            f"{base}-rolebinding",
            manifest(
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                meta,
                roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": base},
                subjects=[{"kind": "ServiceAccount", "name": base, "namespace": ns}],
            ),
            after=(f"{base}-sa", f"{base}-role"),
        ),
        Child(
            f"{base}-metrics-auth",
            manifest(RBAC_API_VERSION, "ClusterRole", object_meta(auth, None, labels), rules=REVIEW_RULES),
        ),
        Child(
            f"{base}-metrics-auth-binding",
            manifest(
                RBAC_API_VERSION,
                "ClusterRoleBinding",
                object_meta(auth, None, labels),
                roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": auth},
                subjects=[{"kind": "ServiceAccount", "name": base, "namespace": ns}],
            ),
            after=(f"{base}-sa", f"{base}-metrics-auth"),
        ),
        Child(
            f"{base}-config",
            manifest(
                "v1",
                "ConfigMap",
                object_meta(f"{base}-config", ns, labels),
                data={CONFIG_FILE: yaml.safe_dump(args.epp_config, sort_keys=False)},
            ),
        ),
        Child(base, deployment, after=(f"{base}-config",)),
        Child(
            f"{base}-pdb",
            kube.disruption_budget(
                name=base, namespace=ns, labels=labels, selector=labels, max_unavailable=args.max_unavailable
            ),
        ),
        Child(
            f"{base}-svc",
            manifest(
                "v1",
                "Service",
                meta,
                spec={
                    "type": "ClusterIP",
                    "selector": labels,
                    "ports": [
                        {
                            "name": "grpc-ext-proc",
                            "port": args.grpc_port,
                            "targetPort": args.grpc_port,
                            "protocol": "TCP",
                            "appProtocol": "http2",
                        },
                        {
                            "name": "grpc-health",
                            "port": args.health_port,
                            "targetPort": args.health_port,
                            "protocol": "TCP",
                        },
                        {
                            "name": "metrics",
                            "port": args.metrics_port,
                            "targetPort": args.metrics_port,
                            "protocol": "TCP",
                        },
                    ],
                },
            ),
        ),
        Child(
            f"{args.stack_name}-pool",
            manifest(
                POOL_API_VERSION,
                "InferencePool",
                object_meta(pool_name(args.stack_name), ns, {PART_OF_LABEL: args.stack_name}),
                spec={
                    "selector": kube.match_labels(pod.pool_selector(args.stack_name)),
                    "targetPorts": [{"number": port} for port in args.target_ports],
                    "endpointPickerRef": {
                        "name": base,
                        "port": {"number": args.grpc_port},
                        "failureMode": args.failure_mode,
                    },
                },
            ),
            after=(f"{base}-svc",),
        ),
    ]
