"""Rules of the gate on the P/D pair and the router's pool: prefill and decode agree, the decider, the router's block
size, the pool's endpoints (the ports of each pod: core/gate/ports.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from core import rules, sizing
from core.config import StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key


def rule_roles_agree(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    if cfg.topology != "pd" or cfg.prefill.replicas == 0:
        return
    prefill = facts.roles["prefill"].serving
    decode = facts.decode

    def speculative(s: BaseModel | None) -> dict[str, object] | None:
        return None if s is None else s.model_dump(by_alias=True, exclude_none=True)

    for what, label, p, d in (
        ("block-size", "blockSize", prefill.block_size, decode.block_size),
        ("kv-cache-dtype", "kvCacheDtype", prefill.kv_cache_dtype, decode.kv_cache_dtype),
        ("speculative-config", "speculative", speculative(prefill.speculative), speculative(decode.speculative)),
    ):
        problem = rules.roles_agree(
            what,
            p,
            d,
            field_name=f"{label} (prefill.{label}, decode.{label}, engine.{label})",
            fix=f"Set it once in engine.{label} and drop the role overrides.",
        )
        if problem:
            yield Issue(key(f"decode.{label}"), f"prefill and decode {problem}", "pd-roles-agree")


def rule_pd_wiring(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    if cfg.topology == "pd" and cfg.prefill.replicas == 0:
        yield Issue(
            key("prefill.replicas"),
            "topology 'pd' needs at least one prefill pod; use topology 'agg' for a stack without prefill.",
        )
    if cfg.topology == "agg" and cfg.prefill.replicas > 0:
        yield Issue(
            key("prefill.replicas"),
            f"topology 'agg' runs no prefill pods but prefill.replicas is {cfg.prefill.replicas}: set it to 0.",
        )
    problem = rules.pool_target_ports_fit(
        len(facts.pool_ports.target),
        ports_name="the stack's InferencePool: one per DP rank of a decode pod",
        fix="Lower decode.dataParallelSizeLocal (or decode.dataParallelSize) to at most "
        f"{sizing.MAX_POOL_TARGET_PORTS} ranks per pod.",
    )
    if problem:
        yield Issue(key("decode.dataParallelSizeLocal"), problem, "inference-pool-wiring")
    # The ports of the decode pod (sidecar, ranks, RPC, NIXL) are core.gate.ports's, with every other pod's.
    if cfg.topology == "pd" and cfg.router.decider == "prefix-based":
        problem = rules.pd_decider_fires(
            cfg.router.non_cached_tokens,
            tokens_name="router.nonCachedTokens",
            always_name="router.decider always-disagg",
        )
        if problem:
            yield Issue(key("router.nonCachedTokens"), problem, "router-pd-profiles")
    if not cfg.router.auto_tune:
        for (block, batched, sub_block), names in reuse_units(cfg, facts).items():
            problem = rules.router_block_size(
                cfg.router.block_size_tokens,
                block,
                batched,
                sub_block,
                size_name="router.blockSizeTokens",
                engines=f"the {' and '.join(names)} engines",
                block_name=" and ".join(sorted(set(names.values()))),
                batched_name="engine.maxNumBatchedTokens",
                sub_block_name="engine.subBlockCache true",
                precise=cfg.router.prefix_cache == "precise",
            )
            if problem:
                yield Issue(key("router.blockSizeTokens"), problem, "router-block-size")


def rule_precise_prefix_cache(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """router.prefixCache precise: the engines publish what the router's blocks can index."""
    if cfg.router.prefix_cache != "precise":
        return
    problem = rules.precise_needs_prefix_caching(
        cfg.engine.enable_prefix_caching, key_name="engine.enablePrefixCaching"
    )
    if problem:
        yield Issue(key("router.prefixCache"), problem, "router-precise-prefix-cache")
        return
    for (block, batched, sub_block), names in reuse_units(cfg, facts).items():
        problem = rules.precise_block_size(
            cfg.router.block_size_tokens,
            block,
            sizing.prefix_reuse_unit(block, batched, sub_block),
            size_name="router.blockSizeTokens",
            engines=f"the {' and '.join(names)} engines",
            block_name=" and ".join(sorted(set(names.values()))),
        )
        if problem:
            yield Issue(key("router.blockSizeTokens"), problem, "router-precise-prefix-cache")


def reuse_units(cfg: StackConfig, facts: StackFacts) -> dict[tuple[int, int, bool], dict[str, str]]:
    """The engine roles by (block size, max-num-batched-tokens, sub-block caching), each with the key its block size
    comes from: what the router's prefix index has to match."""
    units: dict[tuple[int, int, bool], dict[str, str]] = {}
    engine = cfg.engine
    for name, role in cfg.engine_roles():
        unit = (facts.roles[name].serving.block_size, engine.max_num_batched_tokens, engine.sub_block_cache)
        units.setdefault(unit, {})[name] = f"{name}.blockSize" if role.block_size else "engine.blockSize"
    return units


def rule_pool_endpoints(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """Every endpoint the EPP makes of an engine pod leads to a port it serves on, and each pod has one: the render
    declares the target ports each pod serves on as its active ports (core.labels), and the target ports are decode's
    own (its sidecar's in P/D, its ranks in AGG: the derived facts' pool_ports), so what is left to refuse is prefill
    serving on none of them."""
    if "prefill" not in facts.roles:
        return
    ports = facts.pool_ports
    problem = rules.pool_endpoints_serve(
        "the stack's InferencePool",
        "every prefill pod",
        ports.target,
        ports.serving["prefill"],
        ports.active("prefill"),
        serving_name="prefill.port and its DP ranks",
        active_name="active-ports annotations",
        fix=f"Set prefill.port to one of the target ports {ports.target} (the decode sidecar's: decode.sidecar.port "
        "and up).",
    )
    if problem:
        yield Issue(key("prefill.port"), problem, "pool-endpoints-serve")
