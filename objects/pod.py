"""Pod pieces shared by the engine roles: labels, DRA claim, volumes, probes, affinity, Deployment.

PrefillPool and DecodePool differ only in their containers and a few arguments; everything
else about an engine pod is built here, once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core import autoscaling, serving, sizing
from core import weights as weight_files
from core.formats import (
    AnnotationKey,
    Capability,
    Dns1123Subdomain,
    DraAttribute,
    EnvVarName,
    Image,
    LabelKey,
    LabelValue,
    NonNegativeQuantity,
    Port,
    PortName,
    PositiveQuantity,
)
from core.labels import (
    PART_OF_LABEL,
    ROLE_LABEL,
    required_node_labels,
)
from objects.component import COMPONENT_LABEL, NAME_LABEL, POOL_LABEL, pool_selector
from objects.manifests import (
    container_ports,
    manifest,
    match_labels,
    object_meta,
    pod_security_context,
    restricted_security_context,
)

CLAIM_NAME = "npu-rdma"  # the pod's name for its DRA claim
MODEL_MOUNT = serving.HF_HOME
COMPILE_CACHE_MOUNT = serving.COMPILE_CACHE_ROOT
ENGINE_COMMAND = ["vllm", "serve"]


def pod_labels(stack_name: str, role: str) -> dict[str, str]:
    """Labels of an engine pod; `llm-d.ai/role` is what the router's filters read."""
    return {
        **pool_selector(stack_name),
        NAME_LABEL: f"{stack_name}-{role}",
        COMPONENT_LABEL: role,
        ROLE_LABEL: role,
    }


def claim_template(*, name: str, namespace: str, labels: dict[str, str], claim: ClaimSpec) -> dict[str, Any]:
    """DRA ResourceClaimTemplate: all NPUs in one request, the RDMA NICs in another, one NUMA node."""
    requests = [
        {
            "name": "npu",
            "exactly": {"deviceClassName": claim.npu_device_class, "allocationMode": "ExactCount", "count": claim.npus},
        }
    ]
    devices: dict[str, Any] = {"requests": requests}
    if claim.rdma_nics > 0:
        requests.append(
            {
                "name": "rdma",
                "exactly": {
                    "deviceClassName": claim.nic_device_class,
                    "allocationMode": "ExactCount",
                    "count": claim.rdma_nics,
                },
            }
        )
        devices["constraints"] = [{"requests": ["npu", "rdma"], "matchAttribute": claim.numa_attribute}]
    return manifest(
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
        object_meta(name, namespace, labels),
        spec={"metadata": {"labels": labels}, "spec": {"devices": devices}},
    )


class EngineWeights(BaseModel):
    """What an engine pod needs to know about its weights: the volume, the revisions, what to wait for."""

    model_config = ConfigDict(frozen=True)

    claim_name: Dns1123Subdomain = Field(
        description="PVC holding the Hugging Face cache, mounted read-only as HF_HOME."
    )
    revision: str = Field(description="`--revision` of the served model (the one on the volume).")
    draft_revision: str = Field(description="Revision of the EAGLE-3 draft in `--speculative-config`.")
    wait_paths: list[str] = Field(
        description=(
            "Paths the init container waits for before the engine starts (a download's marker, or the pre-loaded "
            "snapshots)."
        ),
    )
    waiter_image: Image = Field(description="Image of the wait-for-weights init container (needs a POSIX shell).")


def wait_for_weights_container(weights: EngineWeights) -> dict[str, Any]:
    """Init container that holds the engine back until its weights are on the volume: the cluster enforces
    the order even for a render applied with kubectl, where no Pulumi dependency exists."""
    return {
        "name": "wait-for-weights",
        "image": weights.waiter_image,
        "command": ["sh", "-c", weight_files.WAIT_SHELL, "wait-for-weights", *weights.wait_paths],
        "volumeMounts": [{"name": "model", "mountPath": MODEL_MOUNT, "readOnly": True}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": restricted_security_context(),
    }


def engine_volumes(*, shm_size: str, model_pvc: str, compile_cache_pvc_name: str) -> list[dict[str, Any]]:
    return [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}},
        {"name": "model", "persistentVolumeClaim": {"claimName": model_pvc, "readOnly": True}},
        {"name": "compile-cache", "persistentVolumeClaim": {"claimName": compile_cache_pvc_name}},
    ]


