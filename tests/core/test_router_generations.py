"""core.versions.router GENERATIONS: which releases each router generation covers, what the render is for each, and
the gate judging a v0.7.x pin with the v0.7.1 data. The expected values are written out by hand from the sources
(docs/consumers-router.md), not computed by the code under test."""

from __future__ import annotations

import pytest

from core import routing
from core.config import Decode, Sidecar
from core.gate import ConfigError, load_config, warnings_for
from core.versions import Version, epp_schema
from core.versions import router as router_versions
from tests import defaults
from tests.conftest import stack_config

EPP_071 = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"
SIDECAR_071 = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"
GIE_API = "inference.networking.x-k8s.io/v1alpha1"
LEGACY_PORTS = "inference.networking.k8s.io/active-ports"
PORTS = "llm-d.ai/active-ports"


def pinned_07(**router) -> dict:
    """prod-4p4d with the EPP and sidecar of v0.7.1 (as Pulumi.pd-router07.yaml pins them) and more router keys."""
    return {"router": {"image": EPP_071, **router}, "decode": {"sidecar": {"image": SIDECAR_071}}}


def router_07(**fields):
    """The v0.7.1 EPP's router settings, with `fields`."""
    return defaults.router(image=EPP_071, **fields)


def advice_07(field: str, **router) -> list[str]:
    """The gate's advice naming router.`field` for prod-4p4d pinned to v0.7.1 with these router keys."""
    cfg = load_config(stack_config("prod-4p4d", **pinned_07(**router)))
    return [str(a) for a in warnings_for(cfg) if f"router.{field}" in str(a)]


def issues(stack: str = "prod-4p4d", **overrides) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(stack_config(stack, **overrides))
    return [str(issue) for issue in info.value.issues]


@pytest.mark.parametrize(
    "version, name",
    [
        (None, None),
        (Version(0, 3, 2), None),
        (Version(0, 6, 9), None),
        (Version(0, 7, 0), "v0.7"),
        (Version(0, 7, 1), "v0.7"),
        (Version(0, 7, 9), "v0.7"),
        (Version(0, 8, 0), None),
        (Version(0, 8, 9), None),
        (Version(0, 9, 0), "v0.10"),
        (Version(0, 10, 0), "v0.10"),
        (Version(0, 10, 3), "v0.10"),
        (Version(1, 0, 0), "v0.10"),
    ],
)
def test_each_release_belongs_to_the_generation_its_sources_say(version, name):
    found = router_versions.generation(version)
    assert (found.name if found else None) == name


@pytest.mark.parametrize("version", [None, Version(0, 3, 2), Version(0, 8, 0)])
def test_a_pin_in_no_generation_gets_the_newest_render(version):
    assert router_versions.generation_for_pin(version).name == "v0.10"


def test_bounds_of_each_generation():
    v07, v010 = router_versions.GENERATIONS
    assert (v07.first, v07.until) == (Version(0, 7, 0), Version(0, 8, 0))
    assert (v010.first, v010.until) == (Version(0, 9, 0), None)


@pytest.mark.parametrize(
    "version, keys",
    [
        (Version(0, 7, 1), (LEGACY_PORTS,)),
        (Version(0, 10, 0), (PORTS, LEGACY_PORTS)),
        (Version(0, 9, 0), (PORTS, LEGACY_PORTS)),
        (None, (PORTS, LEGACY_PORTS)),
    ],
)
def test_active_ports_annotation_keys_each_epp_reads(version, keys):
    assert router_versions.active_ports_annotations(version) == keys


def test_every_active_ports_key_of_the_supported_epps():
    assert router_versions.every_active_ports_annotation() == (PORTS, LEGACY_PORTS)


def test_every_fact_of_the_table_says_where_it_was_read():
    for generation in router_versions.GENERATIONS:
        for source in (
            generation.bounds,
            generation.prefix_index_source,
            generation.plugins_source,
            generation.engine_port_flag_source,
            generation.active_ports_source,
            *([generation.feature_gates_source] if generation.feature_gates else []),
        ):
            assert "@v" in source, (generation.name, source)
    v07, v010 = router_versions.GENERATIONS
    gie = "sigs.k8s.io/gateway-api-inference-extension@v1.4.0"
    assert f"{gie} pkg/epp/datastore/datastore.go" in v07.active_ports_source
    assert "github.com/llm-d/llm-d-router@v0.10.0 pkg/epp/datastore/datastore.go" in v010.active_ports_source


