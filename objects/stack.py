"""The whole stack of one StackConfig as components and their objects, without Pulumi.

`stacks.compose` creates one Pulumi component per `Part` here, with the same name and args, and wires
their order; `stacks.render` writes `StackObjects.manifests()`. So the objects a render shows are the
objects `pulumi up` registers, worked out once.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from core import alerts, autoscaling, routing
from core import serving as engine_serving
from core import weights as weight_files
from core.config import Role, StackConfig
from core.derive import StackFacts, derive, engine_kv_events, kv_events_ports
from core.labels import PART_OF_LABEL, ROLE_LABEL, pool_names
from core.stackfile import SECRET_PLACEHOLDER
from core.versions import engine as engine_versions
from objects import pod
from objects.decode_pool import DecodePoolArgs, SidecarSpec, decode_pool, target_ports
from objects.gateway import GatewayArgs, base_url, gateway, gateway_name
from objects.manifests import Child, manifest, object_meta
from objects.model_weights import ModelWeightsArgs, engine_weights, model_weights
from objects.monitoring import MonitoredRole, MonitoringArgs, monitoring
from objects.network_isolation import NetworkIsolationArgs, network_isolation
from objects.prefill_pool import PrefillPoolArgs, prefill_pool
from objects.rds_tier import RdsTierArgs, config_map_name, needs_rds_nodes, rds_tier
from objects.router import CERT_KEYS, RouterArgs, Tokenizer, epp_labels, pool_name, router

Args = TypeVar("Args", bound=BaseModel)


@dataclasses.dataclass(frozen=True)
class Part(Generic[Args]):
    """One component of the stack: its Pulumi name, its args and the objects it owns."""

    name: str
    args: Args
    children: list[Child]


@dataclasses.dataclass(frozen=True)
class StackObjects:
    """Every component of a stack, in the order `stacks.compose` registers them, and the stack's outputs."""

    namespace: Child
    hf_token: Child | None
    weights: Part[ModelWeightsArgs]
    kv_tier: Part[RdsTierArgs] | None
    prefill: Part[PrefillPoolArgs] | None
    decode: Part[DecodePoolArgs]
    router: Part[RouterArgs]
    gateway: Part[GatewayArgs]
    network: Part[NetworkIsolationArgs] | None
    monitoring: Part[MonitoringArgs] | None
    outputs: dict[str, Any]

    def children(self) -> list[Child]:
        parts = [
            self.weights,
            self.kv_tier,
            self.prefill,
            self.decode,
            self.router,
            self.gateway,
            self.network,
            self.monitoring,
        ]
        loose = [self.namespace] + ([self.hf_token] if self.hf_token else [])
        return loose + [child for part in parts if part is not None for child in part.children]

    def manifests(self) -> list[dict[str, Any]]:
        return [child.manifest for child in self.children()]


def engine_pool_args(
    cfg: StackConfig,
    role: Role,
    resolved: engine_serving.RoleServing,
    command: engine_serving.EngineCommand,
    weights: pod.EngineWeights,
    *,
    rds_nodes: bool,
) -> dict[str, Any]:
    """The args both engine pools take, worked out from the config sections they draw on and the role's values as
    the derived facts resolve them (`resolved`)."""
    # No lmcache-rbln version annotation: the policy pack derives it from the image tag (core.versions.engine).
    annotations = dict(cfg.engine.pod_annotations)
    hardware, security = cfg.hardware, cfg.security
    return dict(
        stack_name=cfg.name,
        namespace=cfg.namespace,
        replicas=role.replicas,
        weights=weights,
        hf_token_secret=cfg.hf_token_secret,
        hf_token_required=weight_files.token_required(cfg.weights),
        engine=pod.EngineSpec(
            image=cfg.engine.image,
            args=command.args,
            env=command.env,
            ports=command.ports,
            rank_ports=resolved.rank_ports,
            cpu=role.resources.cpu,
            memory=role.resources.memory,
            startup_failure_threshold=cfg.engine.startup_failure_threshold,
            shm_size=cfg.engine.shm_size,
            run_as_root=security.engine_run_as_root,
            capabilities=security.engine_capabilities,
            annotations=annotations,
            pre_stop_seconds=cfg.rollout.pre_stop_seconds,
        ),
        claim=pod.ClaimSpec(
            npus=resolved.devices,
            npu_device_class=hardware.npu_device_class,
            rdma_nics=hardware.rdma_nics_per_pod,
            nic_device_class=hardware.nic_device_class,
            numa_attribute=hardware.numa_attribute,
        ),
        placement=pod.PlacementSpec(
            npu_product=hardware.npu_product,
            rds_nodes=rds_nodes,
            groups=cfg.placement.groups,
            group_label=cfg.placement.group_label,
            spread=cfg.placement.spread_roles,
        ),
        rollout=pod.RolloutSpec(
            strategy=cfg.rollout.strategy,
            max_unavailable=cfg.rollout.max_unavailable,
            termination_grace_period_seconds=cfg.rollout.termination_grace_period_seconds,
        ),
        compile_cache=pod.CompileCacheSpec(
            size=cfg.storage.compile_cache_size,
            storage_class=cfg.storage.storage_class,
            retain_on_delete=cfg.storage.retain_on_delete,
        ),
    )