ENGINE_VOLUME_MOUNTS = (
    {"name": "shm", "mountPath": "/dev/shm"},
    {"name": "model", "mountPath": MODEL_MOUNT, "readOnly": True},
    {"name": "compile-cache", "mountPath": COMPILE_CACHE_MOUNT},
)


def startup_probe(port: int, failure_threshold: int) -> dict[str, Any]:
    """Compilation on first start takes long: 15 s + 30 s x failure_threshold (the llm-d overlay's 240)."""
    return {
        "httpGet": {"path": "/health", "port": port},
        "initialDelaySeconds": sizing.STARTUP_INITIAL_DELAY_S,
        "periodSeconds": sizing.STARTUP_PERIOD_S,
        "timeoutSeconds": 5,
        "failureThreshold": failure_threshold,
    }


# How `up` knows an engine rollout is over. The provider's own Deployment check can read the status the
# controller wrote for the previous revision and return at once (seen on the local cluster, provider
# 4.25.0); these conditions wait for the controller to observe the new generation first.
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"


def rollout_complete(replicas: int) -> str:
    """Every pod is of the new template, and all of them are available (no old pod left)."""
    return json.dumps(
        [f"jsonpath={{.status.{field}}}={replicas}" for field in ("updatedReplicas", "availableReplicas", "replicas")]
    )


# An autoscaled Deployment's count moves, so no count can be waited for: the controller's own verdict that the
# new ReplicaSet is rolled out and available (kubectl's `rollout status` reads the same reason).
ROLLOUT_DONE_AUTOSCALED = json.dumps(
    ['jsonpath={.status.conditions[?(@.type=="Progressing")].reason}=NewReplicaSetAvailable']
)


def rollout_timeout(failure_threshold: int, rollout: RolloutSpec, pods: int) -> str:
    """How long `up` waits for the rollout of a Deployment of `pods` pods (at most, when autoscaled): each pod may
    stop for its grace period and compile for its startup budget, one pod after another in a rolling update."""
    turns = max(pods, 1) if rollout.strategy == "RollingUpdate" else 1
    stop = rollout.termination_grace_period_seconds
    return f"{sizing.rollout_timeout_seconds(failure_threshold, turns=turns, stop_seconds=stop)}s"


def liveness_probe(port: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": "/health", "port": port},
        "periodSeconds": 30,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }


def readiness_probe(ports: Sequence[int]) -> dict[str, Any]:
    """Ready when every DP rank answers /v1/models (one rank: a plain HTTP check)."""
    if len(ports) == 1:
        return {
            "httpGet": {"path": "/v1/models", "port": ports[0]},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        }
    check = (
        "import sys, urllib.request\n"
        "for port in sys.argv[1:]:\n"
        "    urllib.request.urlopen(f'http://127.0.0.1:{port}/v1/models', timeout=4)\n"
    )
    return {
        "exec": {"command": ["python3", "-c", check, *[str(p) for p in ports]]},
        "periodSeconds": 10,
        "timeoutSeconds": 10,
        "failureThreshold": 3,
    }


def engine_security_context(engine: EngineSpec) -> dict[str, Any]:
    """Engines: no escalation, ALL dropped; root and the added capabilities are the NPU runtime's exceptions."""
    return {
        "runAsNonRoot": not engine.run_as_root,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": False,
        "capabilities": {"drop": ["ALL"], "add": list(engine.capabilities) or None},
    }