def test_v0_7_pd_render():
    """As upstream's deploy/config/pd-epp-config.yaml at v0.7.1: the prepareDataPlugins gate (without it the decider
    reads no prefix match and every request is decode-only) and the disagg-headers-handler (without it the prefill
    pick never reaches the sidecar); both found by tests/localsite's first P/D request."""
    assert routing.endpoint_picker_config(router_07(), "pd") == {
        "apiVersion": GIE_API,
        "kind": "EndpointPickerConfig",
        "featureGates": ["prepareDataPlugins"],
        "plugins": [
            {"type": "disagg-headers-handler"},
            {
                "type": "prefix-cache-scorer",
                "parameters": {"blockSizeTokens": 4096, "lruCapacityPerServer": 1024, "autoTune": False},
            },
            {"type": "queue-scorer"},
            {"type": "active-request-scorer"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "max-score-picker"},
            {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": 16}},
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}}},
        ],
        "schedulingProfiles": [
            {
                "name": "prefill",
                "plugins": [
                    {"pluginRef": "prefill-filter"},
                    {"pluginRef": "max-score-picker"},
                    {"pluginRef": "prefix-cache-scorer", "weight": 2},
                    {"pluginRef": "queue-scorer", "weight": 1},
                ],
            },
            {
                "name": "decode",
                "plugins": [
                    {"pluginRef": "decode-filter"},
                    {"pluginRef": "max-score-picker"},
                    {"pluginRef": "prefix-cache-scorer", "weight": 2},
                    {"pluginRef": "queue-scorer", "weight": 1},
                    # The EPP's own in-flight count: decode ranks hold a sequence for a whole answer.
                    {"pluginRef": "active-request-scorer", "weight": 1},
                ],
            },
        ],
    }


def test_v0_7_agg_render():
    settings = router_07(auto_tune=False, block_size_tokens=64, prefix_scorer_weight=3)
    assert routing.endpoint_picker_config(settings, "agg") == {
        "apiVersion": GIE_API,
        "kind": "EndpointPickerConfig",
        "plugins": [
            {
                "type": "prefix-cache-scorer",
                "parameters": {"blockSizeTokens": 64, "lruCapacityPerServer": 1024, "autoTune": False},
            },
            {"type": "queue-scorer"},
            {"type": "max-score-picker"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                    {"pluginRef": "queue-scorer", "weight": 1},
                    {"pluginRef": "max-score-picker"},
                ],
            }
        ],
    }


def test_v0_10_pd_render_keeps_the_producer_and_its_api_version():
    config = routing.endpoint_picker_config(defaults.router(), "pd")
    assert config["apiVersion"] == "llm-d.ai/v1alpha1"
    assert config["plugins"][:2] == [
        {
            "type": "approx-prefix-cache-producer",
            "parameters": {"blockSizeTokens": 4096, "lruCapacityPerServer": 1024, "autoTune": False},
        },
        {"type": "prefix-cache-scorer"},
    ]


def _profile_refs(config: dict) -> dict[str, list[str]]:
    return {p["name"]: [e["pluginRef"] for e in p["plugins"]] for p in config["schedulingProfiles"]}


@pytest.mark.parametrize("image", [EPP_071, defaults.router().image])
def test_load_only_routing_drops_the_prefix_aware_plugins_from_every_profile_and_keeps_the_index(image):
    """router.prefixCache none: no profile weighs a cached prefix (the affinity filter of AGG neither), and the rest
    of each profile and every declared plugin stay, the index the P/D decider reads among them; no-hit-lru-scorer,
    which reads the same index, goes too, declaration and all, and so does the P/D prefill profile's
    token-load-scorer with its producer (its uncached estimate reads the index; AGG's only scorer stays)."""
    for topology in ("pd", "agg"):
        token_load = ("token-load-scorer", "inflight-load-producer") if topology == "pd" else ()
        prefix_aware = ("prefix-cache-scorer", "prefix-cache-affinity-filter", "no-hit-lru-scorer", *token_load)
        weighed = routing.endpoint_picker_config(defaults.router(image=image, no_hit_lru_scorer_weight=1), topology)
        load_only = routing.endpoint_picker_config(
            defaults.router(image=image, prefix_cache="none", no_hit_lru_scorer_weight=1), topology
        )
        assert load_only["plugins"] == [
            p for p in weighed["plugins"] if p["type"] not in ("no-hit-lru-scorer", *token_load)
        ]
        expected = {
            name: [ref for ref in refs if ref not in prefix_aware] for name, refs in _profile_refs(weighed).items()
        }
        assert _profile_refs(load_only) == expected
        assert expected != _profile_refs(weighed), topology  # the default does weigh a prefix
        data = epp_schema.data_for("epp", Version.parse(image.rsplit(":v", 1)[1]))
        assert epp_schema.check_epp_config(load_only, data) == []


