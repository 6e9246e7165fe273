"""Pod pieces shared by the engine roles: labels, DRA claim, volumes, probes, affinity, Deployment.

PrefillPool and DecodePool differ only in their containers and a few arguments; everything
else about an engine pod is built here, once.
"""
from __future__ import annotations

import hashlib
import json
from typing import Literal, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

from core import serving, sizing
from core.labels import (NPU_PRESENT_LABEL, NPU_PRODUCT_LABEL, PART_OF_LABEL, RDS_PRESENT_LABEL, ROLE_LABEL,
                         compile_cache_pvc_name, pool_names)
from core.versions import engine as engine_versions
from core import weights as weight_files

core = k8s.core.v1
meta = k8s.meta.v1

COMPONENT_LABEL = "app.kubernetes.io/component"
NAME_LABEL = "app.kubernetes.io/name"
SERVING_LABEL = "llm-d.ai/inference-serving"

POOL_LABEL = "rebel100.ai/pool"  # one value per Deployment, so that groups of one role stay apart
SECURITY_EXCEPTIONS_ANNOTATION = "rebel100.ai/security-exceptions"
MODEL_REVISION_ANNOTATION = weight_files.REVISION_ANNOTATION  # a new revision rolls the engines
NON_ROOT_UID = 65532

CLAIM_NAME = "npu-rdma"  # the pod's name for its DRA claim
MODEL_MOUNT = serving.HF_HOME
COMPILE_CACHE_MOUNT = serving.COMPILE_CACHE_ROOT
ENGINE_COMMAND = ["vllm", "serve"]


def child_options(parent: pulumi.Resource, opts: Optional[pulumi.ResourceOptions], *depends_on: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options of a component's child: parented to it and waiting for what the component waits for.

    Pulumi does not hand a component's `depends_on` down to its children, so a component that must
    come after the namespace, or decode after prefill, forwards it here."""
    inherited = opts.depends_on if opts is not None and opts.depends_on is not None else []
    inherited = list(inherited) if isinstance(inherited, (list, tuple)) else [inherited]
    return pulumi.ResourceOptions(parent=parent, depends_on=(inherited + list(depends_on)) or None)


class StackArgs(BaseModel):
    """What every component of the stack is given: its name prefix and its namespace."""

    model_config = ConfigDict(frozen=True)

    stack_name: str = Field(description="Prefix of object names and value of app.kubernetes.io/part-of.")
    namespace: str = Field(description="Namespace of the component's objects.")


def pool_selector(stack_name: str) -> dict[str, str]:
    """Labels the InferencePool selects: every serving pod of this stack, whatever its role."""
    return {PART_OF_LABEL: stack_name, SERVING_LABEL: "true"}


def pod_labels(stack_name: str, role: str) -> dict[str, str]:
    """Labels of an engine pod; `llm-d.ai/role` is what the router's prefill/decode filters read."""
    return {
        **pool_selector(stack_name),
        NAME_LABEL: f"{stack_name}-{role}",
        COMPONENT_LABEL: role,
        ROLE_LABEL: role,
    }


# The stack owns its objects: a field someone changed with kubectl (another server-side-apply field
# manager, e.g. `kubectl scale`) is taken back by the next `up` instead of failing it with a conflict.
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"


def object_meta(name: str, namespace: str, labels: dict[str, str], annotations: Optional[dict[str, str]] = None) -> meta.ObjectMetaArgs:
    return meta.ObjectMetaArgs(name=name, namespace=namespace, labels=labels,
                               annotations={PATCH_FORCE_ANNOTATION: "true", **(annotations or {})})


def claim_template(
    resource_name: str,
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    claim: ClaimSpec,
    opts: pulumi.ResourceOptions,
) -> k8s.apiextensions.CustomResource:
    """DRA ResourceClaimTemplate: all NPUs in one request, the RDMA NICs in another, one NUMA node.

    Written as a generic object of type `kubernetes:resource.k8s.io/v1:ResourceClaimTemplate` (the
    token the typed class registers, so state and provider see the same thing): the Python SDK is
    pinned to the provider the toolchain builds, 4.25.0, whose SDK has no typed `resource.v1` yet
    (docs/toolchain.md)."""
    requests = [{"name": "npu", "exactly": {"deviceClassName": claim.npu_device_class,
                                            "allocationMode": "ExactCount", "count": claim.npus}}]
    devices: dict = {"requests": requests}
    if claim.rdma_nics > 0:
        requests.append({"name": "rdma", "exactly": {"deviceClassName": claim.nic_device_class,
                                                     "allocationMode": "ExactCount", "count": claim.rdma_nics}})
        devices["constraints"] = [{"requests": ["npu", "rdma"], "matchAttribute": claim.numa_attribute}]
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version="resource.k8s.io/v1",
        kind="ResourceClaimTemplate",
        metadata=object_meta(name, namespace, labels),
        spec={"metadata": {"labels": labels}, "spec": {"devices": devices}},
        opts=opts,
    )