def scaling_spec(cfg: StackConfig, found: autoscaling.Scaling | None) -> pod.ScalingSpec | None:
    """A role's autoscaling (`found`: the derived facts', None for fixed replicas) as the pool renders it
    (core.autoscaling: defaults, the series its images serve)."""
    if found is None:
        return None
    return pod.ScalingSpec(
        min_replicas=found.min_replicas,
        max_replicas=found.max_replicas,
        metric=found.metric,
        series=autoscaling.series_for(found.signal, cfg.router.image) or found.signal.series,
        target=found.target,
        server_address=autoscaling.prometheus_address(cfg),
        scale_up_stabilization_seconds=found.scale_up_stabilization_seconds,
        scale_down_stabilization_seconds=found.scale_down_stabilization_seconds,
        polling_interval_seconds=found.polling_interval_seconds,
    )


def prefill_pool_args(
    cfg: StackConfig,
    facts: StackFacts,
    weights: pod.EngineWeights,
    *,
    kv_tier_config_map: str | None,
    rds_nodes: bool,
) -> PrefillPoolArgs:
    """`kv_tier_config_map`: the KV tier's ConfigMap (None: no tier); `rds_nodes`: the pods need RDS nodes."""
    role = facts.roles["prefill"]
    command = engine_serving.prefill_command(
        cfg.model,
        cfg.engine,
        cfg.prefill,
        role.serving,
        lmcache=kv_tier_config_map is not None,
        drain_seconds=cfg.rollout.drain_seconds,
        kv_events=engine_kv_events(cfg),
        revision=weights.revision,
        draft_revision=weights.draft_revision,
    )
    return PrefillPoolArgs(
        **engine_pool_args(cfg, cfg.prefill, role.serving, command, weights, rds_nodes=rds_nodes),
        active_ports=facts.pool_ports.active("prefill"),
        kv_tier_config_map=kv_tier_config_map,
        autoscaling=scaling_spec(cfg, role.scaling),
    )


def decode_pool_args(cfg: StackConfig, facts: StackFacts, weights: pod.EngineWeights) -> DecodePoolArgs:
    """P/D: the routing sidecar and the NIXL connector; AGG: neither."""
    pd = cfg.topology == "pd"
    role = cfg.decode
    command = engine_serving.decode_command(
        cfg.model,
        cfg.engine,
        role,
        facts.decode,
        nixl=pd,
        drain_seconds=cfg.rollout.drain_seconds,
        kv_events=engine_kv_events(cfg),
        revision=weights.revision,
        draft_revision=weights.draft_revision,
    )
    sidecar = (
        SidecarSpec(
            image=role.sidecar.image,
            args=engine_serving.sidecar_args(
                role, facts.decode, pool_namespace=cfg.namespace, pool_name=pool_name(cfg.name)
            ),
            ports=facts.sidecar_ports,
        )
        if pd
        else None
    )
    return DecodePoolArgs(
        **engine_pool_args(cfg, role, facts.decode, command, weights, rds_nodes=False),
        active_ports=facts.pool_ports.active("decode"),
        sidecar=sidecar,
        autoscaling=scaling_spec(cfg, facts.roles["decode"].scaling),
    )


def hf_token_withheld(cfg: StackConfig, stack: str) -> str | None:
    """Why the Secret of a set `hfToken` is not part of this stack, or None when it is."""
    if not cfg.render_directory:
        return None
    # The provider writes every object of a render-mode stack, a Secret's data included, to plain files.
    return (
        f"rebel100:hfToken is set, but stack {stack!r} renders to {cfg.render_directory}, which would hold the "
        f"token in plain text: the Secret {cfg.hf_token_secret} is not rendered. Create it where the render is "
        f"applied: kubectl create secret generic {cfg.hf_token_secret} --from-literal=token=... -n {cfg.namespace}"
    )


def _part(name: str, args: Args, build: Callable[[str, Args], list[Child]]) -> Part[Args]:
    return Part(name, args, build(name, args))


