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
from pydantic import BaseModel, ConfigDict, Field, field_validator

from core import sizing
from core.formats import Image, Port
from core.labels import PART_OF_LABEL, epp_name, inference_pool_name
from core.versions import image_version
from core.versions import router as router_versions
from objects import component, manifests
from objects.manifests import Child, cluster_scoped_name, manifest, object_meta
from objects.pod import MODEL_MOUNT, EngineWeights, wait_for_weights_container

POOL_GROUP = "inference.networking.k8s.io"
POOL_API_VERSION = f"{POOL_GROUP}/v1"
CONFIG_FILE = "epp-config.yaml"
CONFIG_MOUNT = "/etc/epp"
CERT_MOUNT = "/etc/epp-tls"  # `--cert-path`: the EPP reads tls.crt and tls.key there
CERT_KEYS = ("tls.crt", "tls.key")  # a kubernetes.io/tls Secret's, and the file names the EPP reads
# The EPP's startup: its ext_proc port probed every 2 s, for up to 2 minutes (its certificate and its pool's sync).
EPP_STARTUP_PERIOD_S = 2
EPP_STARTUP_FAILURES = 60
# What controller-runtime's metrics filter creates to check a scrape's token: it asks, the API server stores nothing.
REVIEW_RULES = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
]


class Tokenizer(BaseModel):
    """The EPP pod's tokenizer container (router.prefixCache precise): what the token-producer calls."""

    model_config = ConfigDict(frozen=True)

    image: Image = Field(description="vLLM CPU image of the release the engines build on.")
    command: list[str] = Field(description="`vllm launch render`.")
    args: list[str] = Field(description="The served model, its revision, max-model-len and the port.")
    env: dict[str, str] = Field(description="Literal environment (offline, from the weights volume).")
    port: Port = Field(description="Where it serves /v1/completions/render inside the pod.")
    weights: EngineWeights = Field(description="The weights volume it reads the tokenizer from, as the engines do.")


