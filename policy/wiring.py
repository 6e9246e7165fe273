"""Rule 6: the stack's resources agree with each other (P/D pairs, sidecar, pool, route, router).

Each object can be valid alone and the stack still broken: a sidecar forwarding to a port no rank
listens on, a pool whose selector misses the prefill pods, a route to a pool that does not exist, a
router whose decider can never fire (P/D silently becomes decode-only), prefill and decode moving KV
blocks of different shapes. These rules read several resources at once, so they are stack policies.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Set as AbstractSet
from typing import Any

from core import labels, routing, rules, sizing
from core.cmdline import parse_flags
from core.selectors import selects
from core.versions import image_version
from core.versions import router as router_versions
from policy.facts import Facts
from policy.read.engines import Engine, engines, kv_connectors, template_engines
from policy.read.env import env_flag_on
from policy.read.flags import command_line
from policy.read.lmcache import SUB_BLOCK_ENV
from policy.read.objects import Finding, api_group, find, name_list, namespace_of, of_kind, resource_id, show_labels
from policy.read.pods import PodTemplate, Sidecar, pod_templates, routing_sidecars
from policy.read.pool import EPP_GRPC_DEFAULT, PoolView, epp_configs, epp_containers, front_ports, pool_view


def _by_namespace(items: list[Engine]) -> dict[str, list[Engine]]:
    grouped: dict[str, list[Engine]] = defaultdict(list)
    for engine in items:
        grouped[engine.template.namespace].append(engine)
    return grouped


def _role(items: list[Engine], role: str) -> list[Engine]:
    return [e for e in items if e.role == role]


# --- prefill and decode agree --------------------------------------------------------------


def pd_roles_agree(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Prefill and decode agree on block size, KV dtype, model and speculative config.

    Each decode engine is compared with every distinct prefill setting of its namespace (not with
    every prefill Deployment), so a stack of many pools reports a difference once per decode."""
    found = []
    for items in _by_namespace(engines(manifests)).values():
        prefill_groups: dict[str, dict[str, list[Engine]]] = defaultdict(lambda: defaultdict(list))
        for prefill in _role(items, "prefill"):
            for field, value in _pd_field_values(prefill):
                prefill_groups[field][rules.spec_text(value)].append(prefill)
        for decode in _role(items, "decode"):
            for field, decode_value in _pd_field_values(decode):
                for group in prefill_groups[field].values():
                    problem = rules.roles_agree(
                        field.lstrip("-"),
                        dict(_pd_field_values(group[0]))[field],
                        decode_value,
                        field_name=field,
                        fix=f"Set the same {field} on both roles.",
                    )
                    if problem:
                        names = name_list(p.resource for p in group)
                        found.append(
                            Finding(decode.resource, f"decode container {decode.name} and prefill ({names}) {problem}")
                        )
    return found


def _speculative(engine: Engine) -> Any:
    """--speculative-config parsed (the raw text when it is not JSON); None when absent."""
    parsed = engine.flags.json("--speculative-config")
    return parsed if parsed is not None else engine.flags.get("--speculative-config")


def _pd_field_values(engine: Engine) -> list[tuple[str, Any]]:
    return [
        ("--block-size", engine.flags.integer("--block-size")),
        ("--kv-cache-dtype", engine.flags.text("--kv-cache-dtype") or "auto"),
        ("model", engine.model),
        ("--speculative-config", _speculative(engine)),
    ]


# --- routing sidecar -----------------------------------------------------------------------

# The sidecar's --kv-connector and the engine connector family it drives.
SIDECAR_CONNECTOR_FAMILY = {"nixl": "nixl", "nixlv2": "nixl", "lmcache": "lmcache"}
REBEL100_CONNECTOR = {"nixl": "RblnNixlConnector", "lmcache": "RBLNLMCacheConnectorV1"}  # each family's on Rebel100


def _families(engine: Engine) -> set[str]:
    return {family for name in kv_connectors(engine.flags) for family in ("nixl", "lmcache") if family in name.lower()}


