"""The first gate: parse the `rebel100:` config namespace and check the rules that relate fields.

`load_config(raw)` returns a `StackConfig` or raises `ConfigError` carrying every problem found,
each with the full key path, the value, the rule and the fix. Nothing is registered before this
returns, so a bad stack file changes nothing. Warnings (advice, not errors) come back separately.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import typing
from collections.abc import Iterable
from typing import Any

import pydantic
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from core import autoscaling, labels, routing, rules, serving, sizing, weights
from core.config import MOVED_KEYS, MOVED_KEYS_DOCS, NAMESPACE, SECRET_KEYS, Router, StackConfig, unwrap_optional
from core.derive import StackFacts, derive, engine_commands, pool_ports
from core.serving import role_serving, sidecar_ports
from core.versions import Feature, epp_schema, image_version, missing_features, vllm_args
from core.versions import engine as engine_versions
from core.versions import lmcache as lmcache_facts
from core.versions import router as router_versions

Loc = tuple[int | str, ...]  # a key's path in a config, as pydantic reports it


@dataclasses.dataclass(frozen=True)
class Issue:
    path: str
    message: str
    # The policy of the pack that judges the same rule on the render ("" for config-only rules).
    policy: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(ValueError):
    """Every problem of one stack configuration, reported together."""

    def __init__(self, issues: list[Issue], source: str = "stack configuration"):
        self.issues = issues
        self.source = source
        lines = [f"{source} is invalid ({len(issues)} problem{'s' if len(issues) != 1 else ''}):"]
        lines += [f"  - {issue}" for issue in issues]
        super().__init__("\n".join(lines))


def key(path: str) -> str:
    """`prefill.maxNumSeqs` -> `rebel100:prefill.maxNumSeqs`."""
    return f"{NAMESPACE}:{path}"


# --- parsing -------------------------------------------------------------------------------


def namespace_values(raw: dict[str, Any]) -> dict[str, Any]:
    """The `rebel100:` keys of a Pulumi config map, objects decoded from their JSON text."""
    values: dict[str, Any] = {}
    prefix = f"{NAMESPACE}:"
    for full_key, value in raw.items():
        if not full_key.startswith(prefix):
            continue
        name = full_key[len(prefix) :]
        if name in SECRET_KEYS:
            continue
        if isinstance(value, str) and value[:1] in "{[":
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(value)
        values[name] = value
    return values


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """A section's fields by both spellings a stack file may use (populate_by_name): `kvTier` and `kv_tier`."""
    return {**dict(model.model_fields), **{info.alias or name: info for name, info in model.model_fields.items()}}


