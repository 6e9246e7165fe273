"""Compose the components into the full stack described by one StackConfig.

A new environment is a new `Pulumi.<name>.yaml`; nothing here is per environment.
"""
from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components import pod
from components.decode_pool import DecodePool, DecodePoolArgs, SidecarSpec
from components.gateway import Gateway, GatewayArgs
from components.model_weights import ModelWeights, ModelWeightsArgs
from components.monitoring import MonitoredRole, Monitoring, MonitoringArgs
from components.network_isolation import NetworkIsolation, NetworkIsolationArgs
from components.prefill_pool import PrefillPool, PrefillPoolArgs
from components.rds_tier import RdsTier, RdsTierArgs
from components.router import Router, RouterArgs
from core.config import Role, StackConfig
from core import routing
from core import serving as engine_serving
from core import weights as weight_files
from core.derive import derive

core = k8s.core.v1


def provider(cfg: StackConfig) -> k8s.Provider:
    """Render mode writes YAML to a folder and needs no cluster; otherwise the kubeconfig context."""
    if cfg.render_directory:
        return k8s.Provider("k8s", render_yaml_to_directory=cfg.render_directory)
    return k8s.Provider("k8s", context=cfg.kube_context)


def engine_pool_args(cfg: StackConfig, role: Role, command: engine_serving.EngineCommand, weights: pod.EngineWeights,
                     *, rds_nodes: bool = False) -> dict:
    """The args both engine pools take, worked out from the config sections they draw on."""
    resolved = engine_serving.role_serving(cfg.engine, role)
    # No lmcache-rbln version annotation: the policy pack derives it from the image tag (core.versions.engine).
    annotations = dict(cfg.engine.pod_annotations)
    hardware, security = cfg.hardware, cfg.security
    return dict(
        stack_name=cfg.name, namespace=cfg.namespace, replicas=role.replicas, weights=weights, hf_token_secret=cfg.hf_token_secret,
        engine=pod.EngineSpec(
            image=cfg.engine.image, args=command.args, env=command.env, ports=command.ports, rank_ports=resolved.rank_ports,
            cpu=role.resources.cpu, memory=role.resources.memory, startup_failure_threshold=cfg.engine.startup_failure_threshold,
            shm_size=cfg.engine.shm_size, run_as_root=security.engine_run_as_root, capabilities=security.engine_capabilities,
            annotations=annotations),
        claim=pod.ClaimSpec(npus=resolved.devices, npu_device_class=hardware.npu_device_class, rdma_nics=hardware.rdma_nics_per_pod,
                            nic_device_class=hardware.nic_device_class, numa_attribute=hardware.numa_attribute),
        placement=pod.PlacementSpec(npu_product=hardware.npu_product, rds_nodes=rds_nodes, groups=cfg.placement.groups,
                                    group_label=cfg.placement.group_label, spread=cfg.placement.spread_roles),
        rollout=pod.RolloutSpec(strategy=cfg.rollout.strategy, max_unavailable=cfg.rollout.max_unavailable),
        compile_cache=pod.CompileCacheSpec(size=cfg.storage.compile_cache_size, storage_class=cfg.storage.storage_class,
                                           retain_on_delete=cfg.storage.retain_on_delete),
    )


def prefill_pool_args(cfg: StackConfig, weights: pod.EngineWeights, *, kv_tier_config_map: Optional[str] = None,
                      rds_nodes: bool = False) -> PrefillPoolArgs:
    command = engine_serving.prefill_command(cfg.model, cfg.engine, cfg.prefill, lmcache=kv_tier_config_map is not None,
                                             revision=weights.revision, draft_revision=weights.draft_revision)
    return PrefillPoolArgs(**engine_pool_args(cfg, cfg.prefill, command, weights, rds_nodes=rds_nodes),
                           kv_tier_config_map=kv_tier_config_map)


def decode_pool_args(cfg: StackConfig, weights: pod.EngineWeights) -> DecodePoolArgs:
    """P/D: the routing sidecar and the NIXL connector; AGG: neither."""
    pd = cfg.topology == "pd"
    role = cfg.decode
    command = engine_serving.decode_command(cfg.model, cfg.engine, role, nixl=pd,
                                            revision=weights.revision, draft_revision=weights.draft_revision)
    sidecar = SidecarSpec(image=role.sidecar.image, args=engine_serving.sidecar_args(role),
                          ports=engine_serving.sidecar_ports(role)) if pd else None
    return DecodePoolArgs(**engine_pool_args(cfg, role, command, weights), sidecar=sidecar)