@pytest.mark.parametrize("topology, steering", [("pd", "prefix-cache-scorer"), ("agg", "prefix-cache-affinity-filter")])
def test_a_precise_render_adds_the_split_pipeline_and_points_the_prefix_plugins_at_it(topology, steering):
    """router.prefixCache precise (llm-d-router v0.10.0 deploy/config/sim-epp-tokenizer-vllm-http-config.yaml): the
    token-producer calls the EPP pod's tokenizer, the precise producer subscribes to every pod's KV events (pod
    discovery, kv@ topics) and hashes in blockSizeTokens blocks, the endpoint events drive its subscribers, and the
    plugin that steers a pick reads its match info; the profiles and the approximate index (the decider's) stay."""
    settings = defaults.router(prefix_cache="precise", block_size_tokens=128, kv_events_port=6000, tokenizer_port=8100)
    approximate = routing.endpoint_picker_config(defaults.router(block_size_tokens=128), topology, "org/model")
    precise = routing.endpoint_picker_config(settings, topology, "org/model")
    assert precise["plugins"][:3] == [
        {"type": "token-producer", "parameters": {"modelName": "org/model", "vllm": {"url": "http://localhost:8100"}}},
        {"type": "endpoint-notification-source"},
        {
            "type": "precise-prefix-cache-producer",
            "parameters": {
                "tokenProcessorConfig": {"blockSizeTokens": 128},
                "kvEventsConfig": {
                    "topicFilter": "kv@",
                    "discoverPods": True,
                    "podDiscoveryConfig": {"socketPort": 6000},
                },
            },
        },
    ]
    rest = {p.get("name", p["type"]): p for p in precise["plugins"][3:]}
    assert rest[steering]["parameters"]["prefixMatchInfoProducerName"] == "precise-prefix-cache-producer"
    assert [p.get("name", p["type"]) for p in approximate["plugins"]] == list(rest)
    assert precise["dataLayer"] == {
        "sources": [
            {
                "pluginRef": "endpoint-notification-source",
                "extractors": [{"pluginRef": "precise-prefix-cache-producer"}],
            }
        ]
    }
    assert "dataLayer" not in approximate
    assert precise["schedulingProfiles"] == approximate["schedulingProfiles"]
    assert epp_schema.check_epp_config(precise, epp_schema.load("epp", Version(0, 10, 0))) == []


def test_the_precise_parameters_are_the_renders_own():
    """pluginParameters may not redefine what the precise render generates."""
    fields = routing.parameter_fields(defaults.router(prefix_cache="precise"))
    assert fields[("precise-prefix-cache-producer", "tokenProcessorConfig")] == "router.blockSizeTokens"
    assert fields[("precise-prefix-cache-producer", "kvEventsConfig")] == "router.kvEventsPort"
    assert fields[("prefix-cache-scorer", "prefixMatchInfoProducerName")] == "router.prefixCache"
    assert ("prefix-cache-scorer", "prefixMatchInfoProducerName") not in routing.parameter_fields(defaults.router())


def test_api_version_set_by_hand_wins():
    assert routing.endpoint_picker_config(defaults.router(config_api_version=GIE_API), "pd")["apiVersion"] == GIE_API


