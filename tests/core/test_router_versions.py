"""core.versions.router: the router facts, and the gate refusing EPP and sidecar pins older than the render."""

from __future__ import annotations

import pytest

from core import routing, serving
from core.config import Decode
from core.gate import ConfigError, load_config
from core.versions import Version, image_version
from core.versions import router as router_versions
from tests import defaults
from tests.conftest import stack_config

OLD_EPP = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2"
OLD_SIDECAR = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0"


def problems(stack: str = "prod-4p4d", **overrides) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(stack_config(stack, **overrides))
    return "\n".join(str(issue) for issue in info.value.issues)


def test_defaults_are_the_target_release_under_its_v0_9_names():
    assert defaults.router().image == "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"
    assert Decode().sidecar.image == "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"
    assert image_version(defaults.router().image) == router_versions.TARGET


@pytest.mark.parametrize("topology", ["pd", "agg"])
def test_every_plugin_type_and_the_api_version_of_the_render_has_a_fact(topology):
    config = routing.endpoint_picker_config(defaults.router(), topology)
    used = {f.name for f in router_versions.epp_features_used(config)}
    values = {"session-affinity-scorer strategy session_id"}  # a parameter value with a fact of its own
    assert used == {p["type"] for p in config["plugins"]} | {config["apiVersion"]} | values


def test_every_sidecar_flag_of_the_render_has_a_fact():
    args = defaults.sidecar_args(pool_namespace="ns", pool_name="p")
    used = {f.name for f in router_versions.sidecar_features_used(args)}
    assert used == {name for name in router_versions.flag_names(args)}


def test_facts_name_the_module_of_their_version():
    producer = router_versions.PLUGIN_TYPES["approx-prefix-cache-producer"]
    assert producer.since == Version(0, 9, 0) and producer.source.startswith("github.com/llm-d/llm-d-router@v0.9.0 ")
    handler = router_versions.PLUGIN_TYPES["disagg-profile-handler"]
    assert handler.source.startswith("github.com/llm-d/llm-d-inference-scheduler@v0.7.0 ")


def test_defaults_have_every_feature_of_every_stack():
    for stack in ("dev", "prod-4p4d", "agg", "pd-router07"):
        load_config(stack_config(stack))  # raises on a refusal


def test_old_epp_pin_is_refused_naming_the_missing_features():
    text = problems(router={"image": OLD_EPP})
    assert "rebel100:router.image: ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2 (router.image) is 0.3.2" in text
    assert "plugin type approx-prefix-cache-producer needs llm-d EPP 0.9.0 or later" in text
    assert "apiVersion llm-d.ai/v1alpha1 needs llm-d EPP 0.9.0 or later" in text
    assert "plugin type prefix-based-pd-decider needs llm-d EPP 0.6.0" in text
    assert "Pin 0.9.0 or later." in text


