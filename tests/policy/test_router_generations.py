"""The pack on a render of each router generation (core/versions/router.py GENERATIONS): the v0.7 render
(pd-router07) judged with the v0.7.1 data, and the prefix-index rules reading the plugin the mounting EPP's
generation keeps its index in (prefix-cache-scorer at v0.7, approx-prefix-cache-producer from v0.9)."""

import pytest

from tests.policy.fixtures import EPP, assert_verdict, epp_config, get, mutate, plugin, run_policy, set_epp_config

EPP_CONFIG_ID = "ConfigMap/rebel100/minimax-m27-epp-config"
GIE_API = "inference.networking.x-k8s.io/v1alpha1"


@pytest.fixture
def v07(renders) -> list[dict]:
    return renders["pd-router07"]


def index_parameters(plugin_type: str, **params):
    def edit(m):
        config = epp_config(m)
        plugin(config, plugin_type)["parameters"].update(params)
        set_epp_config(m, config)

    return edit


def epp_image(image: str):
    def edit(m):
        get(m, "Deployment", EPP)["spec"]["template"]["spec"]["containers"][0]["image"] = image

    return edit


def test_the_v0_7_render_is_what_v0_7_reads(v07):
    config = epp_config(v07)
    assert config["apiVersion"] == GIE_API
    assert config["featureGates"] == ["prepareDataPlugins"]
    assert [p["type"] for p in config["plugins"]][:3] == [
        "disagg-headers-handler",
        "prefix-cache-scorer",
        "queue-scorer",
    ]
    for policy in ("router-images-have-features", "router-config-schema", "router-block-size"):
        assert run_policy(policy, v07) == [], policy


def test_a_v0_7_render_under_a_v0_10_epp_is_refused_by_the_v0_10_data(v07):
    bad = mutate(v07, epp_image("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"))
    found = run_policy("router-config-schema", bad)
    assert found and all(v.resource == EPP_CONFIG_ID for v in found)
    assert any('json: unknown field "blockSizeTokens"' in v.message for v in found), [v.line() for v in found]


def test_block_size_rule_reads_the_v0_7_prefix_index(v07):
    bad = mutate(v07, index_parameters("prefix-cache-scorer", autoTune=False, blockSizeTokens=1000))
    assert_verdict(
        run_policy("router-block-size", bad),
        resource=EPP_CONFIG_ID,
        level="mandatory",
        contains=(
            "plugin prefix-cache-scorer parameters.blockSizeTokens 1000 with autoTune false",
            "Set blockSizeTokens 512",
        ),
    )


def test_autotune_advice_names_the_index_of_each_generation(prod, v07):
    v07 = mutate(v07, index_parameters("prefix-cache-scorer", autoTune=True))
    prod = mutate(prod, index_parameters("approx-prefix-cache-producer", autoTune=True))
    assert_verdict(
        run_policy("router-autotune-block-unit", v07),
        resource=EPP_CONFIG_ID,
        level="advisory",
        contains=("plugin prefix-cache-scorer parameters.autoTune true",),
    )
    assert_verdict(
        run_policy("router-autotune-block-unit", prod),
        resource=EPP_CONFIG_ID,
        level="advisory",
        contains=("plugin approx-prefix-cache-producer parameters.autoTune true",),
    )
