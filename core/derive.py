"""The derived facts of one stack, computed once from its config: `derive(cfg)`.

Each role's settings resolved against the common engine section (`_role_serving`, the one place), devices per pod,
ports, KV bytes per token, the RDS budget and the LMCache environment are worked out here and nowhere else; the
config gate checks them, the components render them, the plan and the stack outputs print them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from core import autoscaling, routing, serving, sizing, weights
from core.config import Engine, Role, StackConfig
from core.serving import RoleServing


@dataclasses.dataclass(frozen=True)
class RoleFacts:
    """One engine role that runs pods: its config key, pod count and resolved serving values."""

    name: str
    replicas: int  # the pods the site must hold: the fixed count, or the autoscaler's maximum
    serving: RoleServing
    scaling: autoscaling.Scaling | None = None  # None: fixed replicas

    @property
    def devices(self) -> int:
        return self.serving.devices * self.replicas

    def output(self) -> dict[str, Any]:
        found = {"replicas": self.replicas, "devicesPerPod": self.serving.devices, "devices": self.devices}
        return {**found, "autoscaling": self.scaling.output()} if self.scaling else found


@dataclasses.dataclass(frozen=True)
class PoolPorts:
    """The InferencePool's targetPorts (the decode sidecar's in P/D, the decode ranks in AGG) and, for each engine
    role of the topology, the ports its pods serve requests on."""

    target: list[int]
    serving: dict[str, list[int]]

    def active(self, role: str) -> list[int]:
        """What a pod of the role declares as its active ports: the target ports it serves on."""
        return [port for port in self.target if port in self.serving[role]]


@dataclasses.dataclass(frozen=True)
class StackFacts:
    pd: bool
    roles: dict[str, RoleFacts]
    decode: RoleServing
    sidecar_ports: list[int]  # the decode routing sidecar's, one per DP rank of a decode pod (8000-8003)
    pool_ports: PoolPorts
    kv_bytes_per_token: int
    prefix_reuse_unit: int
    kv_tier: Literal["rds", "cpu", "off"]
    rds_drives: int
    rds_budget: sizing.RdsBudget | None
    rds_tokens_per_rank: int
    lmcache_env: dict[str, str]
    weights: weights.Plan

    @property
    def total_devices(self) -> int:
        return sum(role.devices for role in self.roles.values())

    @property
    def scalings(self) -> dict[str, autoscaling.Scaling]:
        """Every autoscaled role that runs pods, by config key (core.autoscaling.role_scalings)."""
        return {name: role.scaling for name, role in self.roles.items() if role.scaling is not None}

    def outputs(self) -> dict[str, Any]:
        """The numbers every stack exports (besides the addresses the components know)."""
        return {
            **{name: role.output() for name, role in self.roles.items()},
            "totalDevices": self.total_devices,
            "kvBytesPerToken": self.kv_bytes_per_token,
            "kvTier": self.kv_tier,
            "rdsTokensPerRank": self.rds_tokens_per_rank,
            "memoryBudget": self.rds_budget.as_output() if self.rds_budget else None,
            "weights": self.weights.output(),
        }


def _data_parallel_local(role: Role) -> int:
    """DP ranks in one pod: `dataParallelSizeLocal`, else all of `dataParallelSize`."""
    return role.data_parallel_size_local or role.data_parallel_size


def _role_serving(engine: Engine, role: Role) -> RoleServing:
    """Resolve a role's overrides and derive its devices and ports (one place for both)."""
    dp_local = _data_parallel_local(role)
    return RoleServing(
        block_size=role.block_size or engine.block_size,
        kv_cache_dtype=role.kv_cache_dtype or engine.kv_cache_dtype,
        speculative=role.speculative if role.speculative is not None else engine.speculative,
        data_parallel_local=dp_local,
        devices=sizing.devices_per_pod(role.tensor_parallel_size, role.pipeline_parallel_size, dp_local),
        rank_ports=sizing.rank_ports(role.port, dp_local),
        side_channel_ports=sizing.rank_ports(engine.nixl_side_channel_port, dp_local),
    )


def _pool_ports(cfg: StackConfig, decode: RoleServing, sidecar: list[int]) -> PoolPorts:
    if cfg.topology != "pd":
        return PoolPorts(target=decode.rank_ports, serving={"decode": decode.rank_ports})
    prefill = _role_serving(cfg.engine, cfg.prefill)  # prefill's ports, even without pods (a gate rule refuses that)
    return PoolPorts(target=sidecar, serving={"prefill": prefill.rank_ports, "decode": sidecar})


