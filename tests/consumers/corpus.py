"""EndpointPickerConfigs for the v0.7.1 EPP: good ones, and one fault each (unknown plugin type, unknown or
mistyped parameter, missing reference between plugins, wrong apiVersion or kind, unknown document field).

Each is judged twice, by the data-driven check (core.versions.epp_schema with the v0.7.1 data) and by the real
v0.7.1 EPP (tests/consumers/test_epp.py); the test asserts the two verdicts are the same on every one. The
`note` says what the case is about; no verdict is written here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

API_0_7 = "inference.networking.x-k8s.io/v1alpha1"


def good_pd() -> dict:
    """The P/D shape of the render, in the plugins v0.7.1 has (the render's v0.9+ producers replaced by the
    prefix-cache-scorer's own indexer)."""
    return {
        "apiVersion": API_0_7,
        "kind": "EndpointPickerConfig",
        "plugins": [
            {
                "type": "prefix-cache-scorer",
                "parameters": {"blockSizeTokens": 64, "lruCapacityPerServer": 1024, "autoTune": False},
            },
            {"type": "queue-scorer"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "max-score-picker"},
            {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": 16}},
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}}},
        ],
        "schedulingProfiles": [
            {
                "name": name,
                "plugins": [
                    {"pluginRef": f"{name}-filter"},
                    {"pluginRef": "max-score-picker"},
                    {"pluginRef": "prefix-cache-scorer", "weight": 2},
                    {"pluginRef": "queue-scorer", "weight": 1},
                ],
            }
            for name in ("prefill", "decode")
        ],
    }


def good_agg() -> dict:
    return {
        "apiVersion": API_0_7,
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": "prefix-cache-scorer"}, {"type": "queue-scorer"}, {"type": "max-score-picker"}],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "prefix-cache-scorer", "weight": 2},
                    {"pluginRef": "queue-scorer", "weight": 1},
                    {"pluginRef": "max-score-picker"},
                ],
            }
        ],
    }


def _plugin(config: dict, plugin_type: str) -> dict:
    return next(p for p in config["plugins"] if p["type"] == plugin_type)


def _edit(base: Callable[[], dict], change: Callable[[dict], Any]) -> dict:
    config = copy.deepcopy(base())
    change(config)
    return config


def _set_params(plugin_type: str, params: Any) -> Callable[[dict], None]:
    return lambda c: _plugin(c, plugin_type).__setitem__("parameters", params)


def _add_plugin(plugin: dict) -> Callable[[dict], None]:
    return lambda c: c["plugins"].append(plugin)


def _swap_decider_after_handler(config: dict) -> None:
    decider = _plugin(config, "prefix-based-pd-decider")
    config["plugins"].remove(decider)
    config["plugins"].append(decider)


CASES: dict[str, tuple[str, dict]] = {
    "good-pd": ("the render's P/D shape", good_pd()),
    "good-agg": ("one profile, no handler (the EPP adds its single-profile handler)", good_agg()),
    "good-flat-handler-parameters": (
        "the handler's deprecated flat parameters",
        _edit(good_pd, _set_params("disagg-profile-handler", {"prefillDeciderPluginName": "prefix-based-pd-decider"})),
    ),
    "good-parameter-name-in-other-case": (
        "Go matches parameter names case-insensitively",
        _edit(good_pd, _set_params("prefix-based-pd-decider", {"NonCachedTokens": 16})),
    ),
    "unknown-parameter": (
        "a parameter prefix-cache-scorer does not have",
        _edit(good_pd, _set_params("prefix-cache-scorer", {"blockSizeTokens": 64, "hashSeed": 7})),
    ),
    "unknown-nested-parameter": (
        "a field the handler's deciders do not have",
        _edit(
            good_pd,
            _set_params("disagg-profile-handler", {"deciders": {"prefill": "prefix-based-pd-decider", "decode": "x"}}),
        ),
    ),
    "parameters-of-a-type-that-reads-none": (
        "queue-scorer is created without reading its parameters",
        _edit(good_pd, _set_params("queue-scorer", {"anything": "at all"})),
    ),
    "unknown-plugin-type": (
        "a v0.9+ plugin type",
        _edit(good_pd, _add_plugin({"type": "approx-prefix-cache-producer"})),
    ),
    "misspelt-plugin-type": ("a typo", _edit(good_agg, lambda c: c["plugins"][1].__setitem__("type", "queue-scorrer"))),
    "string-for-integer": (
        "blockSizeTokens as a string",
        _edit(good_pd, _set_params("prefix-cache-scorer", {"blockSizeTokens": "64"})),
    ),
    "string-for-boolean": (
        "autoTune as a string",
        _edit(good_pd, _set_params("prefix-cache-scorer", {"autoTune": "yes"})),
    ),
    "fraction-for-integer": (
        "nonCachedTokens 1.5",
        _edit(good_pd, _set_params("prefix-based-pd-decider", {"nonCachedTokens": 1.5})),
    ),
    "negative-threshold": (
        "nonCachedTokens below zero",
        _edit(good_pd, _set_params("prefix-based-pd-decider", {"nonCachedTokens": -1})),
    ),
    "number-for-nested-string": (
        "deciders.prefill as a number",
        _edit(good_pd, _set_params("disagg-profile-handler", {"deciders": {"prefill": 5}})),
    ),
    "parameters-not-an-object": (
        "a bare number as parameters",
        _edit(good_pd, _set_params("prefix-based-pd-decider", 16)),
    ),
    "profile-references-undeclared-plugin": (
        "a pluginRef to no plugin",
        _edit(
            good_pd,
            lambda c: c["schedulingProfiles"][0]["plugins"].append({"pluginRef": "kv-cache-utilization-scorer"}),
        ),
    ),
    "decider-reference-undeclared": (
        "deciders.prefill names no plugin",
        _edit(good_pd, _set_params("disagg-profile-handler", {"deciders": {"prefill": "always-disagg-pd-decider"}})),
    ),
    "decider-declared-after-handler": (
        "the decider listed after the handler that names it",
        _edit(good_pd, _swap_decider_after_handler),
    ),
    "api-version-of-v0-9": (
        "the llm-d.ai apiVersion",
        _edit(good_pd, lambda c: c.__setitem__("apiVersion", "llm-d.ai/v1alpha1")),
    ),
    "wrong-kind": ("another kind", _edit(good_pd, lambda c: c.__setitem__("kind", "EndpointPickerConfiguration"))),
    "unknown-document-field": (
        "a misspelt top-level field",
        _edit(good_agg, lambda c: c.__setitem__("schedulingProfile", [])),
    ),
    "unknown-plugin-field": (
        "`params` instead of `parameters`",
        _edit(good_agg, lambda c: c["plugins"][0].__setitem__("params", {"blockSizeTokens": 64})),
    ),
    "unknown-profile-plugin-field": (
        "`weigth`",
        _edit(good_agg, lambda c: c["schedulingProfiles"][0]["plugins"][0].__setitem__("weigth", 2)),
    ),
    "string-weight": (
        "weight as a string",
        _edit(good_agg, lambda c: c["schedulingProfiles"][0]["plugins"][0].__setitem__("weight", "2")),
    ),
    "duplicate-plugin-name": ("two plugins named queue-scorer", _edit(good_agg, _add_plugin({"type": "queue-scorer"}))),
}