def engine_security_exceptions(engine: EngineSpec) -> str:
    """The annotation that records, on the pod, why an engine is not fully restricted."""
    reasons = [
        "readOnlyRootFilesystem=false: vLLM and the RBLN compiler write caches and temp files outside the mounted "
        "volumes"
    ]
    if engine.run_as_root:
        reasons.insert(
            0, "runAsRoot: the RBLN runtime opens the NPU device nodes and NIXL registers RDMA memory as root"
        )
    if engine.capabilities:
        reasons.append(f"capabilities {','.join(engine.capabilities)}: pin RDMA buffers for NIXL")
    return "; ".join(reasons)


def engine_env(literal: dict[str, str], *, hf_token_secret: str, hf_token_required: bool) -> list[dict[str, Any]]:
    """Literal values, then the pod IP and the token by reference: one entry per name, by construction
    (the API server refuses a container with two entries of one name). The token's Secret is optional unless
    the repository is gated (core.weights.token_required)."""
    env: list[dict[str, Any]] = [
        {"name": key, "value": value} for key, value in literal.items() if key not in serving.REFERENCE_ENV
    ]
    env.append({"name": serving.POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    token = {"name": hf_token_secret, "key": "token", "optional": not hf_token_required}
    env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": token}})
    return env


def pre_stop_sleep(seconds: int) -> dict[str, Any] | None:
    """The engine keeps serving `seconds` after its pod is marked for deletion, before the kubelet sends SIGTERM
    (Kubernetes' own sleep action: no shell or `sleep` binary needed in the image); the EPP drops a terminating pod from
    its endpoints at once, so requests stop arriving first. 0: no preStop."""
    return {"preStop": {"sleep": {"seconds": seconds}}} if seconds > 0 else None


def engine_container(
    engine: EngineSpec,
    *,
    name: str,
    hf_token_secret: str,
    hf_token_required: bool,
    env_from_config_map: str | None = None,
) -> dict[str, Any]:
    """The `vllm serve` container; it consumes the pod's DRA claim."""
    amounts = {"cpu": engine.cpu, "memory": engine.memory}
    return {
        "name": name,
        "image": engine.image,
        "command": ENGINE_COMMAND,
        "args": list(engine.args),
        "env": engine_env(engine.env, hf_token_secret=hf_token_secret, hf_token_required=hf_token_required),
        "envFrom": [{"configMapRef": {"name": env_from_config_map}}] if env_from_config_map else None,
        "ports": container_ports(engine.ports),
        "resources": {"requests": amounts, "limits": amounts, "claims": [{"name": CLAIM_NAME}]},
        "volumeMounts": list(ENGINE_VOLUME_MOUNTS),
        "startupProbe": startup_probe(engine.rank_ports[0], engine.startup_failure_threshold),
        "readinessProbe": readiness_probe(engine.rank_ports),
        "livenessProbe": liveness_probe(engine.rank_ports[0]),
        "lifecycle": pre_stop_sleep(engine.pre_stop_seconds),
        "securityContext": engine_security_context(engine),
    }


def affinity(placement: PlacementSpec, *, group: str | None, role_selector: dict[str, str]) -> dict[str, Any]:
    """Engines only on nodes with the NPU product (and RDS, and their group); one pod of a role per node."""
    required = required_node_labels(
        placement.npu_product, rds=placement.rds_nodes, group_label=placement.group_label, group=group
    )
    expressions = [{"key": key, "operator": "In", "values": [value]} for key, value in required.items()]
    anti = None
    if placement.spread:
        anti = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": match_labels(role_selector), "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        },
        "podAntiAffinity": anti,
    }


def deployment_strategy(rollout: RolloutSpec) -> dict[str, Any]:
    """One pod at a time without surge (a new pod needs the NPUs the old one holds), or Recreate (the reference
    design's: every pod of the Deployment stopped at once)."""
    if rollout.strategy == "RollingUpdate":
        return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    return {"type": "Recreate"}