def test_old_image_name_is_judged_by_its_tag_as_the_same_version_line():
    load_config(stack_config("prod-4p4d", router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.9.0"}))
    assert "0.8.0" in problems(router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.8.0"})


def test_old_sidecar_pin_is_refused_naming_the_missing_flags():
    text = problems(decode={"sidecar": {"image": OLD_SIDECAR}})
    assert (
        "rebel100:decode.sidecar.image: ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0 (decode.sidecar.image) is 0.3.0"
        in text
    )
    assert "flag --data-parallel-size needs llm-d P/D sidecar 0.4.0 or later" in text
    assert "flag --kv-connector needs llm-d P/D sidecar 0.7.0 or later" in text


def test_sidecar_between_data_parallel_and_kv_connector_misses_only_kv_connector():
    text = problems(decode={"sidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.6.0"}})
    assert "--kv-connector" in text and "--data-parallel-size" not in text


def test_agg_stack_runs_no_sidecar_so_its_pin_is_not_judged():
    load_config(stack_config("agg", decode={"sidecar": {"image": OLD_SIDECAR}}))


def test_an_unversioned_pin_is_refused_as_undated_and_nothing_else():
    """The EPP's generation would be guessed (the newest): the pin is refused once, as undated; the features of the
    guessed render are not also judged against it."""
    with pytest.raises(ConfigError) as error:
        load_config(
            stack_config("prod-4p4d", router={"image": "ghcr.io/llm-d/llm-d-router-endpoint-picker@sha256:" + "a" * 64})
        )
    assert [(issue.path, issue.policy) for issue in error.value.issues] == [
        ("rebel100:router.image", "image-pin-dated")
    ]


def test_a_parameter_the_pinned_epp_does_not_know_is_refused_at_its_key_in_the_programs_words():
    text = problems(router={"pluginParameters": {"token-load-scorer": {"queueThreshold": 8192}}}, stack="agg")
    assert (
        "rebel100:router.pluginParameters.token-load-scorer.queueThreshold: the EPP 0.10.0 "
        "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 would refuse plugins[3].parameters.queueThreshold of the "
        'rendered EndpointPickerConfig: json: unknown field "queueThreshold"'
    ) in text


def test_a_mistyped_parameter_is_refused_and_a_known_one_passes():
    text = problems(router={"pluginParameters": {"token-load-scorer": {"queueThresholdTokens": "8k"}}}, stack="agg")
    assert "json: cannot unmarshal string into Go struct field queueThresholdTokens of type int" in text
    cfg = load_config(
        stack_config("agg", router={"pluginParameters": {"token-load-scorer": {"queueThresholdTokens": 8192}}})
    )
    config = routing.endpoint_picker_config(cfg.router, cfg.topology)
    assert {"type": "token-load-scorer", "parameters": {"queueThresholdTokens": 8192}} in config["plugins"]


def test_plugin_parameters_may_not_add_a_plugin_or_redefine_a_generated_parameter():
    text = problems(router={"pluginParameters": {"prefix-cache-affinity-filter": {"x": 1}}})
    assert (
        "rebel100:router.pluginParameters.prefix-cache-affinity-filter: plugin type 'prefix-cache-affinity-filter' is "
        "not in this stack's"
    ) in text
    text = problems(router={"pluginParameters": {"prefix-based-pd-decider": {"nonCachedTokens": 0}}})
    assert (
        "rebel100:router.pluginParameters.prefix-based-pd-decider.nonCachedTokens: nonCachedTokens of "
        "prefix-based-pd-decider is generated by the program from router.nonCachedTokens"
    ) in text


def test_a_patch_release_is_judged_by_the_data_of_its_line():
    text = problems(
        router={
            "image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.1",
            "pluginParameters": {"max-score-picker": {"maxNumOfEndpoints": "two"}},
        },
        stack="agg",
    )
    assert "rebel100:router.pluginParameters.max-score-picker.maxNumOfEndpoints: the EPP 0.10.0" in text


def test_plugin_parameters_of_a_type_must_be_an_object():
    text = problems(stack="agg", router={"pluginParameters": {"token-load-scorer": "queueThresholdTokens=8192"}})
    assert "rebel100:router.pluginParameters" in text and "must be an object" in text


# --- the sidecar's SSRF protection ----------------------------------------------------------------


def test_ssrf_flag_facts_and_the_allowlist_fact():
    """--enable-ssrf-protection from v0.4.0 (cmd/pd-sidecar/main.go), --inference-pool from v0.7.0 (options.go; the
    --inference-pool-namespace/-name pair it replaced is gone at v0.9.0); the allowlist reads the GA pool from
    v0.10.0."""
    flag, pool = (
        router_versions.SIDECAR_FLAGS["--enable-ssrf-protection"],
        router_versions.SIDECAR_FLAGS["--inference-pool"],
    )
    assert (flag.since, flag.source) == (
        Version(0, 4, 0),
        "github.com/llm-d/llm-d-inference-scheduler@v0.4.0 cmd/pd-sidecar/main.go",
    )
    assert (pool.since, pool.source) == (
        Version(0, 7, 0),
        "github.com/llm-d/llm-d-inference-scheduler@v0.7.0 pkg/sidecar/proxy/options.go",
    )
    allowlist = router_versions.SSRF_ALLOWLIST
    assert allowlist.since == Version(0, 10, 0)
    assert allowlist.source.startswith("github.com/llm-d/llm-d-router@v0.10.0 pkg/sidecar/proxy/allowlist.go")
    assert [
        router_versions.sidecar_can_protect(v) for v in (None, Version(0, 10, 0), Version(0, 9, 9), Version(0, 7, 1))
    ] == [True, True, False, False]


def test_the_sidecar_flags_as_pflag_reads_them():
    flags = router_versions.sidecar_flags(
        ["--port", "8000", "--enable-ssrf-protection", "--inference-pool", "a/b", "--secure-proxy=false", "x"]
    )
    assert flags == {
        "--port": "8000",
        "--enable-ssrf-protection": "true",
        "--inference-pool": "a/b",
        "--secure-proxy": "false",
    }
    assert router_versions.ssrf_protection_on(flags)
    assert not router_versions.ssrf_protection_on({"--enable-ssrf-protection": "yes"})  # strconv.ParseBool refuses it
    assert not router_versions.ssrf_protection_on({})
    assert router_versions.ssrf_pool(flags) == "a/b"
    assert router_versions.ssrf_pool({"--inference-pool": "b"}) == "default/b"
    assert router_versions.ssrf_pool({}, {"INFERENCE_POOL": "n/p"}) == "n/p"
    assert router_versions.ssrf_pool({"--inference-pool-namespace": "n"}, {"INFERENCE_POOL_NAME": "p"}) == "n/p"
    assert router_versions.ssrf_pool({"--inference-pool-namespace": "n"}) is None


def test_the_sidecar_allowlists_the_stacks_own_pool():
    args = defaults.sidecar_args(pool_namespace="rebel100", pool_name="minimax-m27-pool")
    assert args[-3:] == ["--enable-ssrf-protection=true", "--inference-pool", "rebel100/minimax-m27-pool"]
    from core.labels import inference_pool_name
    from objects.router import pool_name

    assert pool_name("s") == inference_pool_name("s") == "s-pool"


def test_a_sidecar_that_cannot_be_protected_passes_the_gate_with_advice():
    from core.gate import warnings_for

    for image in ("ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1", "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"):
        cfg = load_config(
            stack_config(
                "prod-4p4d",
                router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"} if "0.7.1" in image else {},
                decode={"sidecar": {"image": image}},
            )
        )
        [advice] = [w for w in warnings_for(cfg) if w.policy == "sidecar-ssrf-capable"]
        assert advice.path == "rebel100:decode.sidecar.image"
        assert "Pin 0.10.0 or later: the render then turns --enable-ssrf-protection on" in advice.message
    cfg = load_config(stack_config("prod-4p4d"))
    assert not [w for w in warnings_for(cfg) if w.policy.startswith("sidecar-ssrf")]


def test_the_gate_refuses_a_render_whose_sidecar_is_unprotected(monkeypatch):
    """The gate judges the flags the components render with: a render that dropped the protection is refused."""
    rendered = serving.sidecar_args
    monkeypatch.setattr(serving, "sidecar_args", lambda *a, **k: rendered(*a, **k)[:-3])
    text = problems()
    assert "rebel100:decode.sidecar.image: the sidecar runs without SSRF protection" in text
    assert "--inference-pool rebel100/minimax-m27-pool" in text
