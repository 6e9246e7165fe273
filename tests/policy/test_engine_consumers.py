"""policy/engine_consumers.py: the pack refuses an engine image older than a feature its container uses."""

import pytest

from tests.policy.conftest import STACKS
from tests.policy.fixtures import DECODE, PREFILL, assert_verdict, engine, mutate, run_policy, set_arg, set_env

POLICY = "engine-image-has-features"


@pytest.mark.parametrize("stack", STACKS)
def test_good_render_passes(renders, stack):
    assert run_policy(POLICY, renders[stack]) == []


def image(name, tag):
    return lambda m: engine(m, name).update(image=f"rebellions/vllm-rbln:{tag}")


def undrained(name, tag):
    """The engine at an older tag without --shutdown-timeout (rollout.drainSeconds 0: vllm-rbln 0.12.0 is the first
    known to have it)."""
    return lambda m: (image(name, tag)(m), set_arg(engine(m, name), "--shutdown-timeout", None))


BAD = {
    "decode-0.10.2": (
        undrained(DECODE, "0.10.2"),
        DECODE,
        (
            "rebellions/vllm-rbln:0.10.2 (vllm-rbln) is 0.10.2",
            "connector RblnNixlConnector needs vllm-rbln 0.10.3",
            "flag --data-parallel-multi-port-external-lb needs vllm-rbln 0.11.0",
            "Pin 0.11.0 or later",
        ),
    ),
    "prefill-0.10.3-lacks-device-tensor": (
        undrained(PREFILL, "0.10.3"),
        PREFILL,
        ("env var VLLM_RBLN_USE_DEVICE_TENSOR needs vllm-rbln 0.10.4",),
    ),
    "decode-0.11.2-drains": (
        image(DECODE, "0.11.2"),
        DECODE,
        (
            "is 0.11.2, older than features the render uses: flag --shutdown-timeout needs vllm-rbln 0.12.0 or later",
            "Pin 0.12.0 or later",
        ),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_old_image_is_refused(prod, case):
    edit, deployment, contains = BAD[case]
    assert_verdict(
        run_policy(POLICY, mutate(prod, edit)),
        resource=f"Deployment/rebel100/{deployment}",
        level="mandatory",
        contains=contains,
    )


GOOD = {
    "decode-0.11.0-has-every-feature-but-the-drain": undrained(DECODE, "0.11.0"),
    "prefill-0.10.4-prefill-passes-no-multi-port-flag": undrained(PREFILL, "0.10.4"),
    "not-a-version-tag": lambda m: engine(m, DECODE).update(image="rebellions/vllm-rbln@sha256:" + "0" * 64),
    "foreign-vllm-image": lambda m: engine(m, DECODE).update(image="vllm/vllm-openai:v0.10.0"),
    "prefill-0.10.3-without-device-tensor": lambda m: (
        undrained(PREFILL, "0.10.3")(m),
        set_env(engine(m, PREFILL), "VLLM_RBLN_USE_DEVICE_TENSOR", None),
    ),
}


@pytest.mark.parametrize("case", GOOD, ids=list(GOOD))
def test_good_edit_passes(prod, case):
    assert run_policy(POLICY, mutate(prod, GOOD[case])) == []


LMCACHE_POLICY = "lmcache-env-known"


def config_map_env(name, value):
    return lambda m: next(x for x in m if x["kind"] == "ConfigMap" and x["metadata"]["name"] == "minimax-m27-lmcache")[
        "data"
    ].update({name: value})


@pytest.mark.parametrize("stack", STACKS)
def test_lmcache_names_of_the_render_are_known(renders, stack):
    assert run_policy(LMCACHE_POLICY, renders[stack]) == []


@pytest.mark.parametrize(
    "edit, contains",
    [
        (
            config_map_env("LMCACHE_CHUNKSIZE", "512"),
            (
                "env LMCACHE_CHUNKSIZE: LMCACHE_CHUNKSIZE is not a setting lmcache 0.5.6 reads",
                "Did you mean LMCACHE_CHUNK_SIZE?",
            ),
        ),
        (lambda m: set_env(engine(m, PREFILL), "LMCACHE_MAX_LOCAL_CPU", "4"), ("env LMCACHE_MAX_LOCAL_CPU:",)),
        (
            config_map_env("LMCACHE_EXTRA_CONFIG", '{"rds_max_chunks":1000,"chunk_size":512}'),
            ("LMCACHE_EXTRA_CONFIG key chunk_size: chunk_size is a top-level setting",),
        ),
    ],
    ids=["config-map-typo", "container-env-typo", "extra-config-top-level-key"],
)
def test_lmcache_name_lmcache_does_not_read_is_refused(prod, edit, contains):
    assert_verdict(
        run_policy(LMCACHE_POLICY, mutate(prod, edit)),
        resource=f"Deployment/rebel100/{PREFILL}",
        level="mandatory",
        contains=contains,
    )


def test_lmcache_names_lmcache_reads_pass(prod):
    edited = mutate(prod, config_map_env("LMCACHE_LOG_LEVEL", "INFO"), config_map_env("LMCACHE_EC_CHUNK_SIZE", "256"))
    assert run_policy(LMCACHE_POLICY, edited) == []


ARGS_POLICY = "vllm-args-known"


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_args_are_vllm_options(renders, stack):
    assert run_policy(ARGS_POLICY, renders[stack]) == []


@pytest.mark.parametrize(
    "extra, contains",
    [
        (["--foo"], ('exits with "unrecognized arguments: --foo"',)),
        (["--kv-cache-dtype", "fp4"], ("argument --kv-cache-dtype: invalid choice: 'fp4'",)),
    ],
    ids=["unknown-flag", "value-outside-choices"],
)
def test_args_vllm_refuses_are_refused(prod, extra, contains):
    edited = mutate(prod, lambda m: engine(m, DECODE)["args"].extend(extra))
    assert_verdict(
        run_policy(ARGS_POLICY, edited), resource=f"Deployment/rebel100/{DECODE}", level="mandatory", contains=contains
    )


def test_every_engine_is_judged_past_one_that_is_not_vllm_rbln(prod):
    """prefill (listed first) on another vLLM image is not judged by vllm-rbln's facts; decode still is."""
    edited = mutate(prod, lambda m: engine(m, PREFILL).update(image="vllm/vllm-openai:v0.9.0"), image(DECODE, "0.10.2"))
    assert [v.resource for v in run_policy(POLICY, edited)] == [f"Deployment/rebel100/{DECODE}"]


def test_only_vllm_rbln_engines_of_the_target_release_are_judged_by_its_parser(prod):
    """prefill (listed first) on another vLLM is not judged by vLLM 0.30.0's options; decode's unknown flag still is."""
    edited = mutate(
        prod,
        lambda m: engine(m, PREFILL).update(image="vllm/vllm-openai:v0.9.0"),
        lambda m: engine(m, PREFILL)["args"].append("--foo"),
        lambda m: engine(m, DECODE)["args"].append("--bar"),
    )
    assert [(v.resource, "--bar" in v.message) for v in run_policy("vllm-args-known", edited)] == [
        (f"Deployment/rebel100/{DECODE}", True)
    ]