def sidecar_matches_decode(manifests: list[dict], facts: Facts) -> list[Finding]:
    """The sidecar's --vllm-port, --data-parallel-size and --kv-connector match the engines it fronts."""
    found = []
    prefill_families: dict[str, dict[frozenset, list[Engine]]] = defaultdict(lambda: defaultdict(list))
    for prefill in _role(engines(manifests), "prefill"):
        prefill_families[prefill.template.namespace][frozenset(_families(prefill))].append(prefill)
    for template in pod_templates(manifests):
        sidecars, local = routing_sidecars(template), template_engines(template)
        if not sidecars or not local:
            continue
        engine = local[0]
        for sidecar in sidecars:
            found += _sidecar_findings(template, sidecar, engine, prefill_families[template.namespace])
    return found


def _sidecar_findings(
    template: PodTemplate, sidecar: Sidecar, engine: Engine, prefill_families: dict[frozenset, list[Engine]]
) -> list[Finding]:
    found = []
    where = f"routing sidecar {sidecar.name}"
    if sidecar.integer("--vllm-port") != engine.port:
        found.append(
            Finding(
                template.resource,
                f"{where} arg --vllm-port {sidecar.flags.get('--vllm-port') or '8001 (default)'} does not match the "
                f"decode engine's --port {engine.port} (container {engine.name}): the sidecar forwards rank r to "
                f"--vllm-port + r, where no rank listens. Set --vllm-port {engine.port}.",
            )
        )
    if sidecar.integer("--data-parallel-size") != engine.dp_local:
        found.append(
            Finding(
                template.resource,
                f"{where} arg --data-parallel-size {sidecar.flags.get('--data-parallel-size') or '1 (default)'} does "
                f"not match the decode engine's {engine.dp_local} local ranks (container {engine.name} "
                f"--data-parallel-size-local {engine.dp_local}): the sidecar listens on one port per rank and "
                f"ranks it does not front get no traffic. Set --data-parallel-size {engine.dp_local}.",
            )
        )
    family = SIDECAR_CONNECTOR_FAMILY.get(sidecar.connector)
    if family is None:
        found.append(
            Finding(
                template.resource,
                f"{where} arg --kv-connector {sidecar.connector} is not a connector this pack knows "
                f"({', '.join(sorted(SIDECAR_CONNECTOR_FAMILY))}). Use nixlv2 with a NIXL connector on the engines.",
            )
        )
        return found
    peers: list[tuple[str, list[Engine], AbstractSet[str]]] = [("decode", [engine], _families(engine))]
    peers += [("prefill", group, families) for families, group in prefill_families.items()]
    for role, group, families in peers:
        if family not in families:
            has = ", ".join(kv_connectors(group[0].flags)) or "none"
            who = (
                f"decode container {engine.name}"
                if role == "decode"
                else f"prefill {name_list(p.resource for p in group)} container {group[0].name}"
            )
            found.append(
                Finding(
                    template.resource,
                    f"{where} arg --kv-connector {sidecar.connector} needs a {family.upper()} connector on every "
                    f"engine, but {who} --kv-transfer-config has {has}: the KV "
                    f"transfer handshake fails. Add the {family.upper()} connector ({REBEL100_CONNECTOR[family]} on "
                    "Rebel100) to its --kv-transfer-config.",
                )
            )
    return found


# --- InferencePool ---------------------------------------------------------------------------


def inference_pool_wiring(manifests: list[dict], facts: Facts) -> list[Finding]:
    """The pool selects both roles' pods, targets the ports they serve on, and points at the EPP Service."""
    found = []
    serving = [(t, models) for t in pod_templates(manifests) if (models := {e.model for e in template_engines(t)})]
    for pool in of_kind(manifests, "InferencePool"):
        view, namespace, here = pool_view(pool), namespace_of(pool), resource_id(pool)
        local = [(t, models) for t, models in serving if t.namespace == namespace]
        selected = [(t, models) for t, models in local if selects(view.selector, t.labels)]
        if not selected:
            found.append(
                Finding(
                    here,
                    f"{view.selector_field} {show_labels(view.selector)} selects no engine pod template in namespace "
                    f"{namespace} ({_labels_of([t for t, _ in local]) or 'none found'}): the gateway has no endpoint "
                    "to route to. Use labels that every serving pod carries.",
                )
            )
        else:
            served = set().union(*(models for _, models in selected))
            for role in ("prefill", "decode"):
                of_role = [t for t, models in local if t.role == role and models & served]
                if of_role and not any(t.role == role for t, _ in selected):
                    found.append(
                        Finding(
                            here,
                            f"{view.selector_field} {show_labels(view.selector)} does not select the {role} pod "
                            f"template ({_labels_of(of_role)}): the router's {role}-filter never sees {role} "
                            "endpoints. Select on a label both roles share (llm-d.ai/inference-serving: 'true').",
                        )
                    )
            found += _target_ports(view, here, [t for t, _ in selected])
        found += _endpoint_picker(view, here, namespace, manifests)
    return found


