"""The llm-d router's EndpointPickerConfig: the P/D plugin set (prefill and decode profiles, a decider)
or the AGG one, from the router section, in the shape the pinned EPP's generation reads (core/versions/router.py
GENERATIONS). Plain values only (no Pulumi): the Router component renders it.
"""

from __future__ import annotations

import copy
from typing import Any

from core.config import Router, StackConfig
from core.versions import epp_schema, image_version
from core.versions import router as router_versions


def without_epp(failure_mode: str) -> str:
    """What users get while no EPP serves, by the pool's failureMode (a sentence)."""
    if failure_mode == "FailOpen":
        return (
            "With failureMode FailOpen the gateway sends each request to a ready pod itself: served, without "
            "cache-aware routing or P/D."
        )
    return f"With failureMode {failure_mode} the gateway answers every request with an error."


# The P/D profiles of both generations: the role's filter, the picker, then the scorers. Decode also counts the
# requests in flight: a decode rank holds its few sequences (maxNumSeqs 1 by default) for a whole answer, and
# queue-scorer sees only waiting requests, so two requests met on one busy rank and the second waited a whole engine
# turn (tests/localsite). Prefill keeps the metrics alone unless router.prefillActiveRequestScorerWeight or
# router.prefillTokenLoadScorerWeight says otherwise (`_weights` leaves out a scorer weighed 0), and no-hit-lru-scorer
# (upstream's least-recently-used pick for a request no endpoint holds a prefix of) only where
# router.noHitLruScorerWeight is set (0 by default). The P/D plugin list declares the last two only where a profile
# weighs them, each with the producers it needs declared (OPTIONAL_SCORERS): token-load-scorer reads a request's
# uncached tokens per endpoint, a data key the EPP has no default producer for (v0.10.0 cmd/epp/runner/runner.go
# RegisterAsDefaultProducer), so it refuses the config unless inflight-load-producer is declared (the local site).
TOKEN_LOAD = "token-load-scorer"
NO_HIT_LRU = "no-hit-lru-scorer"
OPTIONAL_SCORERS: dict[str, tuple[str, ...]] = {NO_HIT_LRU: (), TOKEN_LOAD: ("inflight-load-producer",)}
PD_PROFILES: dict[str, tuple[str, ...]] = {
    "prefill": (
        "prefill-filter",
        "max-score-picker",
        "prefix-cache-scorer",
        "queue-scorer",
        "active-request-scorer",
        TOKEN_LOAD,
        NO_HIT_LRU,
    ),
    "decode": (
        "decode-filter",
        "max-score-picker",
        "prefix-cache-scorer",
        "queue-scorer",
        "active-request-scorer",
        NO_HIT_LRU,
    ),
}


# The plugins that read a prompt's cached prefix (no-hit-lru-scorer too: its cold request is one the index matches
# nowhere), left out of every profile when router.prefixCache is none. Their producer stays declared: the
# prefix-based P/D decider reads the index it keeps.
PREFIX_AWARE = frozenset({"prefix-cache-scorer", "prefix-cache-affinity-filter", NO_HIT_LRU})
# The P/D profiles leave out token-load-scorer too: its estimate of a request's uncached tokens at each endpoint reads
# the same index, and the load-only baseline would place by cache after all. AGG keeps it, its only scorer.
PD_PREFIX_AWARE = PREFIX_AWARE | {TOKEN_LOAD}

# router.prefixCache precise: the token-producer turns each prompt into tokens through the EPP pod's tokenizer
# container, the precise producer hashes them and looks them up in the index it keeps of the engines' KV events (one
# subscriber per endpoint, opened and closed as endpoint-notification-source reports pods), and the PREFIX_AWARE
# plugins read its match info instead of the approximate producer's. The approximate producer stays: the
# prefix-based P/D decider reads only its unnamed key (llm-d-router v0.10.0 profilehandler/disagg/
# prefix_based_pd_decider.go). Upstream's shape: deploy/config/sim-epp-tokenizer-vllm-http-config.yaml and
# test/perf/config/router-configs/precise-prefix.yaml (pod discovery, topic filter "kv@").
TOKEN_PRODUCER = "token-producer"
PRECISE_PRODUCER = "precise-prefix-cache-producer"
ENDPOINT_EVENTS = "endpoint-notification-source"
PRECISE_PLUGINS = (TOKEN_PRODUCER, ENDPOINT_EVENTS, PRECISE_PRODUCER)
KV_EVENTS_TOPIC_PREFIX = "kv@"  # what the EPP subscribes to; vLLM's topic is kv@<pod>@<model>