def rds_drives(cfg: StackConfig) -> int:
    """NVMe drives bound to RDS: `kvTier.rdsDrives`, else the hardware profile's drives per node."""
    return cfg.kv_tier.rds_drives or cfg.hardware.nvme_drives_per_node


def rds_budget(cfg: StackConfig) -> sizing.RdsBudget:
    """The section 5 budget of this stack's prefill engines."""
    tier = cfg.kv_tier
    return sizing.rds_budget(
        rds_max_chunks=tier.rds_max_chunks,
        chunk_overhead_mib=tier.rds_chunk_overhead_mib,
        drives=rds_drives(cfg),
        staging_mib=tier.staging_buffer_mib,
        hbm_per_chiplet_gib=cfg.hardware.hbm_per_chiplet_gib,
        gpu_memory_utilization=cfg.prefill.gpu_memory_utilization,
    )


def derive(cfg: StackConfig) -> StackFacts:
    scalings = autoscaling.role_scalings(cfg)
    roles = {
        name: RoleFacts(
            name,
            scalings[name].max_replicas if name in scalings else role.replicas,
            _role_serving(cfg.engine, role),
            scalings.get(name),
        )
        for name, role in cfg.engine_roles()
    }
    decode = _role_serving(cfg.engine, cfg.decode)
    sidecar = sizing.rank_ports(cfg.decode.sidecar.port, decode.data_parallel_local)
    pd = cfg.topology == "pd" and "prefill" in roles
    tier = cfg.kv_tier.mode if pd else "off"
    on_rds = tier == "rds"
    return StackFacts(
        pd=cfg.topology == "pd",
        roles=roles,
        decode=decode,
        sidecar_ports=sidecar,
        pool_ports=_pool_ports(cfg, decode, sidecar),
        kv_bytes_per_token=sizing.kv_bytes_per_token(
            cfg.model.layers, cfg.model.kv_heads, cfg.model.head_dim, decode.kv_cache_dtype
        ),
        prefix_reuse_unit=sizing.prefix_reuse_unit(
            cfg.engine.block_size, cfg.engine.max_num_batched_tokens, cfg.engine.sub_block_cache
        ),
        kv_tier=tier,
        rds_drives=rds_drives(cfg),
        rds_budget=rds_budget(cfg) if on_rds else None,
        rds_tokens_per_rank=sizing.rds_tokens_per_rank(cfg.kv_tier.rds_max_chunks, cfg.kv_tier.chunk_size)
        if on_rds
        else 0,
        lmcache_env=serving.lmcache_env(cfg.kv_tier) if pd else {},
        weights=weights.plan(cfg, decode.speculative, serving.HF_HOME),
    )


def engine_kv_events(cfg: StackConfig) -> serving.KvEvents | None:
    """Every engine's `--kv-events-config` when the router indexes what the engines hold (router.prefixCache
    precise): published under the served name, which requests name and the EPP hashes with; else None."""
    if cfg.router.prefix_cache != "precise":
        return None
    topic = routing.kv_events_topic(cfg.model.served_name or cfg.model.name, serving.POD_IP_ENV)
    return serving.KvEvents(cfg.router.kv_events_port, topic)


def kv_events_ports(cfg: StackConfig, ranks: int) -> list[int]:
    """The KV-event sockets of an engine of `ranks` DP ranks (rank r on router.kvEventsPort + r, as vLLM offsets
    them); none unless the engines publish (router.prefixCache precise)."""
    events = engine_kv_events(cfg)
    return [] if events is None else [port for _name, port in events.ports(ranks)]


def engine_commands(cfg: StackConfig, facts: StackFacts) -> dict[str, serving.EngineCommand]:
    """The `vllm serve` command of each role that runs pods, as the components render it: what the gate judges
    against the engine image's facts (core.versions.engine) and vLLM's own flag list. `facts`: derive(cfg), computed
    once by the caller."""
    plan = facts.weights
    kv_events = engine_kv_events(cfg)
    commands = {}
    if "prefill" in facts.roles:
        commands["prefill"] = serving.prefill_command(
            cfg.model,
            cfg.engine,
            cfg.prefill,
            facts.roles["prefill"].serving,
            lmcache=facts.kv_tier != "off",
            drain_seconds=cfg.rollout.drain_seconds,
            kv_events=kv_events,
            revision=plan.revision,
            draft_revision=plan.draft_revision,
        )
    commands["decode"] = serving.decode_command(
        cfg.model,
        cfg.engine,
        cfg.decode,
        facts.decode,
        nixl=facts.pd,
        drain_seconds=cfg.rollout.drain_seconds,
        kv_events=kv_events,
        revision=plan.revision,
        draft_revision=plan.draft_revision,
    )
    return commands