def _labels_of(templates: list[PodTemplate]) -> str:
    """`A, B and 3 more; A has {labels}`: which templates, and the labels of the first as an example."""
    if not templates:
        return ""
    return f"{name_list(t.resource for t in templates)}; {templates[0].resource} has {show_labels(templates[0].labels)}"


def _target_ports(view: PoolView, here: str, selected: list[PodTemplate]) -> list[Finding]:
    """One finding per pool: the ports it lacks and the ports it targets where nothing listens."""
    found = []
    actual = set(view.target_ports)
    problem = rules.pool_target_ports_fit(
        len(view.target_ports), ports_name=view.ports_field, fix="Lower the DP ranks per pod."
    )
    if problem:
        found.append(Finding(here, problem))
    serves = {template.resource: (front_ports(template), bool(routing_sidecars(template))) for template in selected}
    expected = sorted({port for ports, _ in serves.values() for port in ports})
    missing, extra = sorted(set(expected) - actual), sorted(actual - set(expected))
    if not missing and not extra:
        return found
    problems = []
    if missing:
        problems.append(f"lacks {missing}, so the router never sends requests to those ranks")
    if extra:
        problems.append(f"includes {extra}, where none of the selected pods listens, so requests sent there fail")
    listening = "; ".join(
        f"{resource} on {ports} "
        f"({'routing sidecar --port and --data-parallel-size' if sidecar else 'engine --port and ranks'})"
        for resource, (ports, sidecar) in sorted(serves.items())
    )
    found.append(
        Finding(
            here,
            f"{view.ports_field} {sorted(actual)} {' and '.join(problems)} (the selected pods serve: "
            f"{listening}). Set {view.ports_field} to {expected}.",
        )
    )
    return found