# router.sessionAffinityWeight > 0: agent-identity reads the session a coding agent names in its own header into a
# request attribute, and one session-affinity-scorer a profile (strategy session_id) scores the endpoint that profile
# picked for the session last: a binding the EPP keeps (evicted after 300 s unused), nothing asked of the client.
# A session shorter than a router block has no prefix score, and without it its next turn went by load
# (docs/performance.md). The attribute also names the request's fairness flow, read only under the flowControl
# feature gate, which the render leaves off (llm-d-router v0.10.0 pkg/epp/requestcontrol/director.go).
AGENT_IDENTITY = "agent-identity"
SESSION_SCORER = "session-affinity-scorer"


def session_scorer_name(profile: str) -> str:
    """The name of the session-affinity-scorer instance of a scheduling profile (one each: a binding per profile)."""
    return f"session-affinity-{profile}"


def generation_of(settings: Router) -> router_versions.Generation:
    """The router generation the render is written for: the pinned EPP image's (by its tag)."""
    return router_versions.generation_for_pin(image_version(settings.image))


def session_affinity_weight(settings: Router) -> int:
    """The weight of the render's session-affinity scorers (router.sessionAffinityWeight), or 0 when the pinned EPP
    cannot keep a session a client names (core/versions/router.py: before v0.10.0): the render then has none."""
    return settings.session_affinity_weight if router_versions.epp_keeps_sessions(image_version(settings.image)) else 0


def prefill_token_load_weight(settings: Router) -> int:
    """The weight of token-load-scorer in the prefill profile (router.prefillTokenLoadScorerWeight), or 0 when the
    pinned EPP has no such scorer (before v0.9.0): the render then has none."""
    if router_versions.epp_counts_prefill_tokens(image_version(settings.image)):
        return settings.prefill_token_load_scorer_weight
    return 0


def epp_drain_seconds(settings: Router) -> int | None:
    """The EPP's `--drain-timeout` in seconds (router.drainSeconds), or None when the pinned EPP has no such flag
    (core/versions/router.py EPP_FLAGS): it then stops on SIGTERM and the render passes no flag."""
    return settings.drain_seconds if router_versions.epp_drains(image_version(settings.image)) else None


def epp_experimental_flag(settings: Router, config: dict[str, Any]) -> str | None:
    """`--allow-experimental-plugins=true` when `config` declares a plugin type the pinned EPP marks Alpha (session
    affinity's two at v0.10.0), without which it exits at start; None otherwise. Judged by the data of the pin, else
    of the newest EPP we hold data for (the render a pin without data gets)."""
    data = epp_schema.data_for("epp", image_version(settings.image)) or epp_schema.load(
        "epp", epp_schema.data_versions("epp")[-1]
    )
    flag = epp_schema.experimental_flag(data)
    return f"{flag}=true" if flag and epp_schema.experimental_problems(config, data, []) else None


def kv_events_topic(served_model: str, pod_ip_env: str) -> str:
    """The topic an engine publishes its KV events under: vLLM's `kv@<pod>@<model>` (the pod by its IP, `$(env)`
    expanded by the kubelet), the model a request names (the EPP hashes a prompt's blocks with it; the pod part is not
    read when the EPP subscribes per pod)."""
    return f"{KV_EVENTS_TOPIC_PREFIX}$({pod_ip_env})@{served_model}"


def tokenizer_url(settings: Router) -> str:
    return f"http://localhost:{settings.tokenizer_port}"


def block_tokens(settings: Router) -> int:
    """The router's block, as the StackConfig it belongs to resolved it (null: the engines' block)."""
    if settings.block_size_tokens is None:
        raise ValueError(
            "router.blockSizeTokens is unresolved: a Router learns its engines' block from its StackConfig; pass "
            "the config's router (StackConfig(...).router)."
        )
    return settings.block_size_tokens