def test_session_affinity_is_an_agent_identity_and_a_session_scorer_for_each_profile():
    """router.sessionAffinityWeight (llm-d-router v0.10.0 scorer/sessionaffinity/README.md, "PD Disaggregation
    Configuration" with strategy session_id, and requestheader/agentidentity/README.md): the session an agent names
    is read by agent-identity, and each profile has a scorer of its own that binds the endpoint that profile picked."""
    settings = defaults.router(session_affinity_weight=3, session_headers=["x-my-agent", "x-session-id"])
    config = routing.endpoint_picker_config(settings, "pd")
    without = routing.endpoint_picker_config(defaults.router(session_affinity_weight=0), "pd")
    added = config["plugins"][len(without["plugins"]) :]
    assert config["plugins"][: len(without["plugins"])] == without["plugins"]
    scorer = {"strategy": "session_id", "sessionIdConfig": {"sources": [{"attribute": "agent-identity"}]}}
    assert added == [
        {"type": "agent-identity", "parameters": {"additionalSessionHeaders": ["x-my-agent", "x-session-id"]}},
        {
            "name": "session-affinity-prefill",
            "type": "session-affinity-scorer",
            "parameters": {**scorer, "profileName": "prefill"},
        },
        {
            "name": "session-affinity-decode",
            "type": "session-affinity-scorer",
            "parameters": {**scorer, "profileName": "decode"},
        },
    ]
    for profile, before in zip(config["schedulingProfiles"], without["schedulingProfiles"], strict=True):
        assert profile["plugins"] == [
            *before["plugins"],
            {"pluginRef": f"session-affinity-{profile['name']}", "weight": 3},
        ]
    assert epp_schema.check_epp_config(config, epp_schema.load("epp", Version(0, 10, 0))) == []
    agg = routing.endpoint_picker_config(settings, "agg")
    assert [p.get("name") for p in agg["plugins"] if p["type"] == "session-affinity-scorer"] == [
        "session-affinity-default"
    ]
    assert agg["schedulingProfiles"][0]["plugins"][-1] == {"pluginRef": "session-affinity-default", "weight": 3}


def test_the_prefill_profile_counts_requests_in_flight_only_when_weighed():
    """router.prefillActiveRequestScorerWeight: the active-request-scorer the decode profile has, in the prefill
    profile too (a bench option, docs/performance.md); none by default."""
    without = routing.endpoint_picker_config(defaults.router(prefill_token_load_scorer_weight=0), "pd")
    weighed = routing.endpoint_picker_config(
        defaults.router(prefill_active_request_scorer_weight=3, prefill_token_load_scorer_weight=0), "pd"
    )
    assert weighed["plugins"] == without["plugins"]
    prefill, decode = weighed["schedulingProfiles"]
    assert prefill["plugins"] == [
        *without["schedulingProfiles"][0]["plugins"][:-1],
        {"pluginRef": "active-request-scorer", "weight": 3},
        without["schedulingProfiles"][0]["plugins"][-1],
    ]
    assert decode == without["schedulingProfiles"][1]
    assert "active-request-scorer" not in [e["pluginRef"] for e in without["schedulingProfiles"][0]["plugins"]]


def test_the_prefill_profile_weighs_the_tokens_each_engine_has_to_compute():
    """router.prefillTokenLoadScorerWeight (1 by default): token-load-scorer, the prefill scorer of upstream's agentic
    P/D router (llm-d's guides/agentic-serving/router/agentic-serving-gpu.values.yaml), in the prefill profile only,
    declared once with its producer (the EPP creates none for a request's uncached tokens); at 0 neither is
    rendered. AGG keeps its own instance at weight 1."""
    without = routing.endpoint_picker_config(defaults.router(prefill_token_load_scorer_weight=0), "pd")
    assert "token-load-scorer" not in str(without) and "inflight-load-producer" not in str(without)
    assert routing.endpoint_picker_config(defaults.router(), "pd") == routing.endpoint_picker_config(
        defaults.router(prefill_token_load_scorer_weight=1), "pd"
    )
    weighed = routing.endpoint_picker_config(defaults.router(prefill_token_load_scorer_weight=3), "pd")
    types = [p["type"] for p in weighed["plugins"]]
    assert types.count("token-load-scorer") == 1
    after = types.index("active-request-scorer") + 1
    assert types[after : after + 2] == ["inflight-load-producer", "token-load-scorer"]
    assert {"type": "token-load-scorer"} in weighed["plugins"]
    prefill, decode = weighed["schedulingProfiles"]
    assert prefill["plugins"] == [
        *without["schedulingProfiles"][0]["plugins"][:-1],
        {"pluginRef": "token-load-scorer", "weight": 3},
        without["schedulingProfiles"][0]["plugins"][-1],
    ]
    assert decode == without["schedulingProfiles"][1]
    assert epp_schema.check_epp_config(weighed, epp_schema.load("epp", Version(0, 10, 0))) == []
    agg = routing.endpoint_picker_config(defaults.router(prefill_token_load_scorer_weight=3), "agg")
    assert {"pluginRef": "token-load-scorer", "weight": 1} in agg["schedulingProfiles"][0]["plugins"]
    # The load-only baseline: the scorer's uncached estimate reads the prefix index, so it is left out with it.
    load_only = routing.endpoint_picker_config(defaults.router(prefix_cache="none"), "pd")
    assert "token-load-scorer" not in str(load_only) and "inflight-load-producer" not in str(load_only)


