"""policy/consumers.py: the router's images know what their render uses, and accept it by their schema."""

import copy

import pytest

from tests.policy.conftest import STACKS
from tests.policy.fixtures import (
    DECODE,
    EPP,
    EPP_CONFIG,
    PREFILL,
    assert_verdict,
    engine,
    epp_config,
    get,
    mutate,
    plugin,
    pod_spec,
    run_policy,
    set_epp_config,
    sidecar,
)

DECODE_ID, EPP_ID, CONFIG_ID = (
    f"Deployment/rebel100/{DECODE}",
    f"Deployment/rebel100/{EPP}",
    f"ConfigMap/rebel100/{EPP_CONFIG}",
)
POLICIES = ("router-images-have-features", "router-config-schema", "image-pin-dated")


def epp_container(m):
    return pod_spec(m, EPP)["containers"][0]


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES)
def test_good_render_passes(renders, stack, policy):
    assert run_policy(policy, renders[stack]) == []


def test_old_epp_image_is_refused_naming_the_feature(prod):
    old = mutate(prod, lambda m: epp_container(m).update(image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2"))
    assert_verdict(
        run_policy("router-images-have-features", old),
        resource=EPP_ID,
        level="mandatory",
        contains=(
            "is 0.3.2",
            "plugin type approx-prefix-cache-producer needs llm-d EPP 0.9.0 or later",
            "flag --drain-timeout needs llm-d EPP 0.10.0 or later (github.com/llm-d/llm-d-router@v0.10.0 "
            "pkg/epp/server/options.go",
            "Pin 0.10.0 or later",
        ),
    )
    assert run_policy("router-config-schema", old) == []  # reported once, by the feature rule


def test_an_epp_given_a_flag_it_does_not_have_is_refused(sessionless):
    """v0.9.0 reads the v0.10 config (without session affinity) but has no --drain-timeout (pflag exits on an unknown
    flag); without the flag it passes."""
    old = mutate(
        sessionless, lambda m: epp_container(m).update(image="ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0")
    )
    assert_verdict(
        run_policy("router-images-have-features", old),
        resource=EPP_ID,
        level="mandatory",
        contains=("is 0.9.0, older than features the render uses: flag --drain-timeout needs llm-d EPP 0.10.0",),
    )
    without = mutate(old, lambda m: epp_container(m)["args"].remove("--drain-timeout=30s"))
    assert run_policy("router-images-have-features", without) == []


def test_old_sidecar_image_is_refused_naming_the_flags(prod):
    old = mutate(prod, lambda m: sidecar(m).update(image="ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0"))
    assert_verdict(
        run_policy("router-images-have-features", old),
        resource=DECODE_ID,
        level="mandatory",
        contains=("flag --data-parallel-size needs llm-d P/D sidecar 0.4.0", "flag --kv-connector needs"),
    )


def test_unknown_parameter_is_refused_with_the_programs_words(prod):
    def edit(m):
        config = epp_config(m)
        plugin(config, "approx-prefix-cache-producer")["parameters"]["blockSizeTokenz"] = 64
        set_epp_config(m, config)

    assert_verdict(
        run_policy("router-config-schema", mutate(prod, edit)),
        resource=CONFIG_ID,
        level="mandatory",
        contains=('json: unknown field "blockSizeTokenz"', "the EPP 0.10.0", "epp-v0.10.0.json"),
    )


def test_wrong_parameter_type_is_refused(prod):
    def edit(m):
        config = epp_config(m)
        plugin(config, "prefix-based-pd-decider")["parameters"]["nonCachedTokens"] = "16"
        set_epp_config(m, config)

    assert_verdict(
        run_policy("router-config-schema", mutate(prod, edit)),
        resource=CONFIG_ID,
        level="mandatory",
        contains=("json: cannot unmarshal string", "nonCachedTokens", "of type int"),
    )


def test_unknown_plugin_type_is_refused(prod):
    def edit(m):
        config = epp_config(m)
        config["plugins"].append({"type": "approx-prefix-cache-scorer"})
        set_epp_config(m, config)

    assert_verdict(
        run_policy("router-config-schema", mutate(prod, edit)),
        resource=CONFIG_ID,
        level="mandatory",
        contains=("plugin type 'approx-prefix-cache-scorer' is not registered",),
    )


def test_an_alpha_plugin_without_the_flag_that_allows_it_is_refused(prod):
    """v0.10.0 exits at start when a configured plugin is Alpha and --allow-experimental-plugins is not set (the site
    showed it: session affinity's agent-identity); the render sets the flag, a hand edit that drops it is refused."""
    edited = mutate(prod, lambda m: epp_container(m)["args"].remove("--allow-experimental-plugins=true"))
    assert_verdict(
        run_policy("router-config-schema", edited),
        resource=EPP_ID,
        level="mandatory",
        contains=(
            "plugin 'agent-identity' (type: 'agent-identity') has Alpha stability level, but command line flag "
            "--allow-experimental-plugins is not set",
            "plugin 'session-affinity-decode' (type: 'session-affinity-scorer') has Alpha stability level",
            "Add --allow-experimental-plugins=true to the EPP's args, or remove the plugins.",
        ),
    )
    off = mutate(edited, lambda m: epp_container(m)["args"].append("--allow-experimental-plugins=false"))
    assert run_policy("router-config-schema", off)
    on = mutate(edited, lambda m: epp_container(m)["args"].append("--allow-experimental-plugins"))
    assert run_policy("router-config-schema", on) == []


def test_unknown_sidecar_flag_is_refused(prod):
    edited = mutate(prod, lambda m: sidecar(m)["args"].append("--connector=nixlv2"))
    assert_verdict(
        run_policy("router-config-schema", edited),
        resource=DECODE_ID,
        level="mandatory",
        contains=("unknown flag: --connector", "the P/D sidecar 0.10.0"),
    )


def test_the_epp_is_found_past_pods_of_another_namespace(prod):
    def elsewhere_first(m):
        m.insert(
            0,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "other"},
                "spec": {"template": {"metadata": {"labels": {}}, "spec": {"containers": [{"name": "web"}]}}},
            },
        )

    old = mutate(
        prod,
        elsewhere_first,
        lambda m: epp_container(m).update(image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2"),
    )
    (violation,) = run_policy("router-images-have-features", old)
    assert violation.resource == EPP_ID


def test_an_epp_too_old_for_the_config_is_named_once_by_the_feature_rule(prod):
    """v0.7.1 has schema data, but the config uses a plugin type it lacks: the feature rule names it, the schema rule
    does not judge the config again with data of a program that cannot run it."""
    old = mutate(prod, lambda m: epp_container(m).update(image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"))
    (violation,) = run_policy("router-images-have-features", old)
    assert "plugin type approx-prefix-cache-producer needs llm-d EPP 0.9.0 or later" in violation.message
    assert run_policy("router-config-schema", old) == []


def test_the_image_findings_name_the_image_and_its_container(prod):
    old = mutate(prod, lambda m: epp_container(m).update(image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2"))
    (violation,) = run_policy("router-images-have-features", old)
    assert violation.message.startswith(
        "ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2 (container epp image) is 0.3.2, older than features the render "
        "uses: "
    ), violation.message
    old = mutate(prod, lambda m: sidecar(m).update(image="ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0"))
    (violation,) = run_policy("router-images-have-features", old)
    assert violation.message.startswith(
        "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0 (container routing-proxy image) is 0.3.0, older than features the "
        "render uses: "
    ), violation.message


@pytest.mark.parametrize(
    "other_image",
    ["ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1", "ghcr.io/llm-d/llm-d-router-endpoint-picker:latest"],
    ids=["too-old-for-the-config", "no-schema-data"],
)
def test_the_config_is_judged_by_each_epp_that_mounts_it(prod, other_image):
    """A second EPP Deployment (listed first) mounts the same config: at v0.7.1 it is too old for it (the feature rule
    names that), at `latest` there is no schema to judge by. The stack's EPP after it, v0.10.0, still refuses the
    unknown parameter."""

    def other_epp_first(m):
        other = copy.deepcopy(get(m, "Deployment", EPP))
        other["metadata"]["name"] = "other-epp"
        other["spec"]["template"]["spec"]["containers"][0]["image"] = other_image
        m.insert(0, other)
        config = epp_config(m)
        plugin(config, "approx-prefix-cache-producer")["parameters"]["blockSizeTokenz"] = 64
        set_epp_config(m, config)

    (violation,) = run_policy("router-config-schema", mutate(prod, other_epp_first))
    assert violation.resource == CONFIG_ID
    assert 'json: unknown field "blockSizeTokenz"' in violation.message and "the EPP 0.10.0" in violation.message


@pytest.mark.parametrize(
    "other_image",
    ["ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0", "ghcr.io/llm-d/llm-d-router-disagg-sidecar:latest"],
    ids=["too-old-for-the-flags", "no-schema-data"],
)
def test_each_routing_sidecar_of_a_pod_is_judged(prod, other_image):
    """A second routing sidecar in the decode pod, listed before the stack's: too old for the flags, or with no schema
    to judge by. The stack's sidecar after it, v0.10.0, still refuses --connector."""

    def other_sidecar_first(m):
        other = copy.deepcopy(sidecar(m))
        other["name"], other["image"] = "routing-proxy-other", other_image
        sidecar(m)["args"].append("--connector=nixlv2")
        pod_spec(m, DECODE)["initContainers"].insert(0, other)

    (violation,) = run_policy("router-config-schema", mutate(prod, other_sidecar_first))
    assert violation.resource == DECODE_ID
    assert "unknown flag: --connector" in violation.message and "the P/D sidecar 0.10.0" in violation.message


# --- image-pin-dated (issue 38): every image the version facts judge names its release -------------------------------

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_an_epp_pinned_by_digest_alone_is_refused_with_the_tag_to_add(prod):
    bad = mutate(prod, lambda m: epp_container(m).update(image=f"ghcr.io/llm-d/llm-d-router-endpoint-picker@{DIGEST}"))
    (violation,) = run_policy("image-pin-dated", bad)
    assert (violation.resource, violation.level) == (EPP_ID, "mandatory")
    assert violation.message == (
        f"container epp image ghcr.io/llm-d/llm-d-router-endpoint-picker@{DIGEST} has a digest and no tag: the llm-d "
        "EPP version facts (core/versions/router.py) cannot tell which release it is, so the EndpointPickerConfig's "
        "generation and the features it may use are not checked against it. Pin the release's tag, beside the "
        f"digest: ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST} (the tag of the release you run)."
    )


def test_an_engine_and_a_sidecar_on_tags_that_are_no_version_are_refused(prod):
    def edit(m):
        engine(m, PREFILL)["image"] = "rebellions/vllm-rbln:latest"
        sidecar(m)["image"] = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:main"

    found = {(v.resource, v.message.split(":", 1)[0]) for v in run_policy("image-pin-dated", mutate(prod, edit))}
    assert found == {
        (f"Deployment/rebel100/{PREFILL}", "container vllm image rebellions/vllm-rbln"),
        (DECODE_ID, "container routing-proxy image ghcr.io/llm-d/llm-d-router-disagg-sidecar"),
    }


@pytest.mark.parametrize(
    "image",
    [
        f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST}",  # a tag beside the digest dates it
        "registry.local/mirror/epp:v0.10.0",  # a mirror's name: the container mounts the config, the tag dates it
    ],
)
def test_a_dated_epp_passes(prod, image):
    assert run_policy("image-pin-dated", mutate(prod, lambda m: epp_container(m).update(image=image))) == []


def test_an_engine_image_the_facts_do_not_judge_is_not_dated(prod):
    """Another vLLM image is not judged by the vllm-rbln facts (core/versions/engine.py is_engine_image)."""
    other = mutate(prod, lambda m: engine(m, PREFILL).update(image="vllm/vllm-openai:latest"))
    assert run_policy("image-pin-dated", other) == []