def _generated(settings: Router, model_name: str = "") -> dict[str, dict[str, tuple[str, Any]]]:
    """Parameters the render generates, per plugin type: name -> (the router field it comes from, its value). The
    field is where a problem with it is reported, and `router.pluginParameters` may not redefine it."""
    precise = settings.prefix_cache == "precise"
    match_info = {"prefixMatchInfoProducerName": ("router.prefixCache", PRECISE_PRODUCER)} if precise else {}
    generated: dict[str, dict[str, tuple[str, Any]]] = {
        TOKEN_PRODUCER: {
            "modelName": ("model.name", model_name),
            "vllm": ("router.tokenizerPort", {"url": tokenizer_url(settings)}),
        },
        PRECISE_PRODUCER: {
            "tokenProcessorConfig": ("router.blockSizeTokens", {"blockSizeTokens": block_tokens(settings)}),
            "kvEventsConfig": (
                "router.kvEventsPort",
                {
                    "topicFilter": KV_EVENTS_TOPIC_PREFIX,
                    "discoverPods": True,
                    "podDiscoveryConfig": {"socketPort": settings.kv_events_port},
                },
            ),
        },
        "prefix-cache-scorer": dict(match_info),
        NO_HIT_LRU: dict(match_info),
        "prefix-cache-affinity-filter": {
            "peakPrefillThroughput": ("router.peakPrefillThroughput", settings.peak_prefill_throughput),
            **match_info,
        },
        AGENT_IDENTITY: {"additionalSessionHeaders": ("router.sessionHeaders", list(settings.session_headers))},
        SESSION_SCORER: {
            "strategy": ("router.sessionAffinityWeight", "session_id"),
            "sessionIdConfig": ("router.sessionAffinityWeight", {"sources": [{"attribute": AGENT_IDENTITY}]}),
            "profileName": ("router.sessionAffinityWeight", ""),  # each instance's own profile
        },
        "prefix-based-pd-decider": {"nonCachedTokens": ("router.nonCachedTokens", settings.non_cached_tokens)},
        "disagg-profile-handler": {"deciders": ("router.decider", {"prefill": _decider(settings)})},
    }
    # The approximate index: its own producer at v0.10, the prefix-cache-scorer itself at v0.7.
    generated.setdefault(generation_of(settings).prefix_index, {}).update(
        {
            "blockSizeTokens": ("router.blockSizeTokens", block_tokens(settings)),
            "lruCapacityPerServer": ("router.lruCapacityPerServer", settings.lru_capacity_per_server),
            "autoTune": ("router.autoTune", settings.auto_tune),
        }
    )
    return generated


def parameter_fields(settings: Router) -> dict[tuple[str, str], str]:
    """(plugin type, parameter) -> the router field it is generated from, for the generation `settings` pins."""
    return {
        (plugin_type, name): field
        for plugin_type, params in _generated(settings).items()
        for name, (field, _value) in params.items()
    }


def _decider(settings: Router) -> str:
    return f"{settings.decider}-pd-decider"


def _plugin(plugin_type: str, generated: dict[str, dict[str, tuple[str, Any]]]) -> dict[str, Any]:
    params = generated.get(plugin_type)
    if not params:
        return {"type": plugin_type}
    return {"type": plugin_type, "parameters": {name: value for name, (_field, value) in params.items()}}


def _profile(name: str, plugin_types: tuple[str, ...], settings: Router) -> dict[str, Any]:
    """A scheduling profile of these plugins and its own session-affinity-scorer, less the prefix-aware ones when the
    router weighs load alone and less each scorer its weight turns off. Scorers carry a weight; filters and pickers
    do not."""
    weights = _weights(name, settings)
    prefix_aware = PD_PREFIX_AWARE if name in PD_PROFILES else PREFIX_AWARE
    refs = [
        ref
        for ref in (*plugin_types, session_scorer_name(name))
        if (settings.prefix_cache != "none" or ref not in prefix_aware)
        and not (ref in weights and weights[ref] is None)
    ]
    return {
        "name": name,
        "plugins": [{"pluginRef": ref, **({"weight": weights[ref]} if ref in weights else {})} for ref in refs],
    }