def test_token_load_is_left_out_where_the_pin_has_none_and_setting_it_there_is_advice():
    """The v0.7.1 EPP registers no token-load-scorer: the render has none for it (pd-router07 stays valid), and a
    weight set by hand there is advice."""
    assert routing.endpoint_picker_config(router_07(), "pd") == routing.endpoint_picker_config(
        router_07(prefill_token_load_scorer_weight=0), "pd"
    )
    assert "token-load-scorer" not in str(routing.endpoint_picker_config(router_07(), "pd"))
    assert advice_07("prefillTokenLoadScorerWeight") == []
    assert advice_07("prefillTokenLoadScorerWeight", prefillTokenLoadScorerWeight=2) == [
        "rebel100:router.prefillTokenLoadScorerWeight: router.prefillTokenLoadScorerWeight 2 is set, but "
        f"{EPP_071} (router.image) has no token-load-scorer (first in 0.9.0): the render leaves it out, so sessions "
        "that begin at once spread over the prefill engines by a queue read up to a scrape before. Pin 0.9.0 or "
        "later, or remove the setting."
    ]


def test_new_sessions_are_dealt_least_recently_used_first_where_weighed():
    """router.noHitLruScorerWeight (llm-d-router v0.10.0 scorer/nohitlru/README.md; upstream's
    test/perf/config/router-configs/optimized-baseline.yaml weighs it beside the prefix scorer): none by default (it did
    not spread sessions that arrive at once, docs/performance.md); weighed, one instance in both P/D profiles, so one
    LRU of the endpoints either picked for a cold request, before the session scorer; a precise render points it at
    the precise match info; at v0.7 it finds the prefix-cache-scorer by its default name."""
    assert "no-hit-lru-scorer" not in str(routing.endpoint_picker_config(defaults.router(), "pd"))
    config = routing.endpoint_picker_config(defaults.router(no_hit_lru_scorer_weight=1), "pd")
    assert [p for p in config["plugins"] if p["type"] == "no-hit-lru-scorer"] == [{"type": "no-hit-lru-scorer"}]
    for profile in config["schedulingProfiles"]:
        refs = [entry["pluginRef"] for entry in profile["plugins"]]
        assert refs[-2:] == ["no-hit-lru-scorer", f"session-affinity-{profile['name']}"], refs
        assert profile["plugins"][-2] == {"pluginRef": "no-hit-lru-scorer", "weight": 1}
    assert epp_schema.check_epp_config(config, epp_schema.load("epp", Version(0, 10, 0))) == []
    precise = routing.endpoint_picker_config(
        defaults.router(prefix_cache="precise", block_size_tokens=128, no_hit_lru_scorer_weight=1), "pd"
    )
    assert [p for p in precise["plugins"] if p["type"] == "no-hit-lru-scorer"] == [
        {"type": "no-hit-lru-scorer", "parameters": {"prefixMatchInfoProducerName": "precise-prefix-cache-producer"}}
    ]
    assert "no-hit-lru-scorer" not in str(
        routing.endpoint_picker_config(defaults.router(no_hit_lru_scorer_weight=1), "agg")
    )
    v07 = routing.endpoint_picker_config(router_07(no_hit_lru_scorer_weight=2), "pd")
    assert {"type": "no-hit-lru-scorer"} in v07["plugins"]
    assert epp_schema.check_epp_config(v07, epp_schema.load("epp", Version(0, 7, 1))) == []