def compile_cache_pvc(resource_name: str, *, name: str, namespace: str, labels: dict[str, str], cache: CompileCacheSpec, opts: pulumi.ResourceOptions) -> core.PersistentVolumeClaim:
    """Compile cache shared by the replicas of a role (VLLM_CACHE_ROOT): a restart skips compilation."""
    return core.PersistentVolumeClaim(
        resource_name,
        metadata=object_meta(name, namespace, labels),
        spec=core.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteMany"],
            storage_class_name=cache.storage_class,
            resources=core.VolumeResourceRequirementsArgs(requests={"storage": cache.size}),
        ),
        opts=opts,
    )


class EngineWeights(BaseModel):
    """What an engine pod needs to know about its weights: the volume, the revisions, what to wait for."""

    model_config = ConfigDict(frozen=True)

    claim_name: str = Field("model-weights", description="PVC holding the Hugging Face cache, mounted read-only as HF_HOME.")
    revision: str = Field("main", description="`--revision` of the served model (the one on the volume).")
    draft_revision: str = Field("main", description="Revision of the EAGLE-3 draft in `--speculative-config`.")
    wait_paths: list[str] = Field(default_factory=list, description="Paths the init container waits for before the engine starts (a download's marker, or the pre-loaded snapshots).")
    waiter_image: str = Field("python:3.12.11-slim", description="Image of the wait-for-weights init container (needs a POSIX shell).")


def wait_for_weights_container(weights: EngineWeights) -> core.ContainerArgs:
    """Init container that holds the engine back until its weights are on the volume: the cluster enforces
    the order even for a render applied with kubectl, where no Pulumi dependency exists."""
    return core.ContainerArgs(
        name="wait-for-weights",
        image=weights.waiter_image,
        command=["sh", "-c", weight_files.WAIT_SHELL, "wait-for-weights", *weights.wait_paths],
        volume_mounts=[core.VolumeMountArgs(name="model", mount_path=MODEL_MOUNT, read_only=True)],
        resources=core.ResourceRequirementsArgs(requests={"cpu": "10m", "memory": "16Mi"}, limits={"cpu": "100m", "memory": "64Mi"}),
        security_context=restricted_security_context(),
    )


