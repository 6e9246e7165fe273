"""The llm-d router's EndpointPickerConfig: the P/D plugin set (prefill and decode profiles, a decider)
or the AGG one, from the router section. Plain values only (no Pulumi): the Router component renders it.
"""
from __future__ import annotations

from core.config import Router

# Parameters the render generates, and the router field each comes from (so that a problem with one is reported
# at that field, and `router.pluginParameters` cannot redefine it behind the gates' back).
PARAMETER_FIELDS: dict[tuple[str, str], str] = {
    ("approx-prefix-cache-producer", "blockSizeTokens"): "router.blockSizeTokens",
    ("approx-prefix-cache-producer", "lruCapacityPerServer"): "router.lruCapacityPerServer",
    ("approx-prefix-cache-producer", "autoTune"): "router.autoTune",
    ("prefix-cache-affinity-filter", "peakPrefillThroughput"): "router.peakPrefillThroughput",
    ("prefix-based-pd-decider", "nonCachedTokens"): "router.nonCachedTokens",
    ("disagg-profile-handler", "deciders"): "router.decider",
}


def _prefix_producer(settings: Router) -> dict:
    return {"type": "approx-prefix-cache-producer", "parameters": {
        "blockSizeTokens": settings.block_size_tokens,
        "lruCapacityPerServer": settings.lru_capacity_per_server,
        "autoTune": settings.auto_tune,
    }}


def endpoint_picker_config(settings: Router = Router(), topology: str = "pd") -> dict:
    """The EndpointPickerConfig document: upstream pd-epp-config weights for P/D, the AGG recipe otherwise."""
    if topology == "agg":
        plugins = [
            _prefix_producer(settings),
            {"type": "inflight-load-producer"},
            {"type": "prefix-cache-affinity-filter", "parameters": {"peakPrefillThroughput": settings.peak_prefill_throughput}},
            {"type": "token-load-scorer"},
            {"type": "max-score-picker"},
        ]
        profiles = [{"name": "default", "plugins": [
            {"pluginRef": "prefix-cache-affinity-filter"},
            {"pluginRef": "token-load-scorer", "weight": 1},
            {"pluginRef": "max-score-picker"},
        ]}]
    else:
        decider = f"{settings.decider}-pd-decider"
        decider_plugin = {"type": decider}
        if settings.decider == "prefix-based":
            decider_plugin["parameters"] = {"nonCachedTokens": settings.non_cached_tokens}
        plugins = [
            _prefix_producer(settings),
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "max-score-picker"},
            decider_plugin,
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": decider}}},
        ]

        def profile(name: str) -> dict:
            return {"name": name, "plugins": [
                {"pluginRef": f"{name}-filter"},
                {"pluginRef": "max-score-picker"},
                {"pluginRef": "prefix-cache-scorer", "weight": settings.prefix_scorer_weight},
                {"pluginRef": "queue-scorer", "weight": settings.queue_scorer_weight},
            ]}
        profiles = [profile("prefill"), profile("decode")]
    return {"apiVersion": settings.config_api_version, "kind": "EndpointPickerConfig",
            "plugins": [_with_extra_parameters(p, settings) for p in plugins], "schedulingProfiles": profiles}


def _with_extra_parameters(plugin: dict, settings: Router) -> dict:
    """`router.pluginParameters` of this plugin's type merged into its parameters (the gate refuses a type the
    render does not declare and a parameter the render generates)."""
    extra = settings.plugin_parameters.get(plugin["type"])
    if not extra:
        return plugin
    return {**plugin, "parameters": {**plugin.get("parameters", {}), **extra}}