def test_session_affinity_parameters_are_the_renders_own():
    fields = routing.parameter_fields(defaults.router())
    assert fields[("session-affinity-scorer", "strategy")] == "router.sessionAffinityWeight"
    assert fields[("agent-identity", "additionalSessionHeaders")] == "router.sessionHeaders"
    found = issues("prod-4p4d", router={"pluginParameters": {"session-affinity-scorer": {"profileName": "x"}}})
    assert len(found) == 1 and "Set router.sessionAffinityWeight instead." in found[0], found


def test_session_affinity_is_left_out_where_the_pin_has_none_and_setting_it_there_is_advice():
    """The v0.7.1 EPP has no agent-identity, and its session-affinity-scorer only the pod token a client echoes: the
    render has no session affinity for it (as it has no drain), and a weight set by hand there is advice."""
    assert routing.endpoint_picker_config(router_07(), "pd") == routing.endpoint_picker_config(
        router_07(session_affinity_weight=0), "pd"
    )
    assert load_config(stack_config("prod-4p4d", **pinned_07())).router.session_affinity_weight == 2
    assert advice_07("sessionAffinityWeight", sessionAffinityWeight=3) == [
        "rebel100:router.sessionAffinityWeight: router.sessionAffinityWeight 3 is set, but "
        f"{EPP_071} (router.image) cannot keep a session a client names (agent-identity and session-affinity-scorer's "
        "session_id strategy, first in 0.10.0): the render leaves session affinity out, so the next turn of a "
        "session shorter than a router block goes by load. Pin 0.10.0 or later, or remove the setting."
    ]


@pytest.mark.parametrize("header", ["x session", "", "x-é", "a:b"])
def test_a_session_header_must_be_a_header_name(header):
    found = issues("prod-4p4d", router={"sessionHeaders": [header]})
    assert len(found) == 1 and found[0].startswith(
        f"rebel100:router.sessionHeaders[0]: {header!r} is not valid: an HTTP header name is one or more letters"
    ), found


def test_renders_are_read_by_the_data_of_their_generation():
    v071, v0100 = epp_schema.load("epp", Version(0, 7, 1)), epp_schema.load("epp", Version(0, 10, 0))
    for topology in ("pd", "agg"):
        assert epp_schema.check_epp_config(routing.endpoint_picker_config(router_07(), topology), v071) == []
        assert epp_schema.check_epp_config(routing.endpoint_picker_config(defaults.router(), topology), v0100) == []


def test_generated_parameters_follow_the_generation():
    assert routing.parameter_fields(router_07())[("prefix-cache-scorer", "blockSizeTokens")] == "router.blockSizeTokens"
    fields = routing.parameter_fields(defaults.router())
    assert ("prefix-cache-scorer", "blockSizeTokens") not in fields
    assert fields[("approx-prefix-cache-producer", "autoTune")] == "router.autoTune"


def test_sidecar_flags_of_each_generation():
    """The same flags; SSRF protection only where the sidecar's allowlist reads the GA pool (0.10.0 on)."""
    base = [
        "--port",
        "8000",
        "--vllm-port",
        "8200",
        "--data-parallel-size",
        "4",
        "--kv-connector",
        "nixlv2",
        "--secure-proxy=false",
    ]

    def args(image):
        return defaults.sidecar_args(
            Decode(sidecar=Sidecar(image=image), data_parallel_size=4, port=8200),
            pool_namespace="ns",
            pool_name="s-pool",
        )

    assert args(SIDECAR_071) == base
    assert args(router_versions.SIDECAR_IMAGE) == [
        *base,
        "--enable-ssrf-protection=true",
        "--inference-pool",
        "ns/s-pool",
    ]
    assert args("ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0") == base  # 0.9.0's allowlist: the flat map
    assert args("ghcr.io/llm-d/llm-d-router-disagg-sidecar:latest")[-3:] == [
        "--enable-ssrf-protection=true",
        "--inference-pool",
        "ns/s-pool",
    ]  # no version: the newest's render


def test_a_v0_7_pin_of_pd_passes_the_gate():
    cfg = load_config(stack_config("prod-4p4d", **pinned_07()))
    assert routing.endpoint_picker_config(cfg.router, cfg.topology)["apiVersion"] == GIE_API


def test_a_v0_7_pin_of_agg_passes_the_gate():
    load_config(stack_config("agg", router={"image": EPP_071}))