def _weights(profile: str, settings: Router) -> dict[str, int | None]:
    """The weight of each scorer a profile may have; None: a scorer whose field turns it off at 0 is left out.
    token-load-scorer is the AGG profile's only scorer."""
    prefill = profile == "prefill"
    return {
        "prefix-cache-scorer": settings.prefix_scorer_weight,
        "queue-scorer": settings.queue_scorer_weight,
        "active-request-scorer": (settings.prefill_active_request_scorer_weight or None)
        if prefill
        else settings.active_request_scorer_weight,
        TOKEN_LOAD: (prefill_token_load_weight(settings) or None) if prefill else 1,
        NO_HIT_LRU: settings.no_hit_lru_scorer_weight or None,
        session_scorer_name(profile): session_affinity_weight(settings) or None,
    }


def _session_plugins(profiles: list[dict[str, Any]], generated: dict[str, dict[str, tuple[str, Any]]]) -> list[Any]:
    """agent-identity, then a session-affinity-scorer for each profile, binding the endpoint that profile picks."""
    scorer = _plugin(SESSION_SCORER, generated)
    return [
        _plugin(AGENT_IDENTITY, generated),
        *(
            {
                "name": session_scorer_name(profile["name"]),
                **scorer,
                "parameters": {**copy.deepcopy(scorer["parameters"]), "profileName": profile["name"]},
            }
            for profile in profiles
        ),
    ]


def endpoint_picker_config(
    settings: Router = StackConfig().router, topology: str = "pd", model_name: str = ""
) -> dict[str, Any]:
    """The EndpointPickerConfig document: upstream pd-epp-config weights for P/D, the AGG recipe otherwise, with
    the plugins and apiVersion of the pinned EPP's generation. `model_name` (model.name): what the tokenizer
    container serves, which a precise render's token-producer names."""
    gen = generation_of(settings)
    generated = _generated(settings, model_name)
    if topology == "agg":
        types = list(gen.agg_plugins)
        profiles = [_profile("default", gen.agg_profile, settings)]
    else:
        types = [_decider(settings) if t == router_versions.DECIDER else t for t in gen.pd_plugins]
        profiles = [_profile(name, PD_PROFILES[name], settings) for name in PD_PROFILES]
        weighed = {plugin["pluginRef"] for profile in profiles for plugin in profile["plugins"]}
        for scorer, producers in OPTIONAL_SCORERS.items():  # one instance for both profiles (one LRU of their picks)
            if scorer in weighed:
                at = types.index("active-request-scorer") + 1
                types[at:at] = [*producers, scorer]
    precise = settings.prefix_cache == "precise"
    if precise:
        types = [*PRECISE_PLUGINS, *types]
    plugins = [_plugin(t, generated) for t in types]
    if session_affinity_weight(settings):
        plugins += _session_plugins(profiles, generated)
    plugins = [_with_extra_parameters(plugin, settings) for plugin in plugins]
    gates = {"featureGates": list(gen.feature_gates)} if gen.feature_gates and topology != "agg" else {}
    # The endpoint events open and close the precise producer's subscriber of each pod; the metrics source the EPP
    # adds by itself beside a dataLayer that names none (v0.10.0 pkg/epp/config/loader/defaults.go ensureDataLayer).
    data_layer = (
        {"dataLayer": {"sources": [{"pluginRef": ENDPOINT_EVENTS, "extractors": [{"pluginRef": PRECISE_PRODUCER}]}]}}
        if precise
        else {}
    )
    return {
        "apiVersion": settings.config_api_version or gen.api_version,
        "kind": "EndpointPickerConfig",
        **gates,
        "plugins": plugins,
        **data_layer,
        "schedulingProfiles": profiles,
    }


def _with_extra_parameters(plugin: dict[str, Any], settings: Router) -> dict[str, Any]:
    """`router.pluginParameters` of this plugin's type merged into its parameters (the gate refuses a type the
    render does not declare and a parameter the render generates)."""
    extra = settings.plugin_parameters.get(plugin["type"])
    if not isinstance(extra, dict) or not extra:  # an object by the config's own check, when set
        return plugin
    return {**plugin, "parameters": {**plugin.get("parameters", {}), **extra}}