def engine_deployment(
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    replicas: int | None,
    containers: list[dict[str, Any]],
    init_containers: list[dict[str, Any]] | None,
    claim_template_name: str,
    volumes: list[dict[str, Any]],
    affinity: dict[str, Any],
    strategy: dict[str, Any],
    termination_grace_period_seconds: int,
    annotations: dict[str, str],
    service_account: str | None = None,
) -> dict[str, Any]:
    """An engine Deployment: the DRA claim, seccomp RuntimeDefault, no API token mounted for the pod (a container
    that needs one mounts `api_token_volume` itself). `replicas` None: the autoscaler owns the count, and the manifest
    leaves spec.replicas out, so that Pulumi's server-side apply never claims the field (docs/what-it-deploys.md)."""
    selector = {k: labels[k] for k in (PART_OF_LABEL, ROLE_LABEL, POOL_LABEL)}
    done = ROLLOUT_DONE_AUTOSCALED if replicas is None else rollout_complete(replicas)
    return manifest(
        "apps/v1",
        "Deployment",
        object_meta(name, namespace, labels, {WAIT_FOR_ANNOTATION: done}),
        spec={
            "replicas": replicas,
            "strategy": strategy,
            "selector": match_labels(selector),
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "serviceAccountName": service_account,
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": termination_grace_period_seconds,
                    "securityContext": pod_security_context(),
                    "affinity": affinity,
                    "resourceClaims": [{"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name}],
                    "initContainers": init_containers,
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    )


class Spec(BaseModel):
    """Base of the engine pools' args: immutable, unknown fields refused (a misspelt field is not silently a
    default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# No field below has a default: every value is worked out from the config (objects/stack.py), whose schema
# (core/config.py) holds each default once; tests build their args from the schema's defaults (tests/args.py).
class EngineSpec(Spec):
    """The `vllm serve` container of a role's pods, its values already worked out (core.serving)."""

    image: Image = Field(description="RBLN vLLM image of the engine.")
    args: list[str] = Field(description="Arguments of `vllm serve` (core.serving.prefill_command / decode_command).")
    env: dict[EnvVarName, str] = Field(
        description="Literal environment; the pod IP and HF_TOKEN are added by reference."
    )
    ports: list[tuple[PortName, Port]] = Field(
        min_length=1, description="Named container ports (HTTP ranks, DP RPC, NIXL side channels)."
    )
    rank_ports: list[Port] = Field(
        min_length=1, description="HTTP port of each DP rank: probed for startup, readiness and liveness."
    )
    cpu: NonNegativeQuantity = Field(description="CPU request and limit of the engine container.")
    memory: NonNegativeQuantity = Field(description="Memory request and limit of the engine container.")
    startup_failure_threshold: int = Field(
        ge=1, description="Startup probe periods allowed for compilation; also bounds how long `up` waits."
    )
    shm_size: NonNegativeQuantity = Field(description="Size of the /dev/shm memory volume.")
    run_as_root: bool = Field(
        description="Exception: the engine runs as root (recorded in the security-exceptions annotation)."
    )
    capabilities: list[Capability] = Field(
        description="Exception: capabilities added after dropping ALL (recorded in the annotation)."
    )
    annotations: dict[AnnotationKey, str] = Field(
        description="More annotations on the pod template (the config's pod annotations).",
    )
    pre_stop_seconds: int = Field(
        ge=0, description="The engine keeps serving this long after deletion before SIGTERM (preStop sleep); 0: none."
    )


class ClaimSpec(Spec):
    """The DRA claim of one pod: all its NPUs in one request, its RDMA NICs in another, one NUMA node."""

    npus: int = Field(ge=1, description="NPUs each pod claims (its devices per pod).")
    npu_device_class: Dns1123Subdomain = Field(description="DRA DeviceClass of the NPUs.")
    rdma_nics: int = Field(ge=0, description="RDMA NICs each pod claims; 0: no NIC request and no NUMA constraint.")
    nic_device_class: Dns1123Subdomain = Field(description="DRA DeviceClass of the RDMA NICs.")
    numa_attribute: DraAttribute = Field(description="Device attribute NPUs and NICs must share.")


class PlacementSpec(Spec):
    """Which nodes a role's pods may land on, and how they spread."""

    npu_product: LabelValue = Field(description="Required value of the node label rebellions.ai/npu.product.")
    rds_nodes: bool = Field(description="Also require rebellions.ai/rds.present=true (a prefill with the RDS tier).")
    groups: int = Field(ge=1, description="Node groups: one Deployment per group, the replicas split evenly.")
    group_label: LabelKey = Field(description="Node label naming a node's group (g0, g1, ...) when groups > 1.")
    spread: bool = Field(description="At most one pod of the role per node (required pod anti-affinity).")


class RolloutSpec(Spec):
    """How a role's Deployments change and how many pods a voluntary eviction may take."""

    strategy: Literal["Recreate", "RollingUpdate"] = Field(
        description="Deployment strategy; RollingUpdate is one pod at a time, no surge."
    )
    max_unavailable: int = Field(ge=1, description="PodDisruptionBudget maxUnavailable of each pool.")
    termination_grace_period_seconds: int = Field(
        ge=0, description="terminationGracePeriodSeconds of the pods: SIGKILL this long after deletion."
    )


class ScalingSpec(Spec):
    """A role scaled by KEDA (core.autoscaling): the role's bounds, the signal and where it is read."""

    min_replicas: int = Field(ge=0, description="Fewest pods of the role (over all node groups).")
    max_replicas: int = Field(ge=1, description="Most pods of the role (over all node groups).")
    metric: str = Field(description="The signal (core.autoscaling.SIGNALS).")
    series: str = Field(description="The Prometheus series the pinned images serve for it.")
    target: float = Field(gt=0, description="Value of the signal per pod the HPA aims at.")
    server_address: str = Field(description="Prometheus HTTP API.")
    scale_up_stabilization_seconds: int = Field(ge=0, description="HPA scale-up stabilisation window.")
    scale_down_stabilization_seconds: int = Field(ge=0, description="HPA scale-down stabilisation window.")
    polling_interval_seconds: int = Field(ge=1, description="KEDA's pollingInterval.")


def scaled_object(
    *, name: str, namespace: str, labels: dict[str, str], scaling: ScalingSpec, groups: int
) -> dict[str, Any]:
    """The KEDA ScaledObject of one Deployment (`name`): its share of the role's bounds, one prometheus trigger
    (metricType AverageValue: desired pods = ceil(query / threshold)), the HPA's stabilisation windows."""
    signal = autoscaling.SIGNALS[scaling.metric]
    query = autoscaling.query(signal, series=scaling.series, namespace=namespace, pool=name, groups=groups)
    low, high = autoscaling.per_pool(scaling.min_replicas, scaling.max_replicas, groups)
    return manifest(
        autoscaling.KEDA_API_VERSION,
        "ScaledObject",
        object_meta(name, namespace, labels),
        spec={
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "pollingInterval": scaling.polling_interval_seconds,
            "minReplicaCount": low,
            "maxReplicaCount": high,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleUp": {"stabilizationWindowSeconds": scaling.scale_up_stabilization_seconds},
                        "scaleDown": {"stabilizationWindowSeconds": scaling.scale_down_stabilization_seconds},
                    }
                }
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": scaling.server_address,
                        "query": query,
                        "threshold": f"{scaling.target:g}",
                    },
                }
            ],
        },
    )


class CompileCacheSpec(Spec):
    """The role's compile-cache volume (VLLM_CACHE_ROOT), shared by its replicas."""

    size: PositiveQuantity = Field(description="Requested size of the PVC.")
    storage_class: Dns1123Subdomain | None = Field(
        description="StorageClass (ReadWriteMany); None: the cluster default."
    )
    retain_on_delete: bool = Field(description="Keep the PVC in the cluster when the stack deletes it.")