def engine_volumes(*, shm_size: str, model_pvc: str, compile_cache_pvc_name: str) -> list[core.VolumeArgs]:
    return [
        core.VolumeArgs(name="shm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=shm_size)),
        core.VolumeArgs(name="model", persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(claim_name=model_pvc, read_only=True)),
        core.VolumeArgs(name="compile-cache", persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(claim_name=compile_cache_pvc_name)),
    ]


ENGINE_VOLUME_MOUNTS = [
    core.VolumeMountArgs(name="shm", mount_path="/dev/shm"),
    core.VolumeMountArgs(name="model", mount_path=MODEL_MOUNT, read_only=True),
    core.VolumeMountArgs(name="compile-cache", mount_path=COMPILE_CACHE_MOUNT),
]


def startup_probe(port: int, failure_threshold: int) -> core.ProbeArgs:
    """Compilation on first start takes long: 15 s + 30 s x failure_threshold (the llm-d overlay's 240)."""
    return core.ProbeArgs(
        http_get=core.HTTPGetActionArgs(path="/health", port=port),
        initial_delay_seconds=sizing.STARTUP_INITIAL_DELAY_S, period_seconds=sizing.STARTUP_PERIOD_S,
        timeout_seconds=5, failure_threshold=failure_threshold,
    )


# How `up` knows an engine rollout is over. The provider's own Deployment check can read the status the
# controller wrote for the previous revision and return at once (seen on the local cluster, provider
# 4.25.0); these conditions wait for the controller to observe the new generation first.
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"


def rollout_complete(replicas: int) -> str:
    """Every pod is of the new template, and all of them are available (no old pod left)."""
    return json.dumps([f"jsonpath={{.status.{field}}}={replicas}"
                       for field in ("updatedReplicas", "availableReplicas", "replicas")])


def data_volume_options(opts: pulumi.ResourceOptions, retain_on_delete: bool) -> pulumi.ResourceOptions:
    """Options of a volume whose data must survive the stack: kept in the cluster when `destroy` or a
    replacement deletes it from the stack (remove it on purpose with kubectl, see docs/deploying.md)."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=retain_on_delete))


def rollout_options(opts: pulumi.ResourceOptions, failure_threshold: int) -> pulumi.ResourceOptions:
    """An engine Deployment: `up` waits for its rollout as long as the engines may compile."""
    timeout = f"{sizing.rollout_timeout_seconds(failure_threshold)}s"
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
        custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)))


def liveness_probe(port: int) -> core.ProbeArgs:
    return core.ProbeArgs(http_get=core.HTTPGetActionArgs(path="/health", port=port), period_seconds=30, timeout_seconds=5, failure_threshold=3)


def readiness_probe(ports: Sequence[int]) -> core.ProbeArgs:
    """Ready when every DP rank answers /v1/models (one rank: a plain HTTP check)."""
    if len(ports) == 1:
        return core.ProbeArgs(http_get=core.HTTPGetActionArgs(path="/v1/models", port=ports[0]), period_seconds=10, timeout_seconds=5, failure_threshold=3)
    check = (
        "import sys, urllib.request\n"
        "for port in sys.argv[1:]:\n"
        "    urllib.request.urlopen(f'http://127.0.0.1:{port}/v1/models', timeout=4)\n"
    )
    return core.ProbeArgs(
        exec_=core.ExecActionArgs(command=["python3", "-c", check, *[str(p) for p in ports]]),
        period_seconds=10, timeout_seconds=10, failure_threshold=3,
    )


def restricted_security_context() -> core.SecurityContextArgs:
    """Containers that need nothing special (EPP, routing sidecar): the `restricted` profile."""
    return core.SecurityContextArgs(
        run_as_non_root=True, run_as_user=NON_ROOT_UID, allow_privilege_escalation=False,
        read_only_root_filesystem=True, capabilities=core.CapabilitiesArgs(drop=["ALL"]),
    )


def engine_security_context(engine: EngineSpec) -> core.SecurityContextArgs:
    """Engines: no escalation, ALL dropped; root and the added capabilities are the NPU runtime's exceptions."""
    return core.SecurityContextArgs(
        run_as_non_root=not engine.run_as_root,
        allow_privilege_escalation=False,
        read_only_root_filesystem=False,
        capabilities=core.CapabilitiesArgs(drop=["ALL"], add=list(engine.capabilities) or None),
    )


def engine_security_exceptions(engine: EngineSpec) -> str:
    """The annotation that records, on the pod, why an engine is not fully restricted."""
    reasons = ["readOnlyRootFilesystem=false: vLLM and the RBLN compiler write caches and temp files outside the mounted volumes"]
    if engine.run_as_root:
        reasons.insert(0, "runAsRoot: the RBLN runtime opens the NPU device nodes and NIXL registers RDMA memory as root")
    if engine.capabilities:
        reasons.append(f"capabilities {','.join(engine.capabilities)}: pin RDMA buffers for NIXL")
    return "; ".join(reasons)


def pod_security_context() -> core.PodSecurityContextArgs:
    return core.PodSecurityContextArgs(seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"))


def container_ports(named: Sequence[tuple[str, int]]) -> list[core.ContainerPortArgs]:
    return [core.ContainerPortArgs(name=name, container_port=port, protocol="TCP") for name, port in named]


def engine_env(literal: dict[str, str], *, hf_token_secret: str) -> list[core.EnvVarArgs]:
    """Literal values, then the pod IP and the token by reference: one entry per name, by construction
    (the API server refuses a container with two entries of one name)."""
    env = [core.EnvVarArgs(name=key, value=value) for key, value in literal.items() if key not in serving.REFERENCE_ENV]
    env.append(core.EnvVarArgs(
        name="VLLM_NIXL_SIDE_CHANNEL_HOST",
        value_from=core.EnvVarSourceArgs(field_ref=core.ObjectFieldSelectorArgs(field_path="status.podIP")),
    ))
    env.append(core.EnvVarArgs(
        name="HF_TOKEN",
        value_from=core.EnvVarSourceArgs(secret_key_ref=core.SecretKeySelectorArgs(name=hf_token_secret, key="token")),
    ))
    return env


def engine_container(engine: EngineSpec, *, name: str, hf_token_secret: str,
                     env_from_config_map: Optional[str] = None) -> core.ContainerArgs:
    """The `vllm serve` container; it consumes the pod's DRA claim."""
    amounts = {"cpu": engine.cpu, "memory": engine.memory}
    return core.ContainerArgs(
        name=name,
        image=engine.image,
        command=ENGINE_COMMAND,
        args=list(engine.args),
        env=engine_env(engine.env, hf_token_secret=hf_token_secret),
        env_from=[core.EnvFromSourceArgs(config_map_ref=core.ConfigMapEnvSourceArgs(name=env_from_config_map))] if env_from_config_map else None,
        ports=container_ports(engine.ports),
        resources=core.ResourceRequirementsArgs(requests=amounts, limits=amounts, claims=[core.ResourceClaimArgs(name=CLAIM_NAME)]),
        volume_mounts=ENGINE_VOLUME_MOUNTS,
        startup_probe=startup_probe(engine.rank_ports[0], engine.startup_failure_threshold),
        readiness_probe=readiness_probe(engine.rank_ports),
        liveness_probe=liveness_probe(engine.rank_ports[0]),
        security_context=engine_security_context(engine),
    )


def affinity(placement: PlacementSpec, *, group: Optional[str], role_selector: dict[str, str]) -> core.AffinityArgs:
    """Engines only on nodes with the NPU product (and RDS, and their group); one pod of a role per node."""
    expressions = [
        core.NodeSelectorRequirementArgs(key=NPU_PRESENT_LABEL, operator="In", values=["true"]),
        core.NodeSelectorRequirementArgs(key=NPU_PRODUCT_LABEL, operator="In", values=[placement.npu_product]),
    ]
    if placement.rds_nodes:
        expressions.append(core.NodeSelectorRequirementArgs(key=RDS_PRESENT_LABEL, operator="In", values=["true"]))
    if group is not None:
        expressions.append(core.NodeSelectorRequirementArgs(key=placement.group_label, operator="In", values=[group]))
    anti = None
    if placement.spread:
        anti = core.PodAntiAffinityArgs(required_during_scheduling_ignored_during_execution=[core.PodAffinityTermArgs(
            label_selector=meta.LabelSelectorArgs(match_labels=role_selector), topology_key="kubernetes.io/hostname")])
    return core.AffinityArgs(
        node_affinity=core.NodeAffinityArgs(required_during_scheduling_ignored_during_execution=core.NodeSelectorArgs(
            node_selector_terms=[core.NodeSelectorTermArgs(match_expressions=expressions)])),
        pod_anti_affinity=anti,
    )


def deployment_strategy(rollout: RolloutSpec) -> k8s.apps.v1.DeploymentStrategyArgs:
    """Recreate (the reference), or one pod at a time without surge: a new pod needs the NPUs the old one holds."""
    if rollout.strategy == "RollingUpdate":
        return k8s.apps.v1.DeploymentStrategyArgs(type="RollingUpdate", rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(max_surge=0, max_unavailable=1))
    return k8s.apps.v1.DeploymentStrategyArgs(type="Recreate")


def disruption_budget(resource_name: str, *, name: str, namespace: str, labels: dict[str, str], selector: dict[str, str],
                      max_unavailable: int, opts: pulumi.ResourceOptions) -> k8s.policy.v1.PodDisruptionBudget:
    """Voluntary evictions (drains, upgrades) take at most max_unavailable pods of a pool at a time."""
    return k8s.policy.v1.PodDisruptionBudget(
        resource_name, metadata=object_meta(name, namespace, labels),
        spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(max_unavailable=max_unavailable, selector=meta.LabelSelectorArgs(match_labels=selector)),
        opts=opts)


def engine_deployment(
    resource_name: str,
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    replicas: int,
    containers: list[core.ContainerArgs],
    init_containers: Optional[list[core.ContainerArgs]],
    claim_template_name: str,
    volumes: list[core.VolumeArgs],
    affinity: core.AffinityArgs,
    strategy: k8s.apps.v1.DeploymentStrategyArgs,
    annotations: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.apps.v1.Deployment:
    """An engine Deployment: the DRA claim, seccomp RuntimeDefault, no API token."""
    selector = {k: labels[k] for k in (PART_OF_LABEL, ROLE_LABEL, POOL_LABEL)}
    return k8s.apps.v1.Deployment(
        resource_name,
        metadata=object_meta(name, namespace, labels, {WAIT_FOR_ANNOTATION: rollout_complete(replicas)}),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            replicas=replicas,
            strategy=strategy,
            selector=meta.LabelSelectorArgs(match_labels=selector),
            template=core.PodTemplateSpecArgs(
                metadata=meta.ObjectMetaArgs(labels=labels, annotations=annotations),
                spec=core.PodSpecArgs(
                    automount_service_account_token=False,
                    termination_grace_period_seconds=120,
                    security_context=pod_security_context(),
                    affinity=affinity,
                    resource_claims=[core.PodResourceClaimArgs(name=CLAIM_NAME, resource_claim_template_name=claim_template_name)],
                    init_containers=init_containers,
                    containers=containers,
                    volumes=volumes,
                ),
            ),
        ),
        opts=opts,
    )


class Spec(BaseModel):
    """Base of the engine pools' args: immutable, unknown fields refused (a misspelt field is not silently a default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# The defaults below are the Target Configuration's (tests/stacks/test_compose.py checks that
# `stacks.compose` fills them so from the default StackConfig): a pool built with no args is the reference one.
class EngineSpec(Spec):
    """The `vllm serve` container of a role's pods, its values already worked out (core.serving)."""

    image: str = Field(engine_versions.DEFAULT_IMAGE, min_length=1, description="RBLN vLLM image of the engine.")
    args: list[str] = Field(default_factory=list, description="Arguments of `vllm serve` (core.serving.prefill_command / decode_command).")
    env: dict[str, str] = Field(default_factory=dict, description="Literal environment; the pod IP and HF_TOKEN are added by reference.")
    ports: list[tuple[str, int]] = Field([("http", 8000)], min_length=1, description="Named container ports (HTTP ranks, DP RPC, NIXL side channels).")
    rank_ports: list[int] = Field([8000], min_length=1, description="HTTP port of each DP rank: probed for startup, readiness and liveness.")
    cpu: str = Field("32", description="CPU request and limit of the engine container.")
    memory: str = Field("256Gi", description="Memory request and limit of the engine container.")
    startup_failure_threshold: int = Field(240, ge=1, description="Startup probe periods allowed for compilation; also bounds how long `up` waits.")
    shm_size: str = Field("32Gi", description="Size of the /dev/shm memory volume.")
    run_as_root: bool = Field(True, description="Exception: the engine runs as root (recorded in the security-exceptions annotation).")
    capabilities: list[str] = Field(["IPC_LOCK"], description="Exception: capabilities added after dropping ALL (recorded in the annotation).")
    annotations: dict[str, str] = Field(default_factory=dict, description="More annotations on the pod template (pod annotations, the lmcache-rbln version).")


class ClaimSpec(Spec):
    """The DRA claim of one pod: all its NPUs in one request, its RDMA NICs in another, one NUMA node."""

    npus: int = Field(4, ge=1, description="NPUs each pod claims (its devices per pod).")
    npu_device_class: str = Field("npu.rebellions.ai", min_length=1, description="DRA DeviceClass of the NPUs.")
    rdma_nics: int = Field(2, ge=0, description="RDMA NICs each pod claims; 0: no NIC request and no NUMA constraint.")
    nic_device_class: str = Field("dranet", min_length=1, description="DRA DeviceClass of the RDMA NICs.")
    numa_attribute: str = Field("resource.kubernetes.io/numaNode", min_length=1, description="Device attribute NPUs and NICs must share.")


class PlacementSpec(Spec):
    """Which nodes a role's pods may land on, and how they spread."""

    npu_product: str = Field("RBLN-CR13", min_length=1, description="Required value of the node label rebellions.ai/npu.product.")
    rds_nodes: bool = Field(False, description="Also require rebellions.ai/rds.present=true (a prefill with the RDS tier).")
    groups: int = Field(1, ge=1, description="Node groups: one Deployment per group, the replicas split evenly.")
    group_label: str = Field("rebel100.ai/pool-group", min_length=1, description="Node label naming a node's group (g0, g1, ...) when groups > 1.")
    spread: bool = Field(True, description="At most one pod of the role per node (required pod anti-affinity).")


class RolloutSpec(Spec):
    """How a role's Deployments change and how many pods a voluntary eviction may take."""

    strategy: Literal["Recreate", "RollingUpdate"] = Field("Recreate", description="Deployment strategy; RollingUpdate is one pod at a time, no surge.")
    max_unavailable: int = Field(1, ge=1, description="PodDisruptionBudget maxUnavailable of each pool.")


class CompileCacheSpec(Spec):
    """The role's compile-cache volume (VLLM_CACHE_ROOT), shared by its replicas."""

    size: str = Field("200Gi", description="Requested size of the PVC.")
    storage_class: Optional[str] = Field(None, description="StorageClass (ReadWriteMany); None: the cluster default.")
    retain_on_delete: bool = Field(True, description="Keep the PVC in the cluster when the stack deletes it.")


class EnginePoolArgs(StackArgs):
    """What every engine pool needs besides its role's own args."""

    replicas: int = Field(4, ge=0, description="Pods of the role, split evenly over the node groups.")
    engine: EngineSpec = Field(EngineSpec(), description="The `vllm serve` container.")
    claim: ClaimSpec = Field(ClaimSpec(), description="The DRA claim of each pod.")
    placement: PlacementSpec = Field(PlacementSpec(), description="Node labels required, node groups and spread.")
    rollout: RolloutSpec = Field(RolloutSpec(), description="Deployment strategy and disruption budget.")
    compile_cache: CompileCacheSpec = Field(CompileCacheSpec(), description="The compile-cache volume.")
    weights: EngineWeights = Field(EngineWeights(), description="The weights volume, revisions and the wait before the engine starts.")
    hf_token_secret: str = Field("hf-token", description="Secret with the Hugging Face token under key `token`.")


def claim_digest(claim: ClaimSpec) -> str:
    """A short digest of what the claim template asks for: part of its name."""
    wanted = [claim.npus, claim.npu_device_class, claim.rdma_nics, claim.nic_device_class, claim.numa_attribute]
    return hashlib.sha256(json.dumps(wanted).encode()).hexdigest()[:8]


def engine_pool(
    parent: pulumi.ComponentResource,
    name: str,
    *,
    role_name: str,
    args: EnginePoolArgs,
    containers: list[core.ContainerArgs],
    init_containers: Optional[list[core.ContainerArgs]] = None,
    opts: Optional[pulumi.ResourceOptions] = None,
) -> list[k8s.apps.v1.Deployment]:
    """The objects of one engine role: DRA claim template, compile-cache PVC, then per node group a
    Deployment and its PodDisruptionBudget (one group: one Deployment named after the role)."""
    base = f"{args.stack_name}-{role_name}"
    role_labels = pod_labels(args.stack_name, role_name)
    child = child_options(parent, opts)
    # A claim template's spec is immutable. Its name carries a digest of what it asks for, so a change is
    # a new template (created, the pods rolled onto it, then the old one deleted), never a refused patch.
    claim_template_name = f"{base}-{CLAIM_NAME}-{claim_digest(args.claim)}"
    claim_template(f"{name}-claim", name=claim_template_name, namespace=args.namespace, labels=role_labels,
                   claim=args.claim, opts=child)
    compile_cache_pvc(f"{name}-compile-cache", name=compile_cache_pvc_name(args.stack_name, role_name), namespace=args.namespace,
                      labels=role_labels, cache=args.compile_cache,
                      opts=data_volume_options(child, args.compile_cache.retain_on_delete))
    pools = pool_names(args.stack_name, role_name, args.placement.groups)
    annotations = {**args.engine.annotations,
                   SECURITY_EXCEPTIONS_ANNOTATION: engine_security_exceptions(args.engine),
                   MODEL_REVISION_ANNOTATION: args.weights.revision}
    deployments = []
    for group, pool in pools:
        resource = name if group is None else f"{name}-{group}"
        labels = {**role_labels, POOL_LABEL: pool}
        deployments.append(engine_deployment(
            resource, name=pool, namespace=args.namespace, labels=labels, replicas=args.replicas // len(pools),
            containers=containers, init_containers=[wait_for_weights_container(args.weights), *(init_containers or [])],
            claim_template_name=claim_template_name,
            volumes=engine_volumes(shm_size=args.engine.shm_size, model_pvc=args.weights.claim_name, compile_cache_pvc_name=f"{base}-compile-cache"),
            affinity=affinity(args.placement, group=group,
                              role_selector={PART_OF_LABEL: args.stack_name, ROLE_LABEL: role_name}),
            strategy=deployment_strategy(args.rollout), annotations=annotations,
            opts=rollout_options(child, args.engine.startup_failure_threshold)))
        disruption_budget(f"{resource}-pdb", name=pool, namespace=args.namespace, labels=labels,
                          selector={k: labels[k] for k in (PART_OF_LABEL, ROLE_LABEL, POOL_LABEL)},
                          max_unavailable=args.rollout.max_unavailable, opts=child)
    return deployments
