"""Router: the llm-d Endpoint Picker (EPP) and the InferencePool it serves.

Objects: ServiceAccount, a namespace-scoped Role (read pods and pools, nothing else) and its
RoleBinding, the EndpointPickerConfig ConfigMap, the EPP Deployment and Service, the InferencePool.
The plugin set, the P/D one or the AGG one, is worked out in core.routing.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pydantic import Field

from components import pod
from core import routing, sizing
from core.versions import router as router_versions

TYPE = "rebel100:serving:Router"
POOL_GROUP = "inference.networking.k8s.io"
POOL_API_VERSION = f"{POOL_GROUP}/v1"
CONFIG_FILE = "epp-config.yaml"
CONFIG_MOUNT = "/etc/epp"

core = k8s.core.v1
meta = k8s.meta.v1


class RouterArgs(pod.StackArgs):
    target_ports: list[int] = Field(description="Ports of the serving pods the pool targets (the decode sidecar in P/D).")
    image: str = Field(router_versions.EPP_IMAGE, min_length=1, description="EPP image.")
    replicas: int = Field(1, ge=1, description="EPP replicas.")
    epp_config: dict[str, Any] = Field(default_factory=lambda: routing.endpoint_picker_config(),
                                       description="The EndpointPickerConfig document (core.routing.endpoint_picker_config); default: the P/D one.")
    grpc_port: int = Field(9002, description="EPP ext-proc port (the pool's endpointPickerRef).")
    health_port: int = Field(9003, description="EPP gRPC health port (the probes').")
    metrics_port: int = Field(9090, description="EPP metrics port.")
    failure_mode: Literal["FailClose", "FailOpen"] = Field("FailClose", description="What the gateway does when the EPP is unreachable.")
    max_unavailable: int = Field(1, ge=1, description="PodDisruptionBudget maxUnavailable of the EPP.")


class Router(pulumi.ComponentResource):
    pool_name: str
    service_name: str
    labels: dict[str, str]

    def __init__(self, name: str, args: RouterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        if not args.target_ports:
            raise ValueError(f"Router {name}: the pool needs at least one target port.")
        if len(args.target_ports) > sizing.MAX_POOL_TARGET_PORTS:
            raise ValueError(f"Router {name}: {len(args.target_ports)} target ports; an InferencePool allows at most {sizing.MAX_POOL_TARGET_PORTS}.")
        super().__init__(TYPE, name, None, opts)
        child = pod.child_options(self, opts)
        base = f"{args.stack_name}-epp"
        ns = args.namespace
        labels = {pod.PART_OF_LABEL: args.stack_name, pod.NAME_LABEL: base, pod.COMPONENT_LABEL: "router"}
        self.pool_name = f"{args.stack_name}-pool"
        self.service_name = base
        self.labels = labels

        account = core.ServiceAccount(f"{base}-sa", metadata=pod.object_meta(base, ns, labels), opts=child)
        role = k8s.rbac.v1.Role(f"{base}-role", metadata=pod.object_meta(base, ns, labels), rules=[
            k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch"]),
            k8s.rbac.v1.PolicyRuleArgs(api_groups=[POOL_GROUP], resources=["inferencepools"], verbs=["get", "list", "watch"]),
            k8s.rbac.v1.PolicyRuleArgs(api_groups=["inference.networking.x-k8s.io"], resources=["inferenceobjectives"], verbs=["get", "list", "watch"]),
        ], opts=child)
        k8s.rbac.v1.RoleBinding(
            f"{base}-rolebinding", metadata=pod.object_meta(base, ns, labels),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=base),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=base, namespace=ns)],
            opts=pod.child_options(self, opts, account, role))
        config = core.ConfigMap(
            f"{base}-config", metadata=pod.object_meta(f"{base}-config", ns, labels),
            data={CONFIG_FILE: yaml.safe_dump(args.epp_config, sort_keys=False)},
            opts=child)
        deployment = k8s.apps.v1.Deployment(
            base, metadata=pod.object_meta(base, ns, labels),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=args.replicas,
                selector=meta.LabelSelectorArgs(match_labels=labels),
                template=core.PodTemplateSpecArgs(
                    metadata=meta.ObjectMetaArgs(labels=labels),
                    spec=core.PodSpecArgs(
                        service_account_name=base,
                        security_context=pod.pod_security_context(),
                        containers=[core.ContainerArgs(
                            name="epp",
                            image=args.image,
                            args=[
                                "--pool-name", self.pool_name,
                                "--pool-namespace", ns,
                                "--pool-group", POOL_GROUP,
                                "--config-file", f"{CONFIG_MOUNT}/{CONFIG_FILE}",
                                "--grpc-port", str(args.grpc_port),
                                "--grpc-health-port", str(args.health_port),
                                "--metrics-port", str(args.metrics_port),
                                "--zap-encoder", "json",
                            ],
                            ports=pod.container_ports([("grpc", args.grpc_port), ("grpc-health", args.health_port), ("metrics", args.metrics_port)]),
                            readiness_probe=core.ProbeArgs(grpc=core.GRPCActionArgs(port=args.health_port, service="inference-extension"), period_seconds=5),
                            liveness_probe=core.ProbeArgs(grpc=core.GRPCActionArgs(port=args.health_port, service="inference-extension"), period_seconds=10),
                            resources=core.ResourceRequirementsArgs(requests={"cpu": "2", "memory": "2Gi"}, limits={"cpu": "4", "memory": "4Gi"}),
                            volume_mounts=[core.VolumeMountArgs(name="config", mount_path=CONFIG_MOUNT, read_only=True)],
                            security_context=pod.restricted_security_context(),
                        )],
                        volumes=[core.VolumeArgs(name="config", config_map=core.ConfigMapVolumeSourceArgs(name=f"{base}-config"))],
                    ),
                ),
            ),
            opts=pod.child_options(self, opts, config))
        pod.disruption_budget(f"{base}-pdb", name=base, namespace=ns, labels=labels, selector=labels,
                              max_unavailable=args.max_unavailable, opts=child)
        service = core.Service(
            f"{base}-svc", metadata=pod.object_meta(base, ns, labels),
            spec=core.ServiceSpecArgs(type="ClusterIP", selector=labels, ports=[
                core.ServicePortArgs(name="grpc-ext-proc", port=args.grpc_port, target_port=args.grpc_port, protocol="TCP", app_protocol="http2"),
                core.ServicePortArgs(name="grpc-health", port=args.health_port, target_port=args.health_port, protocol="TCP"),
                core.ServicePortArgs(name="metrics", port=args.metrics_port, target_port=args.metrics_port, protocol="TCP"),
            ]),
            opts=child)
        pool = k8s.apiextensions.CustomResource(
            f"{args.stack_name}-pool", api_version=POOL_API_VERSION, kind="InferencePool",
            metadata=pod.object_meta(self.pool_name, ns, {pod.PART_OF_LABEL: args.stack_name}),
            spec={
                "selector": {"matchLabels": pod.pool_selector(args.stack_name)},
                "targetPorts": [{"number": port} for port in args.target_ports],
                "endpointPickerRef": {"name": base, "port": {"number": args.grpc_port}, "failureMode": args.failure_mode},
            },
            opts=pod.child_options(self, opts, service))
        self.register_outputs({
            "poolName": pool.metadata["name"],
            "serviceName": service.metadata.name,
            "deploymentName": deployment.metadata.name,
        })