def weights_args(cfg: StackConfig, facts: StackFacts) -> ModelWeightsArgs:
    return ModelWeightsArgs(
        stack_name=cfg.name,
        namespace=cfg.namespace,
        settings=cfg.weights,
        model=cfg.model.name,
        draft_model=facts.weights.draft,
        storage_class=cfg.storage.storage_class,
        retain_on_delete=cfg.storage.retain_on_delete,
        hf_token_secret=cfg.hf_token_secret,
    )


def rds_tier_args(cfg: StackConfig, facts: StackFacts) -> RdsTierArgs | None:
    """The KV tier's args; None when prefill has none (AGG, or `kvTier.mode: off`)."""
    if cfg.topology != "pd" or facts.kv_tier == "off":
        return None
    return RdsTierArgs(
        stack_name=cfg.name,
        namespace=cfg.namespace,
        mode=facts.kv_tier,
        env=facts.lmcache_env,
        budget=facts.rds_budget,
        hbm_per_chiplet_gib=cfg.hardware.hbm_per_chiplet_gib,
        tokens_per_rank=facts.rds_tokens_per_rank,
    )


def placeholder_certificate() -> dict[str, str]:
    """What a render without Pulumi shows for the EPP's certificate: `pulumi up` makes the real one (stacks.program)."""
    encoded = base64.b64encode(SECRET_PLACEHOLDER.encode()).decode()
    return {key: encoded for key in CERT_KEYS}


def router_args(
    cfg: StackConfig,
    target_ports: list[int],
    certificate: dict[str, str] | None = None,
    weights: pod.EngineWeights | None = None,
) -> RouterArgs:
    """The EPP and the InferencePool, which targets `target_ports` (objects.decode_pool.target_ports); `certificate`
    is the EPP's when `router.certificate` is `stack` (the placeholder when not given); `weights`: the volume a
    precise render's tokenizer reads (the engines')."""
    epp = cfg.router
    epp_config = routing.endpoint_picker_config(epp, cfg.topology, cfg.model.name)
    tokenizer = None
    if epp.prefix_cache == "precise":
        if weights is None:
            raise ValueError("A precise prefix-cache router needs the weights volume for its tokenizer.")
        command = engine_serving.tokenizer_command(cfg.model, cfg.engine, epp.tokenizer_port, revision=weights.revision)
        tokenizer = Tokenizer(
            image=epp.tokenizer_image,
            command=list(engine_versions.TOKENIZER_COMMAND),
            args=command.args,
            env=command.env,
            port=epp.tokenizer_port,
            weights=weights,
        )
    return RouterArgs(
        stack_name=cfg.name,
        namespace=cfg.namespace,
        target_ports=target_ports,
        image=epp.image,
        replicas=epp.replicas,
        epp_config=epp_config,
        experimental_flag=routing.epp_experimental_flag(epp, epp_config),
        grpc_port=epp.grpc_port,
        health_port=epp.health_port,
        metrics_port=epp.metrics_port,
        refresh_metrics_interval_ms=epp.refresh_metrics_interval_ms,
        failure_mode=epp.failure_mode,
        drain_seconds=routing.epp_drain_seconds(epp),
        max_unavailable=cfg.rollout.max_unavailable,
        certificate=(certificate or placeholder_certificate()) if epp.certificate == "stack" else None,
        tokenizer=tokenizer,
    )


def gateway_args(cfg: StackConfig) -> GatewayArgs:
    return GatewayArgs(
        stack_name=cfg.name,
        namespace=cfg.namespace,
        pool_name=pool_name(cfg.name),
        class_name=cfg.gateway.class_name,
        port=cfg.gateway.port,
        hostname=cfg.gateway.hostname,
    )


def network_args(cfg: StackConfig, facts: StackFacts, entry_ports: list[int]) -> NetworkIsolationArgs:
    """The NetworkPolicies' args; `entry_ports` are the ones the gateway reaches (objects.decode_pool.target_ports)."""
    pd = cfg.topology == "pd"
    prefill_serving = facts.roles["prefill"].serving if pd else None
    return NetworkIsolationArgs(
        stack_name=cfg.name,
        namespace=cfg.namespace,
        topology=cfg.topology,
        gateway_name=gateway_name(cfg.name),
        gateway_pod_label=cfg.security.gateway_pod_label,
        monitoring_namespace=cfg.security.monitoring_namespace,
        epp_labels=epp_labels(cfg.name),
        epp_grpc_port=cfg.router.grpc_port,
        epp_metrics_port=cfg.router.metrics_port,
        entry_ports=entry_ports,
        decode_ports=facts.decode.rank_ports,
        decode_nixl_ports=facts.decode.side_channel_ports,
        prefill_port=cfg.prefill.port if pd else None,
        prefill_nixl_ports=prefill_serving.side_channel_ports if prefill_serving else [],
        decode_kv_events_ports=kv_events_ports(cfg, len(facts.decode.rank_ports)),
        prefill_kv_events_ports=kv_events_ports(cfg, len(prefill_serving.rank_ports)) if prefill_serving else [],
    )


