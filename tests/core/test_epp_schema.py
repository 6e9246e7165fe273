"""core.versions.epp_schema: the EPP's and sidecar's schema as data, and the check as strict as each version."""

from __future__ import annotations

import copy

import pytest

from core import routing
from core.versions import Version, epp_schema
from tests import defaults

V071 = epp_schema.load("epp", Version(0, 7, 1))
V0100 = epp_schema.load("epp", Version(0, 10, 0))


def render(topology: str = "pd", **router) -> dict:
    """The render without session affinity or token-load-scorer unless asked (the tests below count plugins)."""
    base = {"session_affinity_weight": 0, "prefill_token_load_scorer_weight": 0}
    return routing.endpoint_picker_config(defaults.router(**{**base, **router}), topology)


def messages(config: dict, data: dict) -> list[str]:
    return [str(p) for p in epp_schema.check_epp_config(config, data)]


def test_data_is_found_by_major_minor():
    assert epp_schema.data_versions("epp") == [Version(0, 7, 1), Version(0, 10, 0)]
    assert epp_schema.data_for("epp", Version(0, 10, 3))["version"] == "0.10.0"
    assert epp_schema.data_for("epp", Version(0, 8, 0)) is None
    assert epp_schema.data_for("epp", None) is None


@pytest.mark.parametrize("topology", ["pd", "agg"])
def test_render_is_accepted_at_the_target_and_refused_at_0_7_1(topology):
    assert messages(render(topology), V0100) == []
    assert messages(render(topology), V071) == [
        'apiVersion: no kind "EndpointPickerConfig" is registered for version "llm-d.ai/v1alpha1" (this EPP reads '
        "EndpointPickerConfig of inference.networking.x-k8s.io/v1alpha1)"
    ]


def test_at_0_7_1_the_old_api_version_gets_as_far_as_the_unknown_types():
    found = messages(render("pd", config_api_version="inference.networking.x-k8s.io/v1alpha1"), V071)
    assert found == ["plugins[0].type: plugin type 'approx-prefix-cache-producer' is not registered"]


def test_unknown_parameter_is_refused_at_0_10_and_ignored_at_0_7():
    v010 = render("pd", plugin_parameters={"approx-prefix-cache-producer": {"hashSeed": 1}})
    assert messages(v010, V0100) == ['plugins[0].parameters.hashSeed: json: unknown field "hashSeed"']
    v07 = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": "prefix-cache-scorer", "parameters": {"hashSeed": 1}}],
        "schedulingProfiles": [],
    }
    assert messages(v07, V071) == []


def test_parameter_names_match_case_insensitively_as_in_go():
    config = render("pd", plugin_parameters={"token-load-scorer": {}})
    config["plugins"][-2]["parameters"] = {"NONCACHEDTOKENS": 8}
    assert config["plugins"][-2]["type"] == "prefix-based-pd-decider"
    assert messages(config, V0100) == []


def test_wrong_type_and_nested_wrong_type():
    config = render("pd")
    config["plugins"][0]["parameters"]["autoTune"] = "true"
    config["plugins"][-1]["parameters"]["deciders"]["prefill"] = 3
    found = messages(config, V0100)
    assert (
        "plugins[0].parameters.autoTune: json: cannot unmarshal string into Go struct field autoTune of type bool"
        in found
    )
    assert any(
        m.startswith("plugins[8].parameters: fits neither the nested nor the flat parameter format") for m in found
    )


def test_session_affinity_parameters_as_the_v0_10_scorer_decodes_them():
    config = render("pd", session_affinity_weight=1)
    assert messages(config, V0100) == []
    scorer = next(i for i, p in enumerate(config["plugins"]) if p.get("name") == "session-affinity-decode")
    params = config["plugins"][scorer]["parameters"]
    params["strategy"], params["sessionIdConfig"]["evictionTtlSeconds"], params["ttl"] = "sticky", "5m", 1
    assert messages(config, V0100) == [
        f"plugins[{scorer}].parameters.strategy: strategy 'sticky' is not one of 'encoded_endpoint_header', "
        "'session_id'",
        f"plugins[{scorer}].parameters.sessionIdConfig.evictionTtlSeconds: json: cannot unmarshal string into Go "
        "struct field evictionTtlSeconds of type float64",
        f'plugins[{scorer}].parameters.ttl: json: unknown field "ttl"',
    ]


def test_an_alpha_plugin_needs_the_flag_that_allows_it():
    """v0.10.0 pkg/epp/framework/interface/plugin/registry.go ValidatePluginStability, as the site's EPP showed it."""
    config = render("pd", session_affinity_weight=1)
    refused = [str(p) for p in epp_schema.experimental_problems(config, V0100, ["--tracing=false"])]
    assert len(refused) == 3 and refused[0].endswith(
        ".type: plugin 'agent-identity' (type: 'agent-identity') has Alpha stability level, but command line flag "
        "--allow-experimental-plugins is not set"
    )
    assert "plugin 'session-affinity-prefill' (type: 'session-affinity-scorer')" in refused[1]
    for args in (
        ["--allow-experimental-plugins"],
        ["--allow-experimental-plugins=true"],
        ["--allow-experimental-plugins=T"],
    ):
        assert epp_schema.experimental_problems(config, V0100, args) == [], args
    for args in (
        ["--allow-experimental-plugins=false"],
        ["--allow-experimental-plugins", "--allow-experimental-plugins=f"],
    ):
        assert len(epp_schema.experimental_problems(config, V0100, args)) == 3, args
    assert epp_schema.experimental_problems(render("pd"), V0100, []) == []  # every plugin of the rest is Beta
    assert epp_schema.experimental_problems(config, V071, []) == []  # no stability levels before v0.9
    assert epp_schema.experimental_flag(V071) is None