class RouterArgs(component.StackArgs):
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
    drain_seconds: int | None = Field(
        ge=0,
        description=(
            "`--drain-timeout` of the EPP in s, its pod's grace period derived from it (core.sizing); None: the "
            "pinned EPP has no such flag."
        ),
    )
    experimental_flag: str | None = Field(
        description=(
            "The EPP's flag that lets it load the Alpha plugins its config declares (core.routing."
            "epp_experimental_flag); None: it declares none."
        )
    )
    max_unavailable: int = Field(ge=1, description="PodDisruptionBudget maxUnavailable of the EPP.")
    tokenizer: Tokenizer | None = Field(
        description="The tokenizer container of a precise prefix-cache render; None: the EPP needs none."
    )
    certificate: dict[str, str] | None = Field(
        description=(
            "The EPP's serving certificate (a kubernetes.io/tls Secret's `data`: base64 tls.crt and tls.key), made "
            "once at the first `up` and kept (the Secret ignores later values); None: the EPP makes its own at "
            "every start."
        ),
    )

    @field_validator("certificate")
    @classmethod
    def _has_both_halves(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and sorted(value) != sorted(CERT_KEYS):
            raise ValueError(f"the certificate must hold exactly {' and '.join(CERT_KEYS)}, not {sorted(value)}")
        return value


def pool_name(stack_name: str) -> str:
    return inference_pool_name(stack_name)


def epp_labels(stack_name: str) -> dict[str, str]:
    return {PART_OF_LABEL: stack_name, component.NAME_LABEL: epp_name(stack_name), component.COMPONENT_LABEL: "router"}


def certificate_secret_name(stack_name: str) -> str:
    """The Secret holding the EPP's serving certificate (config `router.certificate: stack`)."""
    return f"{epp_name(stack_name)}-tls"


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
    # On SIGTERM an EPP with --drain-timeout goes NotServing and keeps serving ext_proc for the window; its grace
    # period outlasts the window, so the kubelet's SIGKILL never cuts it (core.sizing.epp_grace_seconds).
    drain = args.drain_seconds
    drain_args = [] if drain is None else [f"{router_versions.DRAIN_TIMEOUT_FLAG}={drain}s"]
    grace = None if drain is None else sizing.epp_grace_seconds(drain)
    # A mounted certificate: a restarted EPP listens at once instead of making a new RSA-4096 key first.
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": f"{base}-config"}}]
    mounts: list[dict[str, Any]] = [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}]
    cert_args: list[str] = []
    cert_children: list[Child] = []
    if args.certificate is not None:
        secret = certificate_secret_name(args.stack_name)
        volumes.append({"name": "tls", "secret": {"secretName": secret}})
        mounts.append({"name": "tls", "mountPath": CERT_MOUNT, "readOnly": True})
        cert_args.append(f"--cert-path={CERT_MOUNT}")
        tls = manifest("v1", "Secret", object_meta(secret, ns, labels), type="kubernetes.io/tls", data=args.certificate)
        cert_children.append(Child(secret, tls, keep_inputs=("data",)))
    experimental = [args.experimental_flag] if args.experimental_flag else []
    containers = [epp_container(args, mounts, [*drain_args, *cert_args, *experimental])]
    init_containers: list[dict[str, Any]] = []
    if args.tokenizer is not None:
        containers.append(tokenizer_container(args.tokenizer))
        init_containers.append(wait_for_weights_container(args.tokenizer.weights))
        volumes += [
            {
                "name": "model",
                "persistentVolumeClaim": {"claimName": args.tokenizer.weights.claim_name, "readOnly": True},
            },
            {"name": "tokenizer-tmp", "emptyDir": {}},
        ]
    deployment = manifest(
        "apps/v1",
        "Deployment",
        meta,
        spec={
            "replicas": args.replicas,
            # The new EPP is Ready before the old one is told to stop (and drains): the pool is never without one.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": manifests.match_labels(labels),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": base,
                    "terminationGracePeriodSeconds": grace,
                    "securityContext": manifests.pod_security_context(),
                    "initContainers": init_containers or None,
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    )
    sa = Child(f"{base}-sa", manifest("v1", "ServiceAccount", meta))
    return [
        sa,
        *manifests.role_and_binding(
            sa,
            meta,
            [
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": read},
                {
                    "apiGroups": ["inference.networking.x-k8s.io"],
                    "resources": ["inferenceobjectives"],
                    "verbs": read,
                },
            ],
            role=f"{base}-role",
            binding=f"{base}-rolebinding",
        ),
        *manifests.role_and_binding(
            sa,
            object_meta(auth, None, labels),
            REVIEW_RULES,
            role=f"{base}-metrics-auth",
            binding=f"{base}-metrics-auth-binding",
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
        *cert_children,
        Child(base, deployment, after=(f"{base}-config", *(c.resource_name for c in cert_children))),
        Child(
            f"{base}-pdb",
            manifests.disruption_budget(
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
                    "selector": manifests.match_labels(component.pool_selector(args.stack_name)),
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


def epp_container(args: RouterArgs, mounts: list[dict[str, Any]], extra_args: list[str]) -> dict[str, Any]:
    """The EPP itself; `extra_args`: its drain, certificate and experimental-plugin flags."""
    grpc_health = {"port": args.health_port, "service": "inference-extension"}
    return {
        "name": "epp",
        "image": args.image,
        "env": router_versions.tracing_env(image_version(args.image)) or None,
        "args": [
            "--pool-name",
            pool_name(args.stack_name),
            "--pool-namespace",
            args.namespace,
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
            *extra_args,
        ],
        "ports": manifests.container_ports(
            [
                ("grpc", args.grpc_port),
                ("grpc-health", args.health_port),
                ("metrics", args.metrics_port),
            ]
        ),
        # The health service says SERVING once the EPP has synced its pool, before the ext_proc
        # server listens (without a mounted certificate it makes a self-signed RSA-4096 one
        # first: 16 s seen on a busy 2-core site): Ready only once the ext_proc port takes
        # connections.
        "startupProbe": {
            "tcpSocket": {"port": args.grpc_port},
            "periodSeconds": EPP_STARTUP_PERIOD_S,
            "failureThreshold": EPP_STARTUP_FAILURES,
        },
        "readinessProbe": {"grpc": grpc_health, "periodSeconds": 5},
        "livenessProbe": {"grpc": grpc_health, "periodSeconds": 10},
        "resources": {
            "requests": {"cpu": "2", "memory": "2Gi"},
            "limits": {"cpu": "4", "memory": "4Gi"},
        },
        "volumeMounts": mounts,
        "securityContext": manifests.restricted_security_context(),
    }


def tokenizer_container(tokenizer: Tokenizer) -> dict[str, Any]:
    """`vllm launch render` beside the EPP: it listens once the tokenizer is loaded, so Ready means it can answer."""
    listening = {"tcpSocket": {"port": tokenizer.port}}
    return {
        "name": "tokenizer",
        "image": tokenizer.image,
        "command": tokenizer.command,
        "args": tokenizer.args,
        "env": [{"name": k, "value": v} for k, v in tokenizer.env.items()],
        "ports": manifests.container_ports([("tokenizer", tokenizer.port)]),
        "startupProbe": {**listening, "periodSeconds": 5, "failureThreshold": 60},
        "readinessProbe": {**listening, "periodSeconds": 5},
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        "volumeMounts": [
            {"name": "model", "mountPath": MODEL_MOUNT, "readOnly": True},
            {"name": "tokenizer-tmp", "mountPath": "/tmp"},
        ],
        "securityContext": manifests.restricted_security_context(),
    }