def monitoring_args(cfg: StackConfig, facts: StackFacts) -> MonitoringArgs:
    """PodMonitors of prefill (P/D), decode and the EPP, the alerts, and the dashboard."""
    targets = [
        MonitoredRole(
            role="decode",
            selector={PART_OF_LABEL: cfg.name, ROLE_LABEL: "decode"},
            port_names=[f"http-{i}" for i in range(len(facts.decode.rank_ports))],
            token=False,
        ),
        MonitoredRole(role="epp", selector=epp_labels(cfg.name), port_names=["metrics"], token=True),
    ]
    if cfg.topology == "pd":
        targets.insert(
            0,
            MonitoredRole(
                role="prefill",
                selector={PART_OF_LABEL: cfg.name, ROLE_LABEL: "prefill"},
                port_names=["http"],
                token=False,
            ),
        )
    observability = cfg.observability
    return MonitoringArgs(
        stack_name=cfg.name,
        namespace=cfg.namespace,
        targets=targets,
        pod_monitors=observability.pod_monitors,
        dashboard=observability.grafana_dashboard,
        scrape_interval=observability.scrape_interval,
        decision_metric=routing.generation_of(cfg.router).decision_metric,
        autoscaled=[pool for name in facts.scalings for _, pool in pool_names(cfg.name, name, cfg.placement.groups)],
        alerts=alerts.alerts(cfg) if alerts.rendered(cfg) else [],
        runbook_url=observability.alerts.runbook_url,
    )


def stack_objects(
    cfg: StackConfig, *, hf_token: Any = None, epp_certificate: dict[str, str] | None = None
) -> StackObjects:
    """Every component of the stack and its objects; `hf_token` (a value, or Pulumi's secret of it) makes
    the token's Secret; `epp_certificate` is the EPP's serving certificate (`router_args`)."""
    facts = derive(cfg)
    ns = cfg.namespace
    labels = {PART_OF_LABEL: cfg.name}
    pd = cfg.topology == "pd"

    # The namespace holds the retained volumes: deleting it would delete them, so it is retained with them.
    namespace = Child(
        "namespace",
        manifest("v1", "Namespace", {"name": ns, "labels": labels}),
        retain_on_delete=cfg.storage.retain_on_delete,
    )
    secret = None
    if hf_token is not None:
        secret = Child(
            "hf-token",
            manifest(
                "v1",
                "Secret",
                object_meta(cfg.hf_token_secret, ns, labels),
                type="Opaque",
                stringData={"token": hf_token},
            ),
        )
    weights = _part(f"{cfg.name}-weights", weights_args(cfg, facts), model_weights)
    on_volume = engine_weights(weights.args)

    kv_tier = prefill = None
    if pd:
        tier = rds_tier_args(cfg, facts)
        if tier is not None:
            kv_tier = _part(f"{cfg.name}-kv-tier", tier, rds_tier)
        prefill = _part(
            f"{cfg.name}-prefill",
            prefill_pool_args(
                cfg,
                facts,
                on_volume,
                kv_tier_config_map=config_map_name(kv_tier.args) if kv_tier else None,
                rds_nodes=kv_tier is not None and needs_rds_nodes(kv_tier.args),
            ),
            prefill_pool,
        )
    decode = _part(f"{cfg.name}-decode", decode_pool_args(cfg, facts, on_volume), decode_pool)
    entry_ports = target_ports(decode.args)
    routed = _part(f"{cfg.name}-router", router_args(cfg, entry_ports, epp_certificate, on_volume), router)
    entry = _part(f"{cfg.name}-gateway", gateway_args(cfg), gateway)
    network = None
    if cfg.security.network_policies:
        network = _part(f"{cfg.name}-network", network_args(cfg, facts, entry_ports), network_isolation)
    observability = cfg.observability
    watched = None
    if observability.pod_monitors or observability.grafana_dashboard:
        watched = _part(f"{cfg.name}-monitoring", monitoring_args(cfg, facts), monitoring)
    outputs = {
        **facts.outputs(),
        "openaiBaseUrl": base_url(entry.args),
        "servedModelName": cfg.model.served_name or cfg.model.name,
    }
    return StackObjects(
        namespace=namespace,
        hf_token=secret,
        weights=weights,
        kv_tier=kv_tier,
        prefill=prefill,
        decode=decode,
        router=routed,
        gateway=entry,
        network=network,
        monitoring=watched,
        outputs=outputs,
    )