@pytest.mark.parametrize(
    "router, flag",
    [
        ({}, "--allow-experimental-plugins=true"),
        ({"session_affinity_weight": 0}, None),
        ({"image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.11.2"}, "--allow-experimental-plugins=true"),
        ({"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1", "session_affinity_weight": 0}, None),
    ],
)
def test_the_render_allows_alpha_plugins_only_where_it_declares_one(router, flag):
    settings = defaults.router(**router)
    assert routing.epp_experimental_flag(settings, routing.endpoint_picker_config(settings, "pd")) == flag


def test_references_must_name_declared_plugins_and_at_0_7_be_declared_first():
    config = render("pd")
    config["plugins"][-1]["parameters"]["deciders"]["prefill"] = "no-such-decider"
    assert messages(config, V0100) == [
        "plugins[8].parameters.deciders.prefill: a plugin has a dependency on the unregistered plugin no-such-decider"
    ]
    moved = render("pd")
    moved["plugins"].insert(0, moved["plugins"].pop())  # the handler before its decider: fine at 0.10
    assert messages(moved, V0100) == []


def test_a_scorer_whose_data_no_declared_plugin_produces_is_refused_where_the_epp_makes_none_for_it():
    """token-load-scorer reads a request's uncached tokens per endpoint, a key v0.10.0 has no default producer for:
    without a declared inflight-load-producer (of the name the scorer gives, else of its type) the EPP refuses the
    config, in the words the real v0.10.0 EPP logged on the local site. v0.7.1 has no such scorer and no such rule."""
    weighed = render("pd", prefill_token_load_scorer_weight=1)
    assert messages(weighed, V0100) == []
    bare = copy.deepcopy(weighed)
    bare["plugins"] = [p for p in bare["plugins"] if p["type"] != "inflight-load-producer"]
    at = [p["type"] for p in bare["plugins"]].index("token-load-scorer")
    assert messages(bare, V0100) == [
        f"plugins[{at}]: failed to create missing data producers - no default producer found for missing data key "
        "UncachedRequestTokensDataKey/inflight-load-producer, consumed by token-load-scorer"
    ]
    named = copy.deepcopy(weighed)
    producer = [p["type"] for p in named["plugins"]].index("inflight-load-producer")
    named["plugins"][producer]["name"] = "load"  # the producer, named: the scorer must name it
    assert [m.split(": ", 1)[1] for m in messages(named, V0100)] == [
        "failed to create missing data producers - no default producer found for missing data key "
        "UncachedRequestTokensDataKey/inflight-load-producer, consumed by token-load-scorer"
    ]
    named["plugins"][producer + 1]["parameters"] = {"inFlightLoadProducerName": "load"}
    assert messages(named, V0100) == []
    assert messages(render("agg"), V0100) == []  # AGG declares its producer


def test_profile_reference_and_unknown_document_field():
    config = render("agg")
    config["schedulingProfiles"][0]["plugins"].append({"pluginRef": "queue-scorer"})
    config["featureGatez"] = []
    assert messages(config, V0100) == ['featureGatez: strict decoding error: unknown field "featureGatez"']
    del config["featureGatez"]
    assert messages(config, V0100) == [
        "schedulingProfiles[0].plugins[3].pluginRef: schedulingProfiles[default] "
        "references undefined plugin 'queue-scorer'"
    ]


def test_types_whose_factory_reads_no_parameters_accept_any():
    config = render("pd")
    config["plugins"][2]["parameters"] = {"whatever": [1, 2]}
    assert config["plugins"][2]["type"] == "queue-scorer"
    assert messages(config, V0100) == []


@pytest.mark.parametrize("version", [Version(0, 7, 1), Version(0, 10, 0)])
def test_rendered_sidecar_flags_are_known(version):
    args = defaults.sidecar_args(pool_namespace="ns", pool_name="p")
    assert "--enable-ssrf-protection=true" in args
    assert epp_schema.check_sidecar_args(args, epp_schema.load("sidecar", version)) == []


def test_sidecar_flag_checks():
    data = epp_schema.load("sidecar", Version(0, 10, 0))
    args = copy.copy(defaults.sidecar_args(pool_namespace="ns", pool_name="p"))
    assert [str(p) for p in epp_schema.check_sidecar_args([*args, "--connector", "nixlv2"], data)] == [
        "--connector: exits 2: unknown flag: --connector"
    ]
    assert epp_schema.check_sidecar_args(["--data-parallel-size", "four"], data)
    assert epp_schema.check_sidecar_args(["--kv-connector", "lmcache"], data)


def test_document_field_of_the_wrong_type_is_refused():
    config = render("agg")
    config["plugins"] = {}
    assert messages(config, V0100) == [
        "plugins: json: cannot unmarshal object into Go struct field plugins of type slice"
    ]