def _field_models(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The section model that `loc` (aliases or field names) points into, or None."""
    current: Any = model
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = _fields(current).get(str(part))
        if info is None:
            return None
        current = unwrap_optional(info.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_info(model: type[BaseModel], loc: Loc) -> FieldInfo | None:
    parent = _field_models(model, loc[:-1])  # the model itself for a top-level key
    if parent is None:
        return None
    return _fields(parent).get(str(loc[-1]))


def _is_map(loc: Loc) -> bool:
    """Whether `loc` is a map field (extraEnv, podAnnotations), whose keys the user chooses."""
    info = _field_info(StackConfig, loc) if loc else None
    return info is not None and typing.get_origin(unwrap_optional(info.annotation)) is dict


def _allowed(info: FieldInfo | None) -> str:
    """What a field accepts, from its annotation and bounds."""
    if info is None:
        return ""
    parts = []
    for constraint in info.metadata:
        for attr, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(constraint, attr, None)
            if bound is not None:
                parts.append(f"{symbol} {bound}")
        pattern = getattr(constraint, "pattern", None)
        if pattern:
            parts.append(f"matching {pattern}")
    literal = (
        [a for a in typing.get_args(unwrap_optional(info.annotation))]
        if typing.get_origin(unwrap_optional(info.annotation)) is typing.Literal
        else []
    )
    if literal:
        return "allowed: " + ", ".join(repr(v) for v in literal)
    return ("allowed: " + " and ".join(parts)) if parts else ""


def _path(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return key(text)


def _pydantic_issues(error: pydantic.ValidationError) -> list[Issue]:
    issues = []
    for err in error.errors():
        loc = tuple(err["loc"])
        path = _path(loc)
        dotted = ".".join(str(part) for part in loc)
        moved = MOVED_KEYS.get(dotted)
        if err["type"] == "extra_forbidden" and moved:
            docs = MOVED_KEYS_DOCS.get(dotted.split(".", 1)[0], "the README")
            issues.append(Issue(path, f"this key moved: set `{key(moved)}` instead (see {docs})."))
            continue
        if err["type"] == "extra_forbidden":
            # pydantic reports an unknown key only inside a model, and the lookup takes both spellings of the
            # sections on the way (`kv_tier` too), so `parent` is the model of the section the key is in.
            parent = _field_models(StackConfig, loc[:-1])
            assert parent is not None  # pydantic reports an unknown key inside a model only
            valid = sorted(info.alias or name for name, info in parent.model_fields.items())
            if len(loc) == 1:
                valid += sorted(SECRET_KEYS)
            close = difflib.get_close_matches(str(loc[-1]), valid)  # best first
            hint = f" Did you mean `{_path((*loc[:-1], close[0]))}`?" if close else ""
            issues.append(Issue(path, f"unknown key.{hint} Valid keys here: {', '.join(valid)}."))
            continue
        if loc[-1:] == ("[key]",) and _is_map(loc[:-2]):
            # A key of a map (extraEnv, podAnnotations): the path is the map's, the value the key. pydantic names the
            # key's own check `[key]`, but a map may also hold a key spelled `[key]` whose value is wrong: that one's
            # loc ends at the map's key, not two parts below the map, and is reported like any value below.
            *map_loc, name, _ = loc
            issues.append(Issue(_path(tuple(map_loc)), f"key {name!r} is not valid: {err['msg']}."))
            continue
        value = err.get("input")
        allowed = _allowed(_field_info(StackConfig, loc))
        message = f"{value!r} is not valid: {err['msg']}."
        if allowed:
            message += f" ({allowed})"
        issues.append(Issue(path, message))
    return issues


# --- rules across fields --------------------------------------------------------------------


def rule_pp_with_dp(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    for name, role in cfg.engine_roles():
        problem = rules.pp_with_dp(role.pipeline_parallel_size, role.data_parallel_size)
        if problem:
            yield Issue(key(f"{name}.pipelineParallelSize"), problem, "pp-with-dp")


def rule_devices_fit_node(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    per_node = cfg.hardware.npus_per_node
    for name, role in cfg.engine_roles():
        problem = rules.devices_fit_node(
            role.tensor_parallel_size,
            role.pipeline_parallel_size,
            facts.roles[name].serving.data_parallel_local,
            per_node,
            per_node_name="hardware.npusPerNode",
        )
        if problem:
            yield Issue(key(name), problem, "npu-devices-fit-node")
    nodes = cfg.hardware.nodes
    # With an autoscaled role the total is at its maximum, judged at that maximum by rule_autoscaling.
    if nodes is not None and facts.total_devices > nodes * per_node and not autoscaling.role_scalings(cfg):
        yield Issue(
            key("hardware.nodes"),
            f"the stack needs {facts.total_devices} NPUs but {nodes} nodes x {per_node} NPUs = {nodes * per_node}: "
            f"lower the replicas or add nodes.",
        )


def rule_pipeline_and_experts(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    model = cfg.model
    for name, role in cfg.engine_roles():
        problem = rules.pipeline_fits_layers(role.pipeline_parallel_size, model.layers, layers_name="model.layers")
        if problem:
            yield Issue(key(f"{name}.pipelineParallelSize"), problem, "parallelism-fits-model")
        if role.enable_expert_parallel:
            problem = rules.experts_divide(
                model.experts, role.data_parallel_size, role.tensor_parallel_size, experts_name="model.experts"
            )
            if problem:
                yield Issue(key(f"{name}.enableExpertParallel"), problem, "parallelism-fits-model")
    problem = rules.decode_without_pipeline(cfg.decode.pipeline_parallel_size)
    if problem:
        yield Issue(key("decode.pipelineParallelSize"), problem, "parallelism-fits-model")


def rule_block_and_memory(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    engine = cfg.engine
    for name, role in cfg.engine_roles():
        resolved = role_serving(engine, role)
        if engine.sub_block_cache:
            problem = rules.block_holds_sub_blocks(
                resolved.block_size, engine.max_num_batched_tokens, sub_block_name="engine.maxNumBatchedTokens"
            )
            if problem:
                yield Issue(
                    key(f"{name}.blockSize" if role.block_size else "engine.blockSize"), problem, "engine-args-in-range"
                )
        if role.gpu_memory_utilization is not None:
            problem = rules.utilization_in_range(role.gpu_memory_utilization)
            if problem:
                yield Issue(key(f"{name}.gpuMemoryUtilization"), problem, "engine-args-in-range")
    problem = rules.max_model_len_fits(engine.max_model_len, cfg.model.max_context, context_name="model.maxContext")
    if problem:
        yield Issue(key("engine.maxModelLen"), problem, "engine-args-in-range")
    spec = engine.speculative
    if spec is not None and spec.method == "eagle3" and not spec.model:
        yield Issue(key("engine.speculative.model"), "EAGLE-3 needs a draft model: set engine.speculative.model.")


def rule_kv_tier(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    tier = cfg.kv_tier
    if tier.mode == "off":
        return
    if cfg.topology != "pd" or cfg.prefill.replicas == 0:
        yield Issue(
            key("kvTier.mode"),
            f"kvTier.mode {tier.mode!r} offloads prefill KV, but this stack has no prefill pods "
            f"(topology {cfg.topology!r}, prefill.replicas {cfg.prefill.replicas}): set kvTier.mode off.",
        )
        return
    if tier.mode == "rds":
        if facts.rds_drives == 0:
            yield Issue(
                key("hardware.nvmeDrivesPerNode"),
                "RDS needs NVMe drives: set hardware.nvmeDrivesPerNode or kvTier.rdsDrives, or use kvTier.mode cpu.",
            )
        elif facts.rds_budget is not None:
            problem = rules.rds_budget_fits(
                facts.rds_budget, chunks_name="kvTier.rdsMaxChunks", utilization_name="prefill.gpuMemoryUtilization"
            )
            if problem:
                yield Issue(key("kvTier.rdsMaxChunks"), problem, "rds-memory-budget")
            lmcache_rbln = engine_versions.lmcache_rbln_version(image_version(cfg.engine.image))
            problem = rules.lmcache_reads_rds_max_chunks(
                str(lmcache_rbln) if lmcache_rbln else None, tier.rds_max_chunks
            )
            if problem:
                yield Issue(
                    key("engine.image"),
                    f"{cfg.engine.image} ships lmcache-rbln {lmcache_rbln}: {problem}",
                    "lmcache-reads-rds-max-chunks",
                )
    if tier.mode == "cpu":
        limit = sizing.parse_quantity(cfg.prefill.resources.memory)
        if tier.cpu_size_gib * sizing.GIB >= limit:
            yield Issue(
                key("kvTier.cpuSizeGib"),
                f"the CPU KV tier of {tier.cpu_size_gib:g} GiB does not fit in the prefill memory limit "
                f"{cfg.prefill.resources.memory} (prefill.resources.memory): raise the limit or shrink the tier.",
            )


def rule_roles_agree(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    if cfg.topology != "pd" or cfg.prefill.replicas == 0:
        return
    prefill = role_serving(cfg.engine, cfg.prefill)
    decode = role_serving(cfg.engine, cfg.decode)

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


def rule_pd_wiring(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
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
    decode = role_serving(cfg.engine, cfg.decode)
    problem = rules.pool_target_ports_fit(
        len(pool_ports(cfg).target),
        ports_name="the stack's InferencePool: one per DP rank of a decode pod",
        fix="Lower decode.dataParallelSizeLocal (or decode.dataParallelSize) to at most "
        f"{sizing.MAX_POOL_TARGET_PORTS} ranks per pod.",
    )
    if problem:
        yield Issue(key("decode.dataParallelSizeLocal"), problem, "inference-pool-wiring")
    if cfg.topology == "pd":
        sidecar = sidecar_ports(cfg.decode)
        used: dict[int, str] = {}
        groups = [
            ("decode.sidecar.port", sidecar),
            ("decode.port", decode.rank_ports),
            ("decode.dataParallelRpcPort", [cfg.decode.data_parallel_rpc_port]),
            ("engine.nixlSideChannelPort", decode.side_channel_ports),
        ]
        for name, ports in groups:
            for port in ports:
                if port in used:
                    yield Issue(
                        key(name),
                        f"port {port} is used by both {used[port]} and {name} in the decode pod: "
                        f"choose ranges that do not overlap (sidecar 8000-8003, ranks 8200-8203).",
                    )
                used.setdefault(port, name)
        if cfg.router.decider == "prefix-based":
            problem = rules.pd_decider_fires(
                cfg.router.non_cached_tokens,
                tokens_name="router.nonCachedTokens",
                always_name="router.decider always-disagg",
            )
            if problem:
                yield Issue(key("router.nonCachedTokens"), problem, "router-pd-profiles")
    if not cfg.router.auto_tune:
        for (block, batched, sub_block), names in reuse_units(cfg).items():
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
            )
            if problem:
                yield Issue(key("router.blockSizeTokens"), problem, "router-block-size")


def reuse_units(cfg: StackConfig) -> dict[tuple[int, int, bool], dict[str, str]]:
    """The engine roles by (block size, max-num-batched-tokens, sub-block caching), each with the key its block size
    comes from: what the router's prefix index has to match."""
    units: dict[tuple[int, int, bool], dict[str, str]] = {}
    engine = cfg.engine
    for name, role in cfg.engine_roles():
        unit = (role.block_size or engine.block_size, engine.max_num_batched_tokens, engine.sub_block_cache)
        units.setdefault(unit, {})[name] = f"{name}.blockSize" if role.block_size else "engine.blockSize"
    return units


def rule_pool_endpoints(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """Every endpoint the EPP makes of an engine pod leads to a port it serves on, and each pod has one: the render
    declares the target ports each pod serves on as its active ports (core.labels), so what is left to refuse is a
    role serving on none of the pool's targetPorts."""
    ports = pool_ports(cfg)
    sidecar = cfg.topology == "pd"
    for name, _ in cfg.engine_roles():
        field = "decode.sidecar.port" if sidecar and name == "decode" else f"{name}.port"
        targets_are = (
            "the decode sidecar's: decode.sidecar.port and up" if sidecar else "the decode ranks: decode.port and up"
        )
        problem = rules.pool_endpoints_serve(
            "the stack's InferencePool",
            f"every {name} pod",
            ports.target,
            ports.serving[name],
            ports.active(name),
            serving_name=f"{field} and its DP ranks",
            active_name="active-ports annotations",
            fix=f"Set {field} to one of the target ports {ports.target} ({targets_are}).",
        )
        if problem:
            yield Issue(key(field), problem, "pool-endpoints-serve")


def rendered_sidecar_args(cfg: StackConfig) -> list[str]:
    """The decode sidecar's flags as objects.stack renders them (the pool it allowlists is the stack's own)."""
    return serving.sidecar_args(
        cfg.decode, pool_namespace=cfg.namespace, pool_name=labels.inference_pool_name(cfg.name)
    )


def rule_router_images(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """The EPP and sidecar pins know every feature their render uses (the facts: core/versions/router.py); the
    features are read from the render itself, so a plugin or flag added to the render is judged too."""
    epp = cfg.router.image
    problem = rules.image_has_features(
        epp,
        image_version(epp),
        router_versions.epp_features_used(routing.endpoint_picker_config(cfg.router, cfg.topology)),
        image_name="router.image",
    )
    if problem:
        yield Issue(key("router.image"), problem, "router-images-have-features")
    if cfg.topology != "pd":
        return
    sidecar = cfg.decode.sidecar.image
    problem = rules.image_has_features(
        sidecar,
        image_version(sidecar),
        router_versions.sidecar_features_used(rendered_sidecar_args(cfg)),
        image_name="decode.sidecar.image",
    )
    if problem:
        yield Issue(key("decode.sidecar.image"), problem, "router-images-have-features")


def _sidecar_ssrf(cfg: StackConfig) -> tuple[dict[str, Any], str | None]:
    """What the SSRF rules judge of the rendered sidecar: its image and version, whether the protection is on and
    which pool it allowlists, the pool that fronts it, whether the pin can protect."""
    image = cfg.decode.sidecar.image
    flags = router_versions.sidecar_flags(rendered_sidecar_args(cfg))
    return dict(
        image=image,
        pinned=image_version(image),
        protected=router_versions.ssrf_protection_on(flags),
        can_protect=router_versions.sidecar_can_protect(image_version(image)),
        since=router_versions.SSRF_ALLOWLIST.since,
    ), router_versions.ssrf_pool(flags)


def rule_sidecar_ssrf(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """The P/D sidecar runs with SSRF protection from the stack's own InferencePool wherever its pin can."""
    if cfg.topology != "pd":
        return
    judged, pool = _sidecar_ssrf(cfg)
    own = f"{cfg.namespace}/{labels.inference_pool_name(cfg.name)}"
    problem = rules.sidecar_ssrf_protection(**judged, pool=pool, fronting=[own], fix_pool=own)
    if problem:
        yield Issue(key("decode.sidecar.image"), problem, "sidecar-ssrf-protection")


def _router_field(settings: Router, problem: epp_schema.Problem) -> str:
    """The field a problem of the rendered EndpointPickerConfig comes from: a `router.pluginParameters` entry, the
    router field that generates that parameter, or else the image (the program at that version reads it so)."""
    if problem.plugin_type and problem.parameter:
        params = typing.cast(dict[str, Any], settings.plugin_parameters.get(problem.plugin_type, {}))  # an object
        if problem.parameter in params:
            return f"router.pluginParameters.{problem.plugin_type}.{problem.parameter}"
        return routing.parameter_fields(settings).get((problem.plugin_type, problem.parameter), "router.image")
    return "router.image"


def rule_router_plugin_parameters(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """`router.pluginParameters` adds to what the render declares; it may not add a plugin or redefine a
    generated parameter (the gates would judge one value and the EPP read another)."""
    declared = {
        p["type"]
        for p in routing.endpoint_picker_config(cfg.router.model_copy(update={"plugin_parameters": {}}), cfg.topology)[
            "plugins"
        ]
    }
    generated = routing.parameter_fields(cfg.router)
    for plugin_type, params in cfg.router.plugin_parameters.items():
        if plugin_type not in declared:
            yield Issue(
                key(f"router.pluginParameters.{plugin_type}"),
                f"plugin type {plugin_type!r} is not in this stack's EndpointPickerConfig (topology "
                f"{cfg.topology!r} declares {', '.join(sorted(declared))}): its parameters would configure "
                f"nothing. Use one of those types.",
            )
            continue
        for name in typing.cast(dict[str, Any], params):  # an object, by the config's own check
            field = generated.get((plugin_type, name))
            if field:
                yield Issue(
                    key(f"router.pluginParameters.{plugin_type}.{name}"),
                    f"{name} of {plugin_type} is generated by the program from {field}, where the gates "
                    f"check it. Set {field} instead.",
                )


def missing_features_of(image: str, used: list[Feature]) -> list[Feature]:
    """The features an image's tag is too old for ([] for a tag that is no version: image hygiene judges it)."""
    pinned = image_version(image)
    return missing_features(pinned, used) if pinned else []


def rule_router_schema(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """The pinned EPP and sidecar accept the rendered EndpointPickerConfig and flags, judged by their schema
    at that version (core/versions/data) as strictly as the programs themselves."""
    image = cfg.router.image
    config = routing.endpoint_picker_config(cfg.router, cfg.topology)
    # A pin older than a feature is reported once, by rule_router_images, naming the feature.
    too_old = missing_features_of(image, router_versions.epp_features_used(config))
    data = None if too_old else epp_schema.data_for("epp", image_version(image))
    if data:
        for problem in epp_schema.check_epp_config(config, data):
            yield Issue(
                key(_router_field(cfg.router, problem)),
                rules.program_refuses(
                    f"the EPP {data['version']}",
                    image,
                    f"{problem.path} of the rendered EndpointPickerConfig",
                    problem.message,
                    data_source=f"core/versions/data/epp-v{data['version']}.json",
                    fix="Remove or correct the parameter, or pin an EPP that has it.",
                ),
                "router-config-schema",
            )
    if cfg.topology != "pd":
        return
    sidecar = cfg.decode.sidecar.image
    args = rendered_sidecar_args(cfg)
    too_old = missing_features_of(sidecar, router_versions.sidecar_features_used(args))
    data = None if too_old else epp_schema.data_for("sidecar", image_version(sidecar))
    if not data:
        return
    for problem in epp_schema.check_sidecar_args(args, data):
        yield Issue(
            key("decode.sidecar.image"),
            rules.program_refuses(
                f"the P/D sidecar {data['version']}",
                sidecar,
                f"flag {problem.path}",
                problem.message,
                data_source=f"core/versions/data/sidecar-v{data['version']}.json",
                fix="Pin a sidecar that has the flag.",
            ),
            "router-config-schema",
        )


def rule_groups(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    groups = cfg.placement.groups
    for name, role in cfg.engine_roles():
        if role.replicas % groups and not role.autoscaled:  # autoscaled: its bounds, in rule_autoscaling
            yield Issue(
                key(f"{name}.replicas"),
                f"{name}.replicas {role.replicas} cannot be split evenly over placement.groups {groups} node "
                f"groups: use a multiple of {groups}.",
            )


def _flag_name(token: str) -> str:
    flag = token.split("=", 1)[0]
    return serving.FLAG_ALIASES.get(flag, flag)


def rule_overrides(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """`extraArgs`, `extraEnv` and `kvTier.extraConfig` add to what the program generates; they may not
    redefine it, or the gates would have judged a value the engine never sees."""
    for name, role in (("prefill", cfg.prefill), ("decode", cfg.decode)):
        for index, token in enumerate(role.extra_args):
            flag = _flag_name(token)
            if flag in serving.FLAG_FIELDS:
                field = serving.FLAG_FIELDS[flag].format(role=name)
                yield Issue(
                    key(f"{name}.extraArgs[{index}]"),
                    f"{token!r} redefines {flag}, which the program generates from {field}: the gates would "
                    f"check one value and the engine run another. Set {field} instead.",
                )
        for env_name, value in role.extra_env.items():
            if env_name in serving.ENV_FIELDS:
                env_field = serving.ENV_FIELDS[env_name]
                fix = (
                    f"Set {env_field.format(role=name)} instead."
                    if env_field
                    else "It is fixed by the design; remove it."
                )
                yield Issue(
                    key(f"{name}.extraEnv.{env_name}"),
                    f"{env_name} is generated by the program, and a second entry of one name is refused by the "
                    f"API server (duplicate entries for key [name={env_name!r}]). {fix}",
                )
                continue
            problem = rules.literal_secret(env_name, str(value))
            if problem:
                yield Issue(key(f"{name}.extraEnv.{env_name}"), problem, "no-literal-secrets")
    for annotation in cfg.engine.pod_annotations:
        if annotation in router_versions.every_active_ports_annotation():
            yield Issue(
                key("engine.podAnnotations"),
                f"{annotation!r} is written by the program: the target ports of the InferencePool each engine "
                f"pod serves on (from prefill.port, decode.sidecar.port and the DP ranks), which the EPP makes "
                f"its endpoints of; the value here would be replaced. Remove it.",
            )
    for extra_key in cfg.kv_tier.extra_config:
        if extra_key in serving.EXTRA_CONFIG_FIELDS:
            field = serving.EXTRA_CONFIG_FIELDS[extra_key]
            yield Issue(
                key(f"kvTier.extraConfig.{extra_key}"),
                f"{extra_key} is set by the program from {field}, where the RDS memory budget checks it; "
                f"here it would silently replace the checked value. Set {field} instead.",
            )


def rule_vllm_args(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """Each role's rendered `vllm serve` argv (generated + extraArgs) must parse with vLLM's own options
    (core.versions.vllm_args); a refusal is reported at the extraArgs entries it is about."""
    if not vllm_args.judges(cfg.engine.image):
        return
    roles = dict(cfg.engine_roles())
    for name, command in engine_commands(cfg, facts).items():
        verdict = vllm_args.judge(command.args)
        if verdict is None:
            continue
        positions = vllm_args.where(verdict, list(roles[name].extra_args))
        for path in [f"{name}.extraArgs[{i}]" for i in positions] or [name]:
            yield Issue(key(path), vllm_args.refusal(verdict), "vllm-args-known")


def rule_lmcache_names(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """LMCACHE_* names lmcache does not read (ignored silently), and top-level LMCache keys in kvTier.extraConfig."""
    for name, role in cfg.engine_roles():
        for env_name in role.extra_env:
            problem = lmcache_facts.unknown_env(env_name)
            if problem:
                yield Issue(key(f"{name}.extraEnv.{env_name}"), problem, "lmcache-env-known")
    for extra_key in cfg.kv_tier.extra_config:
        problem = lmcache_facts.misplaced_extra_config_key(extra_key)
        if problem:
            yield Issue(key(f"kvTier.extraConfig.{extra_key}"), problem, "lmcache-env-known")


def rule_engine_image(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """The engine image must be at least the first vllm-rbln release of every flag, connector and env var that either
    role's rendered command uses (core.versions.engine)."""
    image = cfg.engine.image
    if not engine_versions.is_engine_image(image):
        return
    used: set[Feature] = set()
    for command in engine_commands(cfg, facts).values():
        used.update(
            engine_versions.features_used(
                engine_versions.flag_names(command.args),
                serving.connector_classes(serving.kv_transfer_in(command.args)),
                command.env,
            )
        )
    problem = rules.image_has_features(image, image_version(image), used, image_name=engine_versions.VLLM_RBLN)
    if problem:
        yield Issue(key("engine.image"), problem, "engine-image-has-features")


def rule_weights(cfg: StackConfig, *, hf_token_set: bool = False) -> Iterable[Issue]:
    """A download fits its volume, is pinned in prod, and has its token when the repositories are gated."""
    settings = cfg.weights
    if settings.source != "download":
        return
    draft = weights.draft_model(cfg)
    needed = weights.needed_bytes(cfg.model.name, draft)
    if needed is not None:
        problem = rules.weights_volume_fits(
            int(sizing.parse_quantity(settings.size)),
            needed,
            weights.HEADROOM,
            size_name="weights.size",
            size_text=settings.size,
            what=" + ".join([cfg.model.name] + ([draft] if draft else [])),
        )
        if problem:
            yield Issue(key("weights.size"), problem)
    if cfg.environment == "prod":
        pinned = [("weights.revision", settings.revision, cfg.model.name)]
        if draft:
            pinned.append(("weights.draftRevision", settings.draft_revision, draft))
        for name, revision, repository in pinned:
            problem = rules.revision_pinned(revision, revision_name=name, repository=repository)
            if problem:
                yield Issue(key(name), problem)
    problem = rules.gated_download_token(
        settings.gated,
        hf_token_set or settings.token_secret_exists,
        secret=cfg.hf_token_secret,
        token_name=key("hfToken"),
        exists_name="weights.tokenSecretExists",
    )
    if problem:
        yield Issue(key("weights.gated"), problem)


def rule_autoscaling(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """An autoscaled role: bounds the autoscaler can keep, split over the node groups, held by the site at the
    maximum, a rollout that survives a changing count, and a signal the pinned images serve and Prometheus scrapes."""
    if cfg.prefill.autoscaling is not None and "prefill" not in dict(cfg.engine_roles()):
        yield Issue(
            key("prefill.autoscaling"),
            f"prefill.autoscaling is set but this stack runs no prefill pods (topology {cfg.topology!r}, "
            f"prefill.replicas {cfg.prefill.replicas}): nothing would be scaled. Remove it, or use topology "
            f"'pd' with prefill pods.",
        )
    scalings = autoscaling.role_scalings(cfg)
    if not scalings:
        return
    groups = cfg.placement.groups
    for name, scale in scalings.items():
        base = f"{name}.autoscaling"
        min_name, max_name = f"{base}.minReplicas", f"{base}.maxReplicas"
        if "replicas" in getattr(cfg, name).model_fields_set:
            yield Issue(
                key(f"{name}.replicas"),
                f"{name}.replicas is left to the autoscaler when {base} is set (it keeps the Deployment between "
                f"{min_name} {scale.min_replicas} and {max_name} {scale.max_replicas}): the value here would "
                f"be ignored. Remove it.",
            )
        problem = rules.autoscaling_bounds(
            name, scale.min_replicas, scale.max_replicas, min_name=min_name, max_name=max_name
        )
        if problem:
            yield Issue(key(min_name), problem, "autoscaling-bounds")
        elif groups > 1:
            problem = rules.autoscaling_groups_divide(
                name,
                scale.min_replicas,
                scale.max_replicas,
                groups,
                min_name=min_name,
                max_name=max_name,
                groups_name="placement.groups",
            )
            if problem:
                yield Issue(key(min_name if scale.min_replicas % groups else max_name), problem, "autoscaling-bounds")
        if cfg.hardware.nodes is not None:
            role = facts.roles[name]
            problem = rules.autoscaling_fits_site(
                name,
                scale.max_replicas,
                role.serving.devices,
                facts.total_devices - role.devices,
                cfg.hardware.nodes,
                cfg.hardware.npus_per_node,
                cfg.placement.spread_roles,
                max_name=max_name,
                nodes_name="hardware.nodes",
                spread_name="placement.spreadRoles",
            )
            if problem:
                yield Issue(key(max_name), problem, "autoscaling-fits-site")
        problem = rules.autoscaling_rollout(name, cfg.rollout.strategy, strategy_name="rollout.strategy")
        if problem:
            yield Issue(key("rollout.strategy"), problem, "autoscaling-rollout")
        signal = scale.signal
        from_epp = signal.source == "epp"
        image = cfg.router.image if from_epp else cfg.engine.image
        problem = rules.autoscaling_signal(
            name,
            scale.metric,
            signal.roles,
            scraped=cfg.observability.pod_monitors,
            series=autoscaling.series_for(signal, cfg.router.image),
            decider_feeds=not from_epp
            or autoscaling.decider_feeds_prefill(cfg.router.decider, cfg.router.non_cached_tokens),
            image=image,
            metric_name=f"{base}.metric",
            fix_scrape=(
                "Set observability.podMonitors true: its PodMonitors are how Prometheus scrapes the engines and the "
                "EPP."
            ),
        )
        if problem:
            yield Issue(key(f"{base}.metric"), problem, "autoscaling-signal")
            continue
        if from_epp or engine_versions.is_engine_image(image):
            feature = autoscaling.signal_feature(signal, cfg.router.image)
            problem = rules.image_has_features(
                image,
                image_version(image),
                [feature] if feature is not None else [],
                image_name="router.image" if from_epp else "engine.image",
            )
            if problem:
                yield Issue(key("router.image" if from_epp else "engine.image"), problem, "autoscaling-signal")


RULES = (
    rule_overrides,
    rule_engine_image,
    rule_vllm_args,
    rule_lmcache_names,
    rule_groups,
    rule_pp_with_dp,
    rule_devices_fit_node,
    rule_pipeline_and_experts,
    rule_block_and_memory,
    rule_kv_tier,
    rule_roles_agree,
    rule_pd_wiring,
    rule_pool_endpoints,
    rule_router_images,
    rule_router_plugin_parameters,
    rule_router_schema,
    rule_sidecar_ssrf,
    rule_autoscaling,
)


def warnings_for(cfg: StackConfig) -> list[Issue]:
    """Advice that does not stop a deployment."""
    advice = []
    if cfg.router.auto_tune:
        for (block, batched, sub_block), names in reuse_units(cfg).items():
            problem = rules.autotune_block_unit(
                block,
                batched,
                sub_block,
                router_prefix="router.",
                engines=f"the {' and '.join(names)} engines",
                sub_block_name="engine.subBlockCache true",
            )
            if problem:
                advice.append(Issue(key("router.autoTune"), problem, "router-autotune-block-unit"))
    if cfg.topology == "pd":
        judged, _pool = _sidecar_ssrf(cfg)
        problem = rules.sidecar_ssrf_capable(**judged, image_name="decode.sidecar.image")
        if problem:
            advice.append(Issue(key("decode.sidecar.image"), problem, "sidecar-ssrf-capable"))
    settings = cfg.weights
    if settings.source == "download" and weights.needed_bytes(cfg.model.name, weights.draft_model(cfg)) is None:
        advice.append(
            Issue(
                key("weights.size"),
                f"the size of {cfg.model.name} (or its draft) is not in core.weights.MODEL_BYTES: "
                f"weights.size {settings.size} is not checked against it.",
            )
        )
    if settings.source == "pvc" and cfg.environment == "prod" and not weights.is_pinned(settings.revision):
        advice.append(
            Issue(
                key("weights.revision"),
                f"weights.revision {settings.revision!r} is not a commit id: the engines serve whatever "
                f"refs/{settings.revision} points at on the pre-loaded PVC {settings.pvc}. Set the commit "
                f"you loaded, so that the engines, the policy pack and a later bump name it.",
            )
        )
    return advice


def validate(cfg: StackConfig, *, hf_token_set: bool = False) -> list[Issue]:
    """Every cross-field rule; `hf_token_set`: the stack file sets the secret `rebel100:hfToken`."""
    issues: list[Issue] = []
    facts = derive(cfg)  # once: every rule reads the same derived facts
    for rule in RULES:
        issues.extend(rule(cfg, facts))
    issues.extend(rule_weights(cfg, hf_token_set=hf_token_set))
    return issues


def plain_secret_issues(plain: Iterable[str]) -> list[Issue]:
    """A secret key (core.keys.SECRET_KEYS) written in plain text in the stack file: refused at its key with the
    command that stores it encrypted. The value is never part of the message (it is not even passed here)."""
    return [
        Issue(
            full,
            f"{full} is a secret but the stack file holds it in plain text (not `secure:`): anyone who can "
            f"read the file or its history has it, and it would be deployed as it is. Delete the line, "
            f"store the value encrypted with `pulumi config set --secret {full} <value>` (`-s STACK`), "
            f"and revoke the exposed one (the value is not shown here).",
        )
        for full in plain
    ]


def load_config(
    raw: dict[str, Any], source: str = "stack configuration", *, plain_secrets: Iterable[str] = ()
) -> StackConfig:
    """Parse and check one stack's config map; raise ConfigError with every problem at once. `plain_secrets`: the
    secret keys the stack file holds in plain text (core.keys.plain_secret_keys), refused first."""
    plain = plain_secret_issues(plain_secrets)
    try:
        cfg = StackConfig.model_validate(namespace_values(raw))
    except pydantic.ValidationError as error:
        raise ConfigError(plain + _pydantic_issues(error), source) from None
    issues = plain + validate(cfg, hf_token_set=key("hfToken") in raw)
    if issues:
        raise ConfigError(issues, source)
    return cfg