def test_a_v0_7_pin_is_judged_by_the_v0_7_1_data():
    found = issues(**pinned_07(pluginParameters={"prefix-cache-scorer": {"maxPrefixBlocksToMatch": "all"}}))
    assert found == [
        "rebel100:router.pluginParameters.prefix-cache-scorer.maxPrefixBlocksToMatch: the EPP 0.7.1 "
        + EPP_071
        + " would refuse plugins[1].parameters.maxPrefixBlocksToMatch of the rendered EndpointPickerConfig: json: "
        "cannot unmarshal string into Go struct field maxPrefixBlocksToMatch of type int (its own rule, from "
        "core/versions/data/epp-v0.7.1.json). The pod would crash-loop. Remove or correct the parameter, or pin an "
        "EPP that has it."
    ]


def test_an_unknown_parameter_passes_at_v0_7_as_the_program_ignores_it_and_is_refused_at_v0_10():
    load_config(stack_config("prod-4p4d", **pinned_07(pluginParameters={"prefix-cache-scorer": {"hashSeed": 7}})))
    found = issues("prod-4p4d", router={"pluginParameters": {"prefix-cache-scorer": {"hashSeed": 7}}})
    assert len(found) == 1 and 'json: unknown field "hashSeed"' in found[0], found


def test_the_prefix_index_parameters_are_generated_at_v0_7():
    assert issues(**pinned_07(pluginParameters={"prefix-cache-scorer": {"blockSizeTokens": 64}})) == [
        "rebel100:router.pluginParameters.prefix-cache-scorer.blockSizeTokens: blockSizeTokens of prefix-cache-scorer "
        "is generated by the program from router.blockSizeTokens, where the gates check it. Set "
        "router.blockSizeTokens instead."
    ]


def test_the_v0_10_apiversion_on_a_v0_7_pin_is_refused_at_the_api_version():
    found = issues(**pinned_07(configApiVersion="llm-d.ai/v1alpha1"))
    assert len(found) == 1 and found[0].startswith(
        "rebel100:router.configApiVersion: router.configApiVersion llm-d.ai/v1alpha1 is read only by llm-d EPP 0.9.0 "
        "or later"
    )
    assert (
        f"but router.image {EPP_071} is 0.7.1, whose generation reads inference.networking.x-k8s.io/v1alpha1"
        in (found[0])
    )


def test_a_pin_between_generations_keeps_the_refusal_by_features():
    found = issues(**pinned_07(image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.8.0"))
    assert len(found) == 1 and "plugin type approx-prefix-cache-producer needs llm-d EPP 0.9.0" in found[0]
    found = issues(**pinned_07(image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.6.0"))
    assert len(found) == 1 and "Pin 0.9.0 or later." in found[0]


@pytest.mark.parametrize(
    "version, metric",
    [
        (Version(0, 7, 1), "llm_d_inference_scheduler_disagg_decision_total"),
        (Version(0, 10, 0), "llm_d_epp_disagg_decision_total"),
    ],
)
def test_the_pd_decision_counter_each_disagg_profile_handler_increments(version, metric):
    """Not `..._pd_decision_total`: only the deprecated pd-profile-handler counts there (the dashboard's P/D panel
    stayed empty on the local site until it queried these)."""
    assert router_versions.generation_for_pin(version).decision_metric == metric


@pytest.mark.parametrize(
    "version, env",
    [
        # v0.7.x starts tracing whatever --tracing says (pkg/telemetry/tracing.go): only the sampling ratio is left.
        (Version(0, 7, 1), [{"name": "OTEL_TRACES_SAMPLER_ARG", "value": "0"}]),
        (Version(0, 7, 0), [{"name": "OTEL_TRACES_SAMPLER_ARG", "value": "0"}]),
        # v0.10.0 reads --tracing=false, which the render sets.
        (Version(0, 10, 0), []),
        (None, []),
    ],
)
def test_the_tracing_env_of_each_generation(version, env):
    assert router_versions.tracing_env(version) == env


def test_a_router_outside_its_stack_has_no_block_to_render():
    """`router.blockSizeTokens` null is the engines' block, which only the StackConfig knows: a bare Router is refused
    with how to get a resolved one, not rendered with a block of nobody's."""
    from core.config import Router

    with pytest.raises(ValueError, match=r"router.blockSizeTokens is unresolved.*StackConfig\(\.\.\.\)\.router"):
        routing.endpoint_picker_config(Router(), "pd")
    assert routing.endpoint_picker_config(defaults.router(), "pd")  # resolved: 4096
