"""router-precise-prefix-cache: the EPP indexes what the engines announce, so they must announce it where it listens,
in blocks its own divide. The good fixture is prod-4p4d rendered with `router.prefixCache: precise` (conftest)."""

from __future__ import annotations

import json

import pytest

from policy import catalog, levels
from tests.policy.fixtures import (
    DECODE,
    EPP_CONFIG,
    PREFILL,
    assert_verdict,
    engine,
    epp_config,
    mutate,
    plugin,
    run_policy,
    set_arg,
    set_epp_config,
)

POLICY = "router-precise-prefix-cache"
EPP_CONFIG_ID = f"ConfigMap/rebel100/{EPP_CONFIG}"
PRODUCER = "data[epp-config.yaml] plugin precise-prefix-cache-producer"


def test_the_precise_render_passes_the_whole_pack(precise):
    """Every mandatory policy accepts it, the consumers' included (the tokenizer container, the KV-event ports)."""
    config = catalog.load_config(levels.environment_config("prod"))
    mandatory = [v.line() for v in catalog.evaluate(precise, config) if v.level == "mandatory"]
    assert mandatory == []


def test_the_approximate_render_is_not_judged(prod):
    assert run_policy(POLICY, prod) == []


def precise_parameters(**change):
    def edit(m):
        config = epp_config(m)
        plugin(config, "precise-prefix-cache-producer")["parameters"].update(change)
        set_epp_config(m, config)

    return edit


def kv_events(deployment: str, **change):
    def edit(m):
        container = engine(m, deployment)
        flag = container["args"].index("--kv-events-config")
        value = json.loads(container["args"][flag + 1])
        container["args"][flag + 1] = json.dumps({**value, **change})

    return edit


def swap_flag(container: dict, old: str, new: str) -> None:
    args = container["args"]
    args[args.index(old)] = new


BAD = {
    "router-blocks-that-do-not-divide-the-engines": (
        precise_parameters(tokenProcessorConfig={"blockSizeTokens": 1000}),
        (
            f"{PRODUCER} tokenProcessorConfig.blockSizeTokens 1000 with the precise prefix cache does not divide the "
            "4096-token blocks the engines",
            "Set blockSizeTokens to a divisor of 4096 (e.g. 512)",
        ),
    ),
    "the-deprecated-block-key-read-too": (
        precise_parameters(tokenProcessorConfig={"blockSize": 96}),
        ("tokenProcessorConfig.blockSizeTokens 96",),
    ),
    "decode-publishes-nothing": (
        lambda m: set_arg(engine(m, DECODE), "--kv-events-config", None),
        (
            f"subscribes to each engine's KV events on port 5557 (podDiscoveryConfig.socketPort), but "
            f"Deployment/rebel100/{DECODE} publish none there",
        ),
    ),
    "prefill-events-off": (kv_events(PREFILL, enable_kv_cache_events=False), (f"Deployment/rebel100/{PREFILL}",)),
    "engines-on-another-port": (
        kv_events(DECODE, endpoint="tcp://*:6000"),
        (f"but Deployment/rebel100/{DECODE} publish none there",),
    ),
    "no-prefix-cache": (
        lambda m: swap_flag(engine(m, DECODE), "--enable-prefix-caching", "--no-enable-prefix-caching"),
        ("the engines keep no prefix cache", f"--no-enable-prefix-caching (Deployment/rebel100/{DECODE})"),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(precise, case):
    edit, contains = BAD[case]
    assert_verdict(
        run_policy(POLICY, mutate(precise, edit)), resource=EPP_CONFIG_ID, level="mandatory", contains=contains
    )


@pytest.mark.parametrize("size", [16, 128, 4096])
def test_blocks_that_divide_the_engines_pass(precise, size):
    """Any divisor of the engines' 4096-token blocks, upstream's default 16 included (no key given)."""
    edit = precise_parameters(tokenProcessorConfig={"blockSizeTokens": size} if size != 16 else {})
    assert run_policy(POLICY, mutate(precise, edit)) == []
