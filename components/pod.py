"""Pod pieces shared by the engine roles: labels, DRA claim, volumes, probes, affinity, Deployment.

PrefillPool and DecodePool differ only in their containers and a few arguments; everything
else about an engine pod is built here, once.
"""
from __future__ import annotations

from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

from stacks.config import Engine, Hardware, ModelSpec, Resources, Role, Storage

core = k8s.core.v1
meta = k8s.meta.v1

PART_OF_LABEL = "app.kubernetes.io/part-of"
COMPONENT_LABEL = "app.kubernetes.io/component"
NAME_LABEL = "app.kubernetes.io/name"
ROLE_LABEL = "llm-d.ai/role"
SERVING_LABEL = "llm-d.ai/inference-serving"

NPU_PRESENT_LABEL = "rebellions.ai/npu.present"
NPU_PRODUCT_LABEL = "rebellions.ai/npu.product"
RDS_PRESENT_LABEL = "rebellions.ai/rds.present"

CLAIM_NAME = "npu-rdma"  # the pod's name for its DRA claim
MODEL_MOUNT = "/models"
COMPILE_CACHE_MOUNT = "/workspace/.cache"
ENGINE_COMMAND = ["vllm", "serve"]


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


def object_meta(name: str, namespace: str, labels: dict[str, str], annotations: Optional[dict[str, str]] = None) -> meta.ObjectMetaArgs:
    return meta.ObjectMetaArgs(name=name, namespace=namespace, labels=labels, annotations=annotations)


def claim_template(
    resource_name: str,
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    hardware: Hardware,
    npus: int,
    opts: pulumi.ResourceOptions,
) -> k8s.resource.v1.ResourceClaimTemplate:
    """DRA ResourceClaimTemplate: all NPUs in one request, the RDMA NICs in another, one NUMA node."""
    dra = k8s.resource.v1
    requests = [
        dra.DeviceRequestArgs(name="npu", exactly=dra.ExactDeviceRequestArgs(
            device_class_name=hardware.npu_device_class, allocation_mode="ExactCount", count=npus)),
    ]
    constraints = None
    if hardware.rdma_nics_per_pod > 0:
        requests.append(dra.DeviceRequestArgs(name="rdma", exactly=dra.ExactDeviceRequestArgs(
            device_class_name=hardware.nic_device_class, allocation_mode="ExactCount", count=hardware.rdma_nics_per_pod)))
        constraints = [dra.DeviceConstraintArgs(requests=["npu", "rdma"], match_attribute=hardware.numa_attribute)]
    return dra.ResourceClaimTemplate(
        resource_name,
        metadata=object_meta(name, namespace, labels),
        spec=dra.ResourceClaimTemplateSpecArgs(
            metadata=meta.ObjectMetaArgs(labels=labels),
            spec=dra.ResourceClaimSpecArgs(devices=dra.DeviceClaimArgs(requests=requests, constraints=constraints)),
        ),
        opts=opts,
    )


def compile_cache_pvc(resource_name: str, *, name: str, namespace: str, labels: dict[str, str], storage: Storage, opts: pulumi.ResourceOptions) -> core.PersistentVolumeClaim:
    """Compile cache shared by the replicas of a role (VLLM_CACHE_ROOT): a restart skips compilation."""
    return core.PersistentVolumeClaim(
        resource_name,
        metadata=object_meta(name, namespace, labels),
        spec=core.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteMany"],
            storage_class_name=storage.storage_class,
            resources=core.VolumeResourceRequirementsArgs(requests={"storage": storage.compile_cache_size}),
        ),
        opts=opts,
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
        initial_delay_seconds=15, period_seconds=30, timeout_seconds=5, failure_threshold=failure_threshold,
    )


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


def container_ports(named: Sequence[tuple[str, int]]) -> list[core.ContainerPortArgs]:
    return [core.ContainerPortArgs(name=name, container_port=port, protocol="TCP") for name, port in named]


def engine_container(
    *,
    name: str,
    image: str,
    args: list[str],
    env: list[core.EnvVarArgs],
    ports: Sequence[tuple[str, int]],
    rank_ports: Sequence[int],
    resources: Resources,
    startup_failure_threshold: int,
) -> core.ContainerArgs:
    """The `vllm serve` container; it consumes the pod's DRA claim."""
    amounts = {"cpu": resources.cpu, "memory": resources.memory}
    return core.ContainerArgs(
        name=name,
        image=image,
        command=ENGINE_COMMAND,
        args=args,
        env=env,
        ports=container_ports(ports),
        resources=core.ResourceRequirementsArgs(requests=amounts, limits=amounts, claims=[core.ResourceClaimArgs(name=CLAIM_NAME)]),
        volume_mounts=ENGINE_VOLUME_MOUNTS,
        startup_probe=startup_probe(rank_ports[0], startup_failure_threshold),
        readiness_probe=readiness_probe(rank_ports),
        liveness_probe=liveness_probe(rank_ports[0]),
    )