def build(cfg: StackConfig, *, hf_token: Optional[pulumi.Output] = None) -> dict:
    """Register every resource of the stack and return the stack outputs."""
    facts = derive(cfg)
    k8s_provider = provider(cfg)
    opts = pulumi.ResourceOptions(provider=k8s_provider)
    ns = cfg.namespace
    labels = {pod.PART_OF_LABEL: cfg.name}

    # The namespace holds the retained volumes: deleting it would delete them, so it is retained with them.
    namespace = core.Namespace("namespace", metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels=labels),
                               opts=pod.data_volume_options(opts, cfg.storage.retain_on_delete))
    in_ns = pulumi.ResourceOptions(provider=k8s_provider, depends_on=[namespace])
    if hf_token is not None:
        core.Secret("hf-token", metadata=pod.object_meta(cfg.hf_token_secret, ns, labels), type="Opaque",
                    string_data={"token": hf_token}, opts=in_ns)
    weights = ModelWeights(f"{cfg.name}-weights", ModelWeightsArgs(
        stack_name=cfg.name, namespace=ns, settings=cfg.weights, model=cfg.model.name,
        draft_model=weight_files.draft_model(cfg), storage_class=cfg.storage.storage_class,
        retain_on_delete=cfg.storage.retain_on_delete, hf_token_secret=cfg.hf_token_secret), opts=in_ns)
    # Engines are created or updated only once the download Job completed (Pulumi waits for it); their
    # init container waits for its marker on the volume as well.
    engines_opts = (pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=[weights.job]))
                    if weights.job is not None else in_ns)

    pd = cfg.topology == "pd"
    outputs: dict = {}
    kv_tier = None
    prefill = None
    if pd:
        if facts.kv_tier != "off":
            kv_tier = RdsTier(f"{cfg.name}-kv-tier", RdsTierArgs(
                stack_name=cfg.name, namespace=ns, mode=facts.kv_tier, env=facts.lmcache_env, budget=facts.rds_budget,
                hbm_per_chiplet_gib=cfg.hardware.hbm_per_chiplet_gib, tokens_per_rank=facts.rds_tokens_per_rank),
                opts=in_ns)
        prefill = PrefillPool(f"{cfg.name}-prefill", prefill_pool_args(
            cfg, weights.engine_weights, kv_tier_config_map=kv_tier.config_map_name if kv_tier else None,
            rds_nodes=kv_tier.needs_rds_nodes if kv_tier else False),
            # Pods start only once the ConfigMap they take their LMCache environment from exists.
            opts=pulumi.ResourceOptions.merge(engines_opts, pulumi.ResourceOptions(depends_on=[kv_tier])) if kv_tier else engines_opts)
    # One pool at a time: decode changes roll out only once prefill's Deployments are ready again.
    decode_opts = engines_opts
    if prefill is not None and cfg.rollout.pool_at_a_time:
        decode_opts = pulumi.ResourceOptions.merge(engines_opts, pulumi.ResourceOptions(depends_on=prefill.deployments))
    decode = DecodePool(f"{cfg.name}-decode", decode_pool_args(cfg, weights.engine_weights), opts=decode_opts)
    epp = cfg.router
    router = Router(f"{cfg.name}-router", RouterArgs(
        stack_name=cfg.name, namespace=ns, target_ports=decode.target_ports, image=epp.image, replicas=epp.replicas,
        epp_config=routing.endpoint_picker_config(epp, cfg.topology), grpc_port=epp.grpc_port, health_port=epp.health_port,
        metrics_port=epp.metrics_port, failure_mode=epp.failure_mode, max_unavailable=cfg.rollout.max_unavailable), opts=in_ns)
    gateway = Gateway(f"{cfg.name}-gateway", GatewayArgs(
        stack_name=cfg.name, namespace=ns, pool_name=router.pool_name, class_name=cfg.gateway.class_name,
        port=cfg.gateway.port, hostname=cfg.gateway.hostname), opts=in_ns)

    serving = facts.decode
    prefill_serving = facts.roles["prefill"].serving if pd else None
    if cfg.security.network_policies:
        NetworkIsolation(f"{cfg.name}-network", NetworkIsolationArgs(
            stack_name=cfg.name, namespace=ns, topology=cfg.topology, gateway_name=gateway.gateway_name,
            gateway_pod_label=cfg.security.gateway_pod_label, monitoring_namespace=cfg.security.monitoring_namespace,
            epp_labels=router.labels, epp_grpc_port=cfg.router.grpc_port, epp_metrics_port=cfg.router.metrics_port,
            entry_ports=decode.target_ports, decode_ports=serving.rank_ports, decode_nixl_ports=serving.side_channel_ports,
            prefill_port=cfg.prefill.port if pd else None,
            prefill_nixl_ports=prefill_serving.side_channel_ports if prefill_serving else []), opts=in_ns)
    observability = cfg.observability
    if observability.pod_monitors or observability.grafana_dashboard:
        targets = [MonitoredRole(role="decode", selector={pod.PART_OF_LABEL: cfg.name, pod.ROLE_LABEL: "decode"},
                                 port_names=[f"http-{i}" for i in range(len(serving.rank_ports))]),
                   MonitoredRole(role="epp", selector=router.labels, port_names=["metrics"])]
        if pd:
            targets.insert(0, MonitoredRole(role="prefill", selector={pod.PART_OF_LABEL: cfg.name, pod.ROLE_LABEL: "prefill"},
                                            port_names=["http"]))
        Monitoring(f"{cfg.name}-monitoring", MonitoringArgs(
            stack_name=cfg.name, namespace=ns, targets=targets, pod_monitors=observability.pod_monitors,
            dashboard=observability.grafana_dashboard, scrape_interval=observability.scrape_interval), opts=in_ns)
    outputs.update(facts.outputs())
    outputs.update({
        "openaiBaseUrl": gateway.base_url,
        "servedModelName": cfg.model.served_name or cfg.model.name,
    })
    return outputs