def pool_endpoints_serve(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every endpoint the EPP makes of a pod the pool selects (one per target port, or per target port the pod lists
    in its active-ports annotation) leads to a port the pod serves on: the rule is `core.rules.pool_endpoints_serve`,
    the config gate's too."""
    found = []
    templates = [t for t in pod_templates(manifests) if template_engines(t)]
    for pool in of_kind(manifests, "InferencePool"):
        view, namespace = pool_view(pool), namespace_of(pool)
        name = f"InferencePool {namespace}/{(pool.get('metadata') or {}).get('name')}"
        readers = _pool_readers(view, namespace, manifests)
        for template in templates:
            if template.namespace == namespace and selects(view.selector, template.labels):
                found += _endpoints_of(view, name, template, readers)
    return found


def _pool_readers(view: PoolView, namespace: str, manifests: list[dict]) -> list[router_versions.Generation]:
    """The router generations of the EPPs behind the pool (the pods of its endpointPickerRef Service, by their
    image's tag); every generation when the EPP is not among the manifests."""
    service = find(manifests, "Service", namespace, view.epp_name) if view.epp_name else None
    selector = ((service or {}).get("spec") or {}).get("selector") or {}
    images = [
        str(container.get("image") or "")
        for template in pod_templates(manifests)
        if service and template.namespace == namespace and selects(selector, template.labels)
        for container in template.containers()
        if "--pool-name" in parse_flags(command_line(container), go_style=True).values
    ]
    pinned = {g.name: g for g in (router_versions.generation_for_pin(image_version(i)) for i in images)}
    return list(pinned.values()) or list(router_versions.GENERATIONS)


def _endpoints_of(
    view: PoolView, pool: str, template: PodTemplate, readers: list[router_versions.Generation]
) -> list[Finding]:
    """One finding per distinct reading of the pod's annotations by the EPP generations behind the pool, so a pod
    they read alike is reported once, and one only an older EPP misreads names that EPP."""
    serving = front_ports(template)
    how = "routing sidecar --port and --data-parallel-size" if routing_sidecars(template) else "engine --port and ranks"
    served = [port for port in sorted(set(view.target_ports)) if port in serving]
    fix = (
        f"Annotate its pod template with {' and '.join(router_versions.every_active_ports_annotation())}: "
        f'"{labels.active_ports_annotation(served)}" (the target ports it serves on).'
        if served
        else f"Serve it on one of the target ports {sorted(set(view.target_ports))}, or select it with a pool of its "
        f"own."
    )
    readings: dict[tuple[int, ...] | None, tuple[list[str], list[router_versions.Generation]]] = {}
    for generation in readers:
        keys = generation.active_ports
        key, ports = labels.read_active_ports(template.annotations, keys)
        read_keys, alike = readings.setdefault(None if ports is None else tuple(ports), ([], []))
        read_keys += [k for k in ([key] if key else keys) if k not in read_keys]
        alike.append(generation)
    found = []
    for read_ports, (read_keys, alike) in readings.items():
        active_name = (
            " or ".join(read_keys)
            if read_ports is None
            else f"annotation{'s' if len(read_keys) > 1 else ''} {' and '.join(read_keys)}"
        )
        problem = rules.pool_endpoints_serve(
            pool,
            template.resource,
            view.target_ports,
            serving,
            None if read_ports is None else list(read_ports),
            serving_name=how,
            active_name=active_name,
            fix=fix,
        )
        if problem and len(readings) > 1:
            problem = (
                "For "
                + " and ".join(
                    f"the {g.name} EPP, which reads "
                    + (f"only {g.active_ports[0]}" if len(g.active_ports) == 1 else " then ".join(g.active_ports))
                    for g in alike
                )
                + f": {problem}"
            )
        if problem:
            found.append(Finding(template.resource, problem))
    return found


def _endpoint_picker(view: PoolView, here: str, namespace: str, manifests: list[dict]) -> list[Finding]:
    services = [s for s in of_kind(manifests, "Service") if namespace_of(s) == namespace]
    if not view.epp_name:
        return [
            Finding(here, f"{view.epp_field}.name is not set: the pool has no endpoint picker. Name the EPP Service.")
        ]
    service = find(manifests, "Service", namespace, view.epp_name)
    if service is None:
        names = ", ".join(s["metadata"]["name"] for s in services) or "none"
        return [
            Finding(
                here,
                f"{view.epp_field}.name {view.epp_name} names no Service in namespace {namespace} "
                f"(Services: {names}): the gateway cannot reach the router and, with FailClose, rejects "
                f"every request. Set it to the EPP Service's name.",
            )
        ]
    ports = (service.get("spec") or {}).get("ports") or []
    port = next((p for p in ports if p.get("port") == view.epp_port), None)
    if port is None:
        listed = ", ".join(f"{p.get('port')} ({p.get('name', '')})" for p in ports)
        return [
            Finding(
                here,
                f"{view.epp_port_field} {view.epp_port} is not a port of Service "
                f"{namespace}/{view.epp_name} (ports: {listed}). Use the Service's ext-proc port.",
            )
        ]
    grpc = _epp_grpc_port(service, manifests)
    target = port.get("targetPort", port.get("port"))
    if grpc is not None and target not in grpc:
        return [
            Finding(
                here,
                f"{view.epp_port_field} {view.epp_port} reaches targetPort {target} of Service "
                f"{namespace}/{view.epp_name}, but the EPP container serves ext-proc on --grpc-port "
                f"{grpc[0]}: the gateway talks to the wrong listener. Point the pool at the Service port "
                f"whose targetPort is {grpc[0]}.",
            )
        ]
    return []


def _epp_grpc_port(service: dict, manifests: list[dict]) -> list | None:
    """The EPP's ext-proc port (number and port name) in the pods the Service selects; None when not found."""
    selector = (service.get("spec") or {}).get("selector") or {}
    for template in pod_templates(manifests):
        if template.namespace != namespace_of(service) or not selects(selector, template.labels):
            continue
        for container in template.containers():
            flags = parse_flags(command_line(container), go_style=True)
            if "--pool-name" in flags.values or "--grpc-port" in flags.values:
                number = flags.integer("--grpc-port", EPP_GRPC_DEFAULT)
                names = [p.get("name") for p in container.get("ports") or [] if p.get("containerPort") == number]
                return [number, *names]
    return None


# --- HTTPRoute -------------------------------------------------------------------------------


def httproute_backend_exists(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every InferencePool backendRef of an HTTPRoute names a pool that exists, in the API group it has."""
    found = []
    for route in of_kind(manifests, "HTTPRoute"):
        for i, rule in enumerate((route.get("spec") or {}).get("rules") or []):
            for j, ref in enumerate(rule.get("backendRefs") or []):
                if ref.get("kind") != "InferencePool":
                    continue
                field = f"spec.rules[{i}].backendRefs[{j}]"
                namespace = ref.get("namespace") or namespace_of(route)
                pool = find(manifests, "InferencePool", namespace, ref.get("name"))
                if pool is None:
                    pools = (
                        ", ".join(
                            p["metadata"]["name"]
                            for p in of_kind(manifests, "InferencePool")
                            if namespace_of(p) == namespace
                        )
                        or "none"
                    )
                    found.append(
                        Finding(
                            resource_id(route),
                            f"{field} names InferencePool {ref.get('name')}, which does not exist in namespace "
                            f"{namespace} (InferencePools: {pools}): the route has no backend and every request fails. "
                            "Name an existing pool.",
                        )
                    )
                    continue
                group = api_group(pool.get("apiVersion", ""))
                if ref.get("group", "") != group:
                    found.append(
                        Finding(
                            resource_id(route),
                            f"{field} has group {ref.get('group', '(core)')!r} but InferencePool {ref.get('name')} is "
                            f"{pool.get('apiVersion')}: the gateway looks up a kind that does not exist. Set group "
                            f"{group}.",
                        )
                    )
    return found


# --- router (EPP) configuration ------------------------------------------------------------


def _plugins(config: dict) -> dict[str, dict]:
    """Plugins by name (the name defaults to the type)."""
    return {str(p.get("name") or p.get("type")): p for p in config.get("plugins") or [] if isinstance(p, dict)}


def _params(plugin: dict) -> dict:
    return plugin.get("parameters") or {}


ALWAYS_DECIDERS = ("always-disagg-pd-decider",)
THRESHOLD_DECIDERS = ("prefix-based-pd-decider", "prefix-disaggregation-decider")
HANDLERS = ("disagg-profile-handler", "pd-profile-handler")


def router_pd_profiles(manifests: list[dict], facts: Facts) -> list[Finding]:
    """A P/D router config has a profile handler, a decider that can fire, and both profiles."""
    found = []
    pd_namespaces = {
        ns
        for ns, items in _by_namespace(engines(manifests)).items()
        if _role(items, "prefill") and _role(items, "decode")
    }
    for config_map, key, config in epp_configs(manifests):
        if namespace_of(config_map) not in pd_namespaces:
            continue
        here, where = resource_id(config_map), f"data[{key}]"
        plugins = _plugins(config)
        handlers = [p for p in plugins.values() if p.get("type") in HANDLERS]
        if not handlers:
            found.append(
                Finding(
                    here,
                    f"{where} has no {' or '.join(HANDLERS)} plugin although prefill and decode pods "
                    f"run in namespace {namespace_of(config_map)}: every request is served by decode "
                    f"alone and the prefill pods idle. Add disagg-profile-handler with a decider.",
                )
            )
            continue
        handler = handlers[0]
        if handler.get("type") == "disagg-profile-handler":
            found += _decider(here, where, handler, plugins)
        params = _params(handler)
        wanted = [params.get("prefillProfile", "prefill"), params.get("decodeProfile", "decode")]
        profiles = [str(p.get("name")) for p in config.get("schedulingProfiles") or [] if isinstance(p, dict)]
        for name in wanted:
            if name not in profiles:
                found.append(
                    Finding(
                        here,
                        f"{where} schedulingProfiles {profiles} lacks the {name!r} profile the "
                        f"{handler.get('type')} runs: P/D cannot pick a {name} endpoint. Add a "
                        f"{name!r} profile (its filter plus scorers and a picker).",
                    )
                )
    return found


def _decider(here: str, where: str, handler: dict, plugins: dict[str, dict]) -> list[Finding]:
    name = (_params(handler).get("deciders") or {}).get("prefill")
    if not name:
        return [
            Finding(
                here,
                f"{where} disagg-profile-handler has no parameters.deciders.prefill: no request is ever "
                f"prefilled remotely. Name a prefix-based-pd-decider (nonCachedTokens > 0) or "
                f"always-disagg-pd-decider plugin.",
            )
        ]
    decider = plugins.get(str(name))
    if decider is None:
        return [
            Finding(
                here,
                f"{where} disagg-profile-handler parameters.deciders.prefill {name} names no plugin of the "
                f"config ({', '.join(plugins)}). Declare the decider plugin.",
            )
        ]
    if decider.get("type") in THRESHOLD_DECIDERS:
        problem = rules.pd_decider_fires(
            _params(decider).get("nonCachedTokens", 0),
            tokens_name="parameters.nonCachedTokens",
            always_name="always-disagg-pd-decider",
        )
        if problem:
            return [Finding(here, f"{where} plugin {name} ({decider.get('type')}) {problem}")]
    elif decider.get("type") not in ALWAYS_DECIDERS:
        return [
            Finding(
                here,
                f"{where} parameters.deciders.prefill {name} is a {decider.get('type')}, not a P/D decider "
                f"({', '.join(THRESHOLD_DECIDERS + ALWAYS_DECIDERS)}). Point it at a decider plugin.",
            )
        ]
    return []


def _reuse_units(manifests: list[dict], namespace: str) -> dict[tuple[int, int, bool], list[Engine]]:
    """Engines of a namespace by (block size, prefix-reuse unit, sub-block caching)."""
    units: dict[tuple[int, int, bool], list[Engine]] = defaultdict(list)
    for engine in engines(manifests):
        block, batched = engine.flags.integer("--block-size"), engine.flags.integer("--max-num-batched-tokens")
        sub_block = env_flag_on(engine.container, SUB_BLOCK_ENV)
        if engine.template.namespace != namespace or not block or (sub_block and not batched):
            continue
        units[(block, sizing.prefix_reuse_unit(block, batched or block, sub_block), sub_block)].append(engine)
    return units


def _producers(manifests: list[dict]):
    """The plugins that keep the prefix index, of the type the generation of the EPP that mounts the config reads
    (core/versions/router.py GENERATIONS; a config no container mounts: the newest generation's)."""
    for config_map, key, config in epp_configs(manifests):
        images = [str(c.get("image", "")) for _t, c in epp_containers(manifests, config_map)] or [""]
        index_types = {router_versions.generation_for_pin(image_version(image)).prefix_index for image in images}
        for name, plugin in _plugins(config).items():
            if plugin.get("type") in index_types:
                yield config_map, f"data[{key}] plugin {name}", _params(plugin)


def router_block_size(manifests: list[dict], facts: Facts) -> list[Finding]:
    """With autoTune off, the router's blockSizeTokens is a whole number of the engines' prefix-reuse units (not
    judged in a config with a precise producer: core.rules.router_block_size)."""
    found = []
    precise = {id(config_map) for config_map, *_rest in _precise_producers(manifests)}
    for config_map, where, params in _producers(manifests):
        if params.get("autoTune", True) is not False:
            continue
        for (block, unit, sub_block), items in _reuse_units(manifests, namespace_of(config_map)).items():
            problem = rules.router_block_size(
                params.get("blockSizeTokens"),
                block,
                unit,
                sub_block,
                size_name="parameters.blockSizeTokens",
                engines=f"the engines ({name_list(e.resource for e in items)})",
                block_name="--block-size",
                batched_name="--max-num-batched-tokens",
                sub_block_name=f"{SUB_BLOCK_ENV}=1",
                precise=id(config_map) in precise,
            )
            if problem:
                found.append(Finding(resource_id(config_map), f"{where} {problem}"))
    return found


# What llm-d-router v0.10.0 takes when the precise producer's parameters do not say (pkg/kvcache/kvblock/
# token_processor.go defaultBlockSize; pkg/kvevents/pool.go DefaultPodReconcilerConfig).
PRECISE_DEFAULT_BLOCK_TOKENS = 16
PRECISE_DEFAULT_SOCKET_PORT = 5557


def _precise_producers(manifests: list[dict]):
    """(ConfigMap, where, block size, socket port) of each precise-prefix-cache-producer an EPP config declares."""
    for config_map, key, config in epp_configs(manifests):
        for name, plugin in _plugins(config).items():
            if plugin.get("type") != routing.PRECISE_PRODUCER:
                continue
            params = _params(plugin)
            tokens = params.get("tokenProcessorConfig") or {}
            size = tokens.get("blockSizeTokens") or tokens.get("blockSize") or PRECISE_DEFAULT_BLOCK_TOKENS
            discovery = (params.get("kvEventsConfig") or {}).get("podDiscoveryConfig") or {}
            port = discovery.get("socketPort") or PRECISE_DEFAULT_SOCKET_PORT
            yield config_map, f"data[{key}] plugin {name}", size, port


def _publishes_on(engine: Engine, port: object) -> bool:
    """The engine's `--kv-events-config` turns its events on and binds the port the EPP dials (rank 0's)."""
    config = engine.flags.json("--kv-events-config")
    if not isinstance(config, dict) or not config.get("enable_kv_cache_events"):
        return False
    return str(config.get("endpoint", "")).rsplit(":", 1)[-1] == str(port)


def router_precise_prefix_cache(manifests: list[dict], facts: Facts) -> list[Finding]:
    """The precise prefix cache's index is what the engines announce: every engine keeps a prefix cache, publishes
    its KV events where the EPP subscribes, in blocks the EPP's blocks divide."""
    found = []
    for config_map, where, size, port in _precise_producers(manifests):
        here = resource_id(config_map)
        namespace = namespace_of(config_map)
        served = [e for e in engines(manifests) if e.template.namespace == namespace]
        no_cache = [e for e in served if e.flags.has("--no-enable-prefix-caching")]
        if no_cache:
            problem = rules.precise_needs_prefix_caching(
                False, key_name=f"--no-enable-prefix-caching ({name_list(e.resource for e in no_cache)})"
            )
            found.append(Finding(here, f"{where}: {problem}"))
            continue
        silent = [e for e in served if not _publishes_on(e, port)]
        if silent:
            found.append(
                Finding(
                    here,
                    f"{where} subscribes to each engine's KV events on port {port} (podDiscoveryConfig.socketPort), "
                    f"but {name_list(e.resource for e in silent)} publish none there (--kv-events-config with "
                    f"enable_kv_cache_events true and endpoint tcp://*:{port}): the router never learns what they "
                    f"hold. Give every engine that --kv-events-config, or route with the approximate prefix cache.",
                )
            )
        for (block, unit, _sub_block), items in _reuse_units(manifests, namespace).items():
            problem = rules.precise_block_size(
                size,
                block,
                unit,
                size_name="tokenProcessorConfig.blockSizeTokens",
                engines=f"the engines ({name_list(e.resource for e in items)})",
                block_name="--block-size",
            )
            if problem:
                found.append(Finding(here, f"{where} {problem}"))
    return found


def router_autotune_block_unit(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Advice: autoTune makes the router hash --block-size units while the engines reuse sub-blocks (not given in a
    config with a precise producer: core.rules.autotune_block_unit)."""
    found = []
    precise = {id(config_map) for config_map, *_rest in _precise_producers(manifests)}
    for config_map, where, params in _producers(manifests):
        if params.get("autoTune", True) is False:
            continue
        for (block, unit, sub_block), items in _reuse_units(manifests, namespace_of(config_map)).items():
            problem = rules.autotune_block_unit(
                block,
                unit,
                sub_block,
                router_prefix="parameters.",
                engines=f"the engines ({name_list(e.resource for e in items)})",
                sub_block_name=f"{SUB_BLOCK_ENV}=1",
                precise=id(config_map) in precise,
            )
            if problem:
                found.append(Finding(resource_id(config_map), f"{where} {problem}"))
    return found