def node_affinity(hardware: Hardware, *, rds: bool) -> core.AffinityArgs:
    """Engines only on nodes with the NPU product; RDS prefill only on nodes labelled for RDS."""
    expressions = [
        core.NodeSelectorRequirementArgs(key=NPU_PRESENT_LABEL, operator="In", values=["true"]),
        core.NodeSelectorRequirementArgs(key=NPU_PRODUCT_LABEL, operator="In", values=[hardware.npu_product]),
    ]
    if rds:
        expressions.append(core.NodeSelectorRequirementArgs(key=RDS_PRESENT_LABEL, operator="In", values=["true"]))
    return core.AffinityArgs(node_affinity=core.NodeAffinityArgs(
        required_during_scheduling_ignored_during_execution=core.NodeSelectorArgs(
            node_selector_terms=[core.NodeSelectorTermArgs(match_expressions=expressions)]),
    ))


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
    opts: pulumi.ResourceOptions,
) -> k8s.apps.v1.Deployment:
    """An engine Deployment: Recreate (a pod holds all NPUs of its slot), the DRA claim, no API token."""
    selector = {k: labels[k] for k in (PART_OF_LABEL, ROLE_LABEL)}
    return k8s.apps.v1.Deployment(
        resource_name,
        metadata=object_meta(name, namespace, labels),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            replicas=replicas,
            strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
            selector=meta.LabelSelectorArgs(match_labels=selector),
            template=core.PodTemplateSpecArgs(
                metadata=meta.ObjectMetaArgs(labels=labels),
                spec=core.PodSpecArgs(
                    automount_service_account_token=False,
                    termination_grace_period_seconds=120,
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


class EnginePoolArgs(BaseModel):
    """What every engine pool needs besides its role section."""

    model_config = ConfigDict(frozen=True)

    stack_name: str = Field(description="Prefix of object names and value of app.kubernetes.io/part-of.")
    namespace: str = Field(description="Namespace of the pool's objects.")
    model: ModelSpec = Field(ModelSpec(), description="Served model.")
    engine: Engine = Field(Engine(), description="Serving arguments common to both roles.")
    hardware: Hardware = Field(Hardware(), description="Hardware profile (device classes, NICs, node labels).")
    storage: Storage = Field(Storage(), description="Model and compile-cache volumes.")
    hf_token_secret: str = Field("hf-token", description="Secret with the Hugging Face token under key `token`.")


def check_role(kind: str, name: str, role: Role, devices: int, hardware: Hardware) -> None:
    """Guard clauses every engine pool applies before it creates anything."""
    if role.pipeline_parallel_size > 1 and role.data_parallel_size > 1:
        raise ValueError(f"{kind} {name}: pipeline-parallel-size {role.pipeline_parallel_size} with data-parallel-size "
                         f"{role.data_parallel_size} is refused by the vLLM entrypoint; use one or the other.")
    if devices > hardware.npus_per_node:
        raise ValueError(f"{kind} {name}: {devices} NPUs per pod do not fit a node of {hardware.npus_per_node} NPUs.")


def engine_pool(
    parent: pulumi.ComponentResource,
    *,
    role_name: str,
    args: EnginePoolArgs,
    role: Role,
    devices: int,
    containers: list[core.ContainerArgs],
    init_containers: Optional[list[core.ContainerArgs]] = None,
    rds_nodes: bool = False,
) -> tuple[k8s.apps.v1.Deployment, k8s.resource.v1.ResourceClaimTemplate, core.PersistentVolumeClaim]:
    """The objects of one engine role: DRA claim template, compile-cache PVC and the Deployment."""
    base = f"{args.stack_name}-{role_name}"
    labels = pod_labels(args.stack_name, role_name)
    child = pulumi.ResourceOptions(parent=parent)
    claim = claim_template(f"{base}-claim", name=f"{base}-{CLAIM_NAME}", namespace=args.namespace, labels=labels,
                           hardware=args.hardware, npus=devices, opts=child)
    cache = compile_cache_pvc(f"{base}-compile-cache", name=f"{base}-compile-cache", namespace=args.namespace,
                              labels=labels, storage=args.storage, opts=child)
    deployment = engine_deployment(
        base, name=base, namespace=args.namespace, labels=labels, replicas=role.replicas,
        containers=containers, init_containers=init_containers, claim_template_name=f"{base}-{CLAIM_NAME}",
        volumes=engine_volumes(shm_size=args.engine.shm_size, model_pvc=args.storage.model_pvc, compile_cache_pvc_name=f"{base}-compile-cache"),
        affinity=node_affinity(args.hardware, rds=rds_nodes), opts=child)
    return deployment, claim, cache
