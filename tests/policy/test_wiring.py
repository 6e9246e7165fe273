"""Rule 6 (policy/wiring.py): prefill/decode agreement, sidecar, pool, route and router config."""

import copy

import pytest
import yaml

from tests.policy.conftest import STACKS
from tests.policy.fixtures import (
    DECODE,
    EPP,
    EPP_CONFIG,
    POOL,
    PREFILL,
    ROUTE,
    assert_verdict,
    engine,
    epp_config,
    get,
    mutate,
    plugin,
    pod_spec,
    run_policy,
    set_arg,
    set_env,
    set_epp_config,
    sidecar,
)

POLICIES = (
    "pd-roles-agree",
    "sidecar-matches-decode",
    "inference-pool-wiring",
    "pool-endpoints-serve",
    "httproute-backend-exists",
    "router-pd-profiles",
    "router-block-size",
)
DECODE_ID, PREFILL_ID = f"Deployment/rebel100/{DECODE}", f"Deployment/rebel100/{PREFILL}"
POOL_ID, ROUTE_ID = f"InferencePool/rebel100/{POOL}", f"HTTPRoute/rebel100/{ROUTE}"
EPP_CONFIG_ID = "ConfigMap/rebel100/minimax-m27-epp-config"
EAGLE = '{"method":"eagle3","model":"asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k","num_speculative_tokens":3}'


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES)
def test_good_render_passes(renders, stack, policy):
    assert run_policy(policy, renders[stack]) == []


def pool_spec(m):
    return get(m, "InferencePool", POOL)["spec"]


ACTIVE, LEGACY = "llm-d.ai/active-ports", "inference.networking.k8s.io/active-ports"


def annotate(deployment, **values):
    """Set (or with None remove) the pod template's active-ports annotations: `active` and `legacy` keys."""

    def edit(m):
        annotations = get(m, "Deployment", deployment)["spec"]["template"]["metadata"]["annotations"]
        for name, value in values.items():
            key = {"active": ACTIVE, "legacy": LEGACY}[name]
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value

    return edit


def epp_image(m, image):
    next(c for c in get(m, "Deployment", EPP)["spec"]["template"]["spec"]["containers"] if c["name"] == "epp")[
        "image"
    ] = image


def edit_router(change):
    def edit(m):
        config = epp_config(m)
        change(config)
        set_epp_config(m, config)

    return edit


def producer(**params):
    return edit_router(lambda c: plugin(c, "approx-prefix-cache-producer")["parameters"].update(params))


BAD = {
    # prefill and decode agree
    "decode-block-size-2048": (
        lambda m: set_arg(engine(m, DECODE), "--block-size", "2048"),
        "pd-roles-agree",
        DECODE_ID,
        ("differ on --block-size: prefill 4096 vs decode 2048", f"Deployment/rebel100/{PREFILL}"),
    ),
    "decode-kv-dtype-left-to-default": (
        lambda m: set_arg(engine(m, DECODE), "--kv-cache-dtype", None),
        "pd-roles-agree",
        DECODE_ID,
        ("differ on --kv-cache-dtype: prefill fp8 vs decode auto",),
    ),
    "decode-other-model": (
        lambda m: engine(m, DECODE)["args"].__setitem__(0, "MiniMaxAI/MiniMax-M2"),
        "pd-roles-agree",
        DECODE_ID,
        ("differ on model: prefill MiniMaxAI/MiniMax-M2.7 vs decode MiniMaxAI/MiniMax-M2",),
    ),
    "prefill-without-eagle3": (
        lambda m: set_arg(engine(m, PREFILL), "--speculative-config", None),
        "pd-roles-agree",
        DECODE_ID,
        (
            "differ on --speculative-config: prefill none vs decode",
            "eagle3",
            "EAGLE-3 on decode needs it on prefill too",
        ),
    ),
    "prefill-eagle3-4-tokens-equals-form": (
        lambda m: set_arg(engine(m, PREFILL), "--speculative-config", EAGLE.replace(":3}", ":4}"), equals=True),
        "pd-roles-agree",
        DECODE_ID,
        ('"num_speculative_tokens":4', '"num_speculative_tokens":3'),
    ),
    # routing sidecar
    "sidecar-vllm-port-8001": (
        lambda m: set_arg(sidecar(m), "--vllm-port", "8001"),
        "sidecar-matches-decode",
        DECODE_ID,
        ("--vllm-port 8001", "decode engine's --port 8200", "Set --vllm-port 8200"),
    ),
    "sidecar-vllm-port-equals-form": (
        lambda m: set_arg(sidecar(m), "--vllm-port", "8100", equals=True),
        "sidecar-matches-decode",
        DECODE_ID,
        ("--vllm-port 8100", "--port 8200"),
    ),
    "sidecar-vllm-port-left-to-default": (
        lambda m: set_arg(sidecar(m), "--vllm-port", None),
        "sidecar-matches-decode",
        DECODE_ID,
        ("--vllm-port 8001 (default)",),
    ),
    "sidecar-dp-2": (
        lambda m: set_arg(sidecar(m), "--data-parallel-size", "2"),
        "sidecar-matches-decode",
        DECODE_ID,
        ("--data-parallel-size 2", "4 local ranks", "Set --data-parallel-size 4"),
    ),
    "decode-without-nixl-connector": (
        lambda m: set_arg(engine(m, DECODE), "--kv-transfer-config", None),
        "sidecar-matches-decode",
        DECODE_ID,
        ("--kv-connector nixlv2 needs a NIXL connector", "decode container vllm"),
    ),
    "prefill-lmcache-only-connector": (
        lambda m: set_arg(
            engine(m, PREFILL), "--kv-transfer-config", '{"kv_connector":"RBLNLMCacheConnectorV1","kv_role":"kv_both"}'
        ),
        "sidecar-matches-decode",
        DECODE_ID,
        (
            "prefill Deployment/rebel100/minimax-m27-prefill container vllm",
            "has RBLNLMCacheConnectorV1: the KV transfer handshake fails",
        ),
    ),
    "sidecar-unknown-connector": (
        lambda m: set_arg(sidecar(m), "--kv-connector", "shm"),
        "sidecar-matches-decode",
        DECODE_ID,
        ("--kv-connector shm is not a connector this pack knows",),
    ),
    # InferencePool
    "pool-target-port-8000-only": (
        lambda m: pool_spec(m).update(targetPorts=[{"number": 8000}]),
        "inference-pool-wiring",
        POOL_ID,
        (
            "spec.targetPorts [8000] lacks [8001, 8002, 8003]",
            "Deployment/rebel100/minimax-m27-decode on [8000, 8001, 8002, 8003] (routing sidecar",
            "Set spec.targetPorts to [8000, 8001, 8002, 8003]",
        ),
    ),
    "pool-target-ports-on-engine-ranks": (
        lambda m: pool_spec(m).update(targetPorts=[{"number": p} for p in (8200, 8201, 8202, 8203)]),
        "inference-pool-wiring",
        POOL_ID,
        (
            "spec.targetPorts [8200, 8201, 8202, 8203] lacks [8000, 8001, 8002, 8003]",
            "and includes [8200, 8201, 8202, 8203], where none of the selected pods listens",
            "Deployment/rebel100/minimax-m27-prefill on [8000] (engine --port",
        ),
    ),
    "pool-selects-decode-only": (
        lambda m: pool_spec(m)["selector"]["matchLabels"].update({"llm-d.ai/role": "decode"}),
        "inference-pool-wiring",
        POOL_ID,
        (
            "spec.selector.matchLabels",
            "does not select the prefill pod template",
            "Deployment/rebel100/minimax-m27-prefill has",
        ),
    ),
    "pool-selects-nothing": (
        lambda m: pool_spec(m)["selector"].update(matchLabels={"app": "typo"}),
        "inference-pool-wiring",
        POOL_ID,
        ("spec.selector.matchLabels {app: typo} selects no engine pod template",),
    ),
    "pool-epp-service-misnamed": (
        lambda m: pool_spec(m)["endpointPickerRef"].update(name="minimax-m27-router"),
        "inference-pool-wiring",
        POOL_ID,
        ("spec.endpointPickerRef.name minimax-m27-router names no Service", "Services: minimax-m27-epp"),
    ),
    "pool-epp-port-not-on-service": (
        lambda m: pool_spec(m)["endpointPickerRef"].update(port={"number": 9100}),
        "inference-pool-wiring",
        POOL_ID,
        ("spec.endpointPickerRef.port.number 9100 is not a port of Service rebel100/minimax-m27-epp",),
    ),
    "pool-epp-port-is-the-health-port": (
        lambda m: pool_spec(m)["endpointPickerRef"].update(port={"number": 9003}),
        "inference-pool-wiring",
        POOL_ID,
        ("port.number 9003 reaches targetPort 9003", "--grpc-port 9002"),
    ),
    # the endpoints the EPP makes of each selected pod (one per target port, unless the pod lists its active ports)
    "prefill-without-active-ports": (
        annotate(PREFILL, active=None, legacy=None),
        "pool-endpoints-serve",
        PREFILL_ID,
        (
            "InferencePool rebel100/minimax-m27-pool targets ports [8000, 8001, 8002, 8003]",
            f"{PREFILL_ID}, which serves on [8000]",
            f"it declares no {ACTIVE} or {LEGACY}",
            "the endpoints on [8001, 8002, 8003] lead nowhere",
            "502 from the decode sidecar",
            f'Annotate its pod template with {ACTIVE} and {LEGACY}: "8000" (the target ports it serves on)',
        ),
    ),
    "prefill-active-ports-v0.10-only-behind-a-v0.7-epp": (
        lambda m: (annotate(PREFILL, legacy=None)(m), epp_image(m, "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1")),
        "pool-endpoints-serve",
        PREFILL_ID,
        (
            "InferencePool rebel100/minimax-m27-pool targets",
            f"it declares no {LEGACY}",
            "the endpoints on [8001, 8002, 8003] lead nowhere",
        ),
    ),
    "prefill-declares-a-port-it-does-not-serve": (
        annotate(PREFILL, active="8000,8001", legacy="8000,8001"),
        "pool-endpoints-serve",
        PREFILL_ID,
        (
            f"one endpoint per target port listed in its annotation {ACTIVE} [8000, 8001]",
            "the endpoints on [8001] lead nowhere",
            '"8000" (the target ports it serves on)',
        ),
    ),
    "prefill-declares-no-port": (
        annotate(PREFILL, active="", legacy=""),
        "pool-endpoints-serve",
        PREFILL_ID,
        (f"listed in its annotation {ACTIVE} [], so the pod gets no endpoint: the router never sends it a request",),
    ),
    "decode-declares-a-port-the-pool-does-not-target": (
        annotate(DECODE, active="8000,8001,8002,8003,8004", legacy="8000,8001,8002,8003,8004"),
        "pool-endpoints-serve",
        DECODE_ID,
        (
            "[8000, 8001, 8002, 8003, 8004], and [8004] are no target ports of the pool: the EPP drops them",
            '"8000,8001,8002,8003" (the target ports it serves on)',
        ),
    ),
    # HTTPRoute
    "route-to-missing-pool": (
        lambda m: get(m, "HTTPRoute", ROUTE)["spec"]["rules"][0]["backendRefs"][0].update(name="minimax-pool"),
        "httproute-backend-exists",
        ROUTE_ID,
        (
            "spec.rules[0].backendRefs[0] names InferencePool minimax-pool, which does not exist",
            "InferencePools: minimax-m27-pool",
        ),
    ),
    "route-to-pool-in-old-group": (
        lambda m: get(m, "HTTPRoute", ROUTE)["spec"]["rules"][0]["backendRefs"][0].update(
            group="inference.networking.x-k8s.io"
        ),
        "httproute-backend-exists",
        ROUTE_ID,
        ("group 'inference.networking.x-k8s.io'", "Set group inference.networking.k8s.io"),
    ),
    # router config
    "router-decider-non-cached-tokens-0": (
        edit_router(lambda c: plugin(c, "prefix-based-pd-decider")["parameters"].update(nonCachedTokens=0)),
        "router-pd-profiles",
        EPP_CONFIG_ID,
        ("parameters.nonCachedTokens 0 disables the decider", "decode-only"),
    ),
    "router-decider-threshold-unset": (
        edit_router(lambda c: plugin(c, "prefix-based-pd-decider").pop("parameters")),
        "router-pd-profiles",
        EPP_CONFIG_ID,
        ("nonCachedTokens 0 disables",),
    ),
    "router-without-decode-profile": (
        edit_router(
            lambda c: c.update(schedulingProfiles=[p for p in c["schedulingProfiles"] if p["name"] != "decode"])
        ),
        "router-pd-profiles",
        EPP_CONFIG_ID,
        ("schedulingProfiles ['prefill'] lacks the 'decode' profile",),
    ),
    "router-without-profile-handler": (
        edit_router(lambda c: c.update(plugins=[p for p in c["plugins"] if p["type"] != "disagg-profile-handler"])),
        "router-pd-profiles",
        EPP_CONFIG_ID,
        ("has no disagg-profile-handler or pd-profile-handler plugin",),
    ),
    "router-handler-names-missing-decider": (
        edit_router(
            lambda c: plugin(c, "disagg-profile-handler")["parameters"]["deciders"].update(prefill="pd-decider")
        ),
        "router-pd-profiles",
        EPP_CONFIG_ID,
        ("deciders.prefill pd-decider names no plugin",),
    ),
    "router-autotune-off-block-1000": (
        producer(autoTune=False, blockSizeTokens=1000),
        "router-block-size",
        EPP_CONFIG_ID,
        ("blockSizeTokens 1000 with autoTune false", "512 (VLLM_RBLN_SUB_BLOCK_CACHE=1)", "Set blockSizeTokens 512"),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(prod, case):
    edit, policy, resource, contains = BAD[case]
    assert_verdict(run_policy(policy, mutate(prod, edit)), resource=resource, level="mandatory", contains=contains)


def test_always_disagg_decider_can_fire(prod):
    def always(config):
        config["plugins"].append({"type": "always-disagg-pd-decider"})
        plugin(config, "disagg-profile-handler")["parameters"]["deciders"]["prefill"] = "always-disagg-pd-decider"
        plugin(config, "prefix-based-pd-decider")["parameters"]["nonCachedTokens"] = 0  # unused now

    assert run_policy("router-pd-profiles", mutate(prod, edit_router(always))) == []


def test_autotune_advice_is_given_past_a_config_with_autotune_off(prod):
    """A second EndpointPickerConfig (its ConfigMap listed first) turns autoTune off: it gets no advice, and the
    stack's own config after it, autoTune on, still does."""

    def tuned_copy_first(m):
        other = copy.deepcopy(get(m, "ConfigMap", EPP_CONFIG))
        other["metadata"]["name"] = "tuned-epp-config"
        m.insert(0, other)
        config = epp_config(m)
        plugin(config, "approx-prefix-cache-producer")["parameters"].update(autoTune=False, blockSizeTokens=512)
        other["data"]["epp-config.yaml"] = yaml.safe_dump(config, sort_keys=False)

    found = run_policy("router-autotune-block-unit", mutate(prod, producer(autoTune=True), tuned_copy_first))
    assert [v.resource for v in found] == [EPP_CONFIG_ID], found


def test_the_block_size_is_judged_past_a_config_with_autotune_on(prod):
    """A second EndpointPickerConfig (its ConfigMap listed first) leaves autoTune on: router-block-size passes it over,
    and the stack's own config after it, autoTune off with 1000 against the engines' 512-token sub-blocks, is
    refused."""

    def autotuned_copy_first(m):
        other = copy.deepcopy(get(m, "ConfigMap", EPP_CONFIG))
        other["metadata"]["name"] = "autotuned-epp-config"
        m.insert(0, other)
        config = epp_config(m)
        plugin(config, "approx-prefix-cache-producer")["parameters"].update(autoTune=True, blockSizeTokens=1000)
        other["data"]["epp-config.yaml"] = yaml.safe_dump(config, sort_keys=False)

    found = run_policy(
        "router-block-size", mutate(prod, autotuned_copy_first, producer(autoTune=False, blockSizeTokens=1000))
    )
    assert [v.resource for v in found] == [EPP_CONFIG_ID], found


def test_autotune_advice_is_advisory_and_goes_with_autotune_off(prod):
    """autoTune on gets the 4096-token unit note as advice; autoTune false (the render's, at 4096, or 512) has none."""
    assert run_policy("router-autotune-block-unit", prod) == []
    assert_verdict(
        run_policy("router-autotune-block-unit", mutate(prod, producer(autoTune=True))),
        resource=EPP_CONFIG_ID,
        level="advisory",
        contains=(
            "autoTune true",
            "--block-size 4096",
            "512-token sub-blocks",
            "(autoTune false, blockSizeTokens 512",
        ),
    )
    tuned = mutate(prod, producer(autoTune=False, blockSizeTokens=512))
    assert run_policy("router-autotune-block-unit", tuned) == []
    assert run_policy("router-block-size", tuned) == []


def test_agg_pool_targets_engine_ranks(agg):
    """No sidecar in AGG: the pool targets the engine's rank ports, and losing one is caught."""
    assert run_policy("inference-pool-wiring", agg) == []
    bad = mutate(agg, lambda m: pool_spec(m).update(targetPorts=[{"number": p} for p in (8200, 8201, 8202)]))
    assert_verdict(
        run_policy("inference-pool-wiring", bad),
        resource=POOL_ID,
        level="mandatory",
        contains=("lacks [8203]", "engine --port and ranks", "Set spec.targetPorts to [8200, 8201, 8202, 8203]"),
    )


def test_agg_needs_no_prefill_profile(agg):
    assert run_policy("router-pd-profiles", agg) == []


def test_violation_message_text_names_the_resource(prod):
    """What Pulumi shows (Finding.text) starts with the kind and namespace/name."""
    from policy.facts import DEFAULTS
    from policy.wiring import sidecar_matches_decode

    (finding,) = sidecar_matches_decode(mutate(prod, BAD["sidecar-vllm-port-8001"][0]), DEFAULTS)
    assert finding.text.startswith(f"Deployment rebel100/{DECODE}: routing sidecar routing-proxy arg --vllm-port 8001")


def test_epp_service_name_is_read(prod):
    assert get(prod, "Service", EPP)["spec"]["ports"][0]["port"] == 9002


def test_older_pool_api_is_read(prod):
    """inference.networking.x-k8s.io/v1alpha2: flat selector, one targetPortNumber, extensionRef."""

    def older(m):
        pool = get(m, "InferencePool", POOL)
        pool["apiVersion"] = "inference.networking.x-k8s.io/v1alpha2"
        spec = pool["spec"]
        pool["spec"] = {
            "selector": spec["selector"]["matchLabels"],
            "targetPortNumber": 8000,
            "extensionRef": {"name": spec["endpointPickerRef"]["name"], "portNumber": 9003},
        }

    bad = mutate(prod, older)
    found = {v.message for v in run_policy("inference-pool-wiring", bad)}
    assert any("spec.targetPortNumber [8000] lacks [8001, 8002, 8003]" in m for m in found), found
    assert any("spec.extensionRef.portNumber 9003 reaches targetPort 9003" in m for m in found), found
    assert_verdict(
        run_policy("httproute-backend-exists", bad),
        resource=ROUTE_ID,
        level="mandatory",
        contains=("is inference.networking.x-k8s.io/v1alpha2", "Set group inference.networking.x-k8s.io"),
    )


def test_pool_endpoint_messages_name_the_pool_the_pod_the_ports_and_the_fix(prod):
    """One finding per pod template and reading: both EPP generations read a pod without either key alike."""
    (finding,) = run_policy("pool-endpoints-serve", mutate(prod, annotate(PREFILL, active=None, legacy=None)))
    assert finding.message == (
        f"InferencePool rebel100/minimax-m27-pool targets ports [8000, 8001, 8002, 8003] and selects {PREFILL_ID}, "
        f"which serves on [8000] (engine --port and ranks): the EPP makes one endpoint per target port (it declares "
        f"no {ACTIVE} or {LEGACY}), so the endpoints on [8001, 8002, 8003] lead nowhere and a request the router "
        f"sends there fails (a P/D prefill pick: 502 from the decode sidecar). Annotate its pod template with "
        f'{ACTIVE} and {LEGACY}: "8000" (the target ports it serves on).'
    )


def test_a_pod_both_generations_misread_alike_names_both_annotations_and_its_sidecar(prod):
    """Without an EPP among the manifests both generations read the decode pod; both keys list 8004 too, so they read
    it alike: one finding, both keys named, the ports served said to come from the routing sidecar's flags."""
    bad = mutate(
        prod,
        annotate(DECODE, active="8000,8001,8002,8003,8004", legacy="8000,8001,8002,8003,8004"),
        lambda m: m.remove(get(m, "Deployment", EPP)),
    )
    (finding,) = run_policy("pool-endpoints-serve", bad)
    assert (finding.resource, finding.message) == (
        DECODE_ID,
        f"InferencePool rebel100/minimax-m27-pool targets ports [8000, 8001, 8002, 8003] and selects {DECODE_ID}, "
        "which serves on [8000, 8001, 8002, 8003] (routing sidecar --port and --data-parallel-size): the EPP makes "
        f"one endpoint per target port listed in its annotations {LEGACY} and {ACTIVE} [8000, 8001, 8002, 8003, 8004], "
        f"and [8004] are no target ports of the pool: the EPP drops them. Annotate its pod template with {ACTIVE} and "
        f'{LEGACY}: "8000,8001,8002,8003" (the target ports it serves on).',
    )


def test_a_pod_serving_on_no_target_port_is_told_to_serve_on_one(prod):
    """Prefill's engine moved to port 9000, no annotation: all four endpoints lead nowhere, and there is no port to
    annotate, so the fix names the pool's target ports."""
    bad = mutate(
        prod, annotate(PREFILL, active=None, legacy=None), lambda m: set_arg(engine(m, PREFILL), "--port", "9000")
    )
    (finding,) = run_policy("pool-endpoints-serve", bad)
    assert finding.message == (
        f"InferencePool rebel100/minimax-m27-pool targets ports [8000, 8001, 8002, 8003] and selects {PREFILL_ID}, "
        f"which serves on [9000] (engine --port and ranks): the EPP makes one endpoint per target port (it declares "
        f"no {ACTIVE} or {LEGACY}), so the endpoints on [8000, 8001, 8002, 8003] lead nowhere and a request the "
        "router sends there fails (a P/D prefill pick: 502 from the decode sidecar). Serve it on one of the target "
        "ports [8000, 8001, 8002, 8003], or select it with a pool of its own."
    )


PREFILL_LABELS = (
    "{app.kubernetes.io/component: prefill, app.kubernetes.io/name: minimax-m27-prefill, app.kubernetes.io/part-of: "
    "minimax-m27, llm-d.ai/inference-serving: true, llm-d.ai/role: prefill, rebel100.ai/pool: minimax-m27-prefill}"
)
DECODE_LABELS = (
    "{app.kubernetes.io/component: decode, app.kubernetes.io/name: minimax-m27-decode, app.kubernetes.io/part-of: "
    "minimax-m27, llm-d.ai/inference-serving: true, llm-d.ai/role: decode, rebel100.ai/pool: minimax-m27-decode}"
)


def test_a_pool_selecting_nothing_lists_the_engine_templates_there_are(prod):
    bad = mutate(prod, lambda m: pool_spec(m)["selector"].update(matchLabels={"app": "typo"}))
    (finding,) = run_policy("inference-pool-wiring", bad)
    assert finding.message == (
        "spec.selector.matchLabels {app: typo} selects no engine pod template in namespace rebel100 "
        f"({DECODE_ID}, {PREFILL_ID}; {PREFILL_ID} has {PREFILL_LABELS}): the gateway has no endpoint to route to. "
        "Use labels that every serving pod carries."
    )


def test_a_pool_selecting_prefill_only_misses_decode(prod):
    """The pool selects prefill by its role label: the decode template (same model) is not selected, and the ports
    only decode's sidecar serves lead nowhere. With decode serving another model, it is no pod of this pool's."""
    prefill_only = mutate(prod, lambda m: pool_spec(m)["selector"].update(matchLabels={"llm-d.ai/role": "prefill"}))
    messages = [v.message for v in run_policy("inference-pool-wiring", prefill_only)]
    assert messages[0] == (
        "spec.selector.matchLabels {llm-d.ai/role: prefill} does not select the decode pod template "
        f"({DECODE_ID}; {DECODE_ID} has {DECODE_LABELS}): the router's decode-filter never sees decode endpoints. "
        "Select on a label both roles share (llm-d.ai/inference-serving: 'true')."
    )
    other_model = mutate(prefill_only, lambda m: engine(m, DECODE)["args"].__setitem__(0, "other/model"))
    assert not [v for v in run_policy("inference-pool-wiring", other_model) if "does not select" in v.message]


def test_a_pod_serving_on_every_target_port_needs_no_annotation(prod, agg):
    assert run_policy("pool-endpoints-serve", mutate(prod, annotate(DECODE, active=None, legacy=None))) == []
    assert run_policy("pool-endpoints-serve", mutate(agg, annotate(DECODE, active=None, legacy=None))) == []


def test_the_epp_reads_active_ports_as_its_source_does(prod):
    """Spaces around the numbers are trimmed; words and ports that are no target port are dropped (datastore.go)."""
    assert run_policy("pool-endpoints-serve", mutate(prod, annotate(PREFILL, active=" 8000 ", legacy="8000,"))) == []
    (finding,) = run_policy("pool-endpoints-serve", mutate(prod, annotate(PREFILL, active="eight", legacy="eight")))
    assert "the pod gets no endpoint" in finding.message


def test_active_ports_are_read_as_the_epp_behind_the_pool_reads_them(prod):
    """The v0.10 EPP (the default pin) reads the legacy key when the new one is absent, and the other way round only
    the new key: a pod with the legacy key alone is fine behind it, one with the new key alone behind v0.7.1 is not.
    With no EPP among the manifests every generation reads the pod, and only the one that misreads it is named."""
    assert run_policy("pool-endpoints-serve", mutate(prod, annotate(PREFILL, active=None))) == []
    assert run_policy("pool-endpoints-serve", mutate(prod, annotate(PREFILL, legacy=None))) == []
    without_epp = mutate(prod, annotate(PREFILL, legacy=None), lambda m: m.remove(get(m, "Deployment", EPP)))
    (finding,) = run_policy("pool-endpoints-serve", without_epp)
    assert finding.message.startswith(f"For the v0.7 EPP, which reads only {LEGACY}: InferencePool rebel100/"), (
        finding.message
    )


# --- the EPP's Service and the older pool API: each boundary by hand (issue 25) ---------------------------------


def epp_service_port(m, number):
    return next(p for p in get(m, "Service", EPP)["spec"]["ports"] if p["port"] == number)


@pytest.mark.parametrize("target", [9003, "grpc-health"], ids=["number", "name"])
def test_a_service_port_the_pool_names_that_leads_to_another_listener_is_reported(prod, target):
    """The pool names Service port 9002, the EPP's --grpc-port is 9002, but the Service sends 9002 on to 9003 (the
    health listener, by number or by its container port's name): the gateway talks to the wrong listener. The pool's
    port and the EPP's port are equal here, so only the Service's targetPort tells it."""
    bad = mutate(prod, lambda m: epp_service_port(m, 9002).update(targetPort=target))
    (finding,) = run_policy("inference-pool-wiring", bad)
    assert (finding.resource, finding.message) == (
        POOL_ID,
        (
            f"spec.endpointPickerRef.port.number 9002 reaches targetPort {target} of Service rebel100/{EPP}, but the "
            "EPP container serves ext-proc on --grpc-port 9002: the gateway talks to the wrong listener. Point the "
            "pool at the Service port whose targetPort is 9002."
        ),
    )


@pytest.mark.parametrize("target", [9002, "grpc", None], ids=["number", "name", "unset"])
def test_a_service_port_that_leads_to_the_grpc_listener_passes(prod, target):
    """By number, by the container port's name (`grpc`), or unset (the Service then targets its own port, 9002)."""

    def edit(m):
        port = epp_service_port(m, 9002)
        port.pop("targetPort")
        if target is not None:
            port["targetPort"] = target

    assert run_policy("inference-pool-wiring", mutate(prod, edit)) == []


def older_pool(target_port, **extension_ref):
    def edit(m):
        pool = get(m, "InferencePool", POOL)
        pool["apiVersion"] = "inference.networking.x-k8s.io/v1alpha2"
        spec = pool["spec"]
        pool["spec"] = {
            "selector": spec["selector"]["matchLabels"],
            "targetPortNumber": target_port,
            "extensionRef": {"name": spec["endpointPickerRef"]["name"], **extension_ref},
        }

    return edit


def test_an_older_pools_findings_name_its_own_fields(prod):
    """The v1alpha2 pool names its selector spec.selector and its EPP spec.extensionRef; one without
    targetPortNumber targets no port at all."""

    def selector(labels):
        return lambda m: get(m, "InferencePool", POOL)["spec"].update(selector=labels)

    typo = mutate(prod, older_pool(8000), selector({"app": "typo"}))
    messages = [v.message for v in run_policy("inference-pool-wiring", typo)]
    assert messages == [
        "spec.selector {app: typo} selects no engine pod template in namespace rebel100 "
        f"({DECODE_ID}, {PREFILL_ID}; {PREFILL_ID} has {PREFILL_LABELS}): the gateway has no endpoint to route to. "
        "Use labels that every serving pod carries."
    ], messages
    misnamed = mutate(prod, older_pool(8000, name="router"))
    messages = [v.message for v in run_policy("inference-pool-wiring", misnamed)]
    assert (
        "spec.extensionRef.name router names no Service in namespace rebel100 (Services: minimax-m27-epp): the "
        "gateway cannot reach the router and, with FailClose, rejects every request. Set it to the EPP Service's "
        "name." in messages
    ), messages
    no_port = mutate(prod, older_pool(None))
    messages = [v.message for v in run_policy("inference-pool-wiring", no_port)]
    assert messages and all(m.startswith("spec.targetPortNumber [] lacks [8000") for m in messages), messages


def test_a_pool_with_target_ports_is_read_as_v1_whatever_its_selector(prod):
    """spec.targetPorts makes the pool a v1 one even when its selector has no matchLabels: its empty
    spec.selector.matchLabels selects nothing."""
    bare = mutate(prod, lambda m: get(m, "InferencePool", POOL)["spec"].update(selector={}))
    messages = [v.message for v in run_policy("inference-pool-wiring", bare)]
    assert messages[0].startswith("spec.selector.matchLabels {} selects no engine pod template"), messages


def test_an_older_pool_without_port_number_reaches_the_epp_on_the_default_9002(prod):
    """v1alpha2's extensionRef.portNumber defaults to 9002, the EPP's --grpc-port default and the Service's ext-proc
    port: a pool that leaves it out is wired right. Its one finding is the single targetPortNumber (the older API has
    one port, the sidecar listens on four), none about the EPP."""
    found = [(v.resource, v.message) for v in run_policy("inference-pool-wiring", mutate(prod, older_pool(8000)))]
    assert found == [
        (
            POOL_ID,
            (
                "spec.targetPortNumber [8000] lacks [8001, 8002, 8003], so the router never sends requests to those "
                f"ranks (the selected pods serve: {DECODE_ID} on [8000, 8001, 8002, 8003] (routing sidecar --port and "
                f"--data-parallel-size); {PREFILL_ID} on [8000] (engine --port and ranks)). Set spec.targetPortNumber "
                "to [8000, 8001, 8002, 8003]."
            ),
        )
    ]


def test_an_older_pool_without_port_number_is_judged_at_9002(prod):
    """The default is a value, not a pass: with the Service's 9002 renumbered the default port is not on it."""

    def renumber(m):
        epp_service_port(m, 9002).update(port=9102)

    found = {v.message for v in run_policy("inference-pool-wiring", mutate(prod, older_pool(8000), renumber))}
    assert (
        f"spec.extensionRef.portNumber 9002 is not a port of Service rebel100/{EPP} (ports: 9102 (grpc-ext-proc), "
        f"9003 (grpc-health), 9090 (metrics)). Use the Service's ext-proc port." in found
    ), found


def test_a_pool_in_a_namespace_without_engines_says_none_were_found(prod):
    moved = mutate(prod, lambda m: get(m, "InferencePool", POOL)["metadata"].update(namespace="elsewhere"))
    messages = [v.message for v in run_policy("inference-pool-wiring", moved)]
    assert (
        "spec.selector.matchLabels {app.kubernetes.io/part-of: minimax-m27, llm-d.ai/inference-serving: true} selects "
        "no engine pod template in namespace elsewhere (none found): the gateway has no endpoint to route to."
    ) in " ".join(messages), messages


# --- the router's block size against the engines' reuse unit, per namespace (survivors of make mutate, issue 25) ---


def without_sub_blocks(*deployments):
    return lambda m: [set_env(engine(m, d), "VLLM_RBLN_SUB_BLOCK_CACHE", None) for d in deployments]


def test_without_sub_blocks_the_unit_is_the_block(prod):
    bad = mutate(prod, producer(autoTune=False, blockSizeTokens=2048), without_sub_blocks(PREFILL, DECODE))
    (violation,) = run_policy("router-block-size", bad)
    assert violation.message == (
        "data[epp-config.yaml] plugin approx-prefix-cache-producer parameters.blockSizeTokens 2048 with autoTune "
        f"false is not a whole number of the 4096-token units the engines ({DECODE_ID}, {PREFILL_ID}) reuse "
        "prefixes in (blocks of --block-size 4096): a prefix the router counts as cached ends inside a unit the "
        "engines recompute, so it routes on reuse that does not happen. Set blockSizeTokens 4096 (or a multiple of "
        "it, to track coarser prefixes)."
    )
    # the block itself, 4096, is the unit then: the router set to it agrees
    good = mutate(prod, producer(autoTune=False, blockSizeTokens=4096), without_sub_blocks(PREFILL, DECODE))
    assert run_policy("router-block-size", good) == []


def test_engines_of_another_namespace_or_without_a_block_size_are_not_compared(prod):
    """An engine of another namespace (listed first) serves another router; one without --block-size (and no
    sub-blocks) has no unit to compare. The rebel100 engines are still judged after them."""

    def elsewhere(m):
        other = copy.deepcopy(get(m, "Deployment", DECODE))
        other["metadata"]["namespace"] = "elsewhere"
        set_arg(other["spec"]["template"]["spec"]["containers"][0], "--block-size", "2048")
        m.insert(0, other)

    def decode_without_block(m):
        set_arg(engine(m, DECODE), "--block-size", None)

    bad = mutate(prod, producer(autoTune=False, blockSizeTokens=1000), elsewhere)
    (violation,) = run_policy("router-block-size", bad)
    assert f"the engines ({DECODE_ID}, {PREFILL_ID}) reuse prefixes in (sub-blocks" in violation.message
    good = mutate(prod, producer(autoTune=False, blockSizeTokens=512), without_sub_blocks(DECODE), decode_without_block)
    assert run_policy("router-block-size", good) == []


def test_the_decider_messages_name_the_plugins(prod):
    missing = mutate(
        prod, edit_router(lambda c: plugin(c, "disagg-profile-handler")["parameters"]["deciders"].update(prefill="x"))
    )
    (violation,) = run_policy("router-pd-profiles", missing)
    assert violation.message == (
        "data[epp-config.yaml] disagg-profile-handler parameters.deciders.prefill x names no plugin of the config "
        "(approx-prefix-cache-producer, prefix-cache-scorer, queue-scorer, active-request-scorer, "
        "inflight-load-producer, token-load-scorer, prefill-filter, decode-filter, max-score-picker, "
        "prefix-based-pd-decider, disagg-profile-handler, agent-identity, session-affinity-prefill, "
        "session-affinity-decode). Declare the decider plugin."
    )
    not_a_decider = mutate(
        prod,
        edit_router(
            lambda c: plugin(c, "disagg-profile-handler")["parameters"]["deciders"].update(prefill="queue-scorer")
        ),
    )
    (violation,) = run_policy("router-pd-profiles", not_a_decider)
    assert violation.message == (
        "data[epp-config.yaml] parameters.deciders.prefill queue-scorer is a queue-scorer, not a P/D decider "
        "(prefix-based-pd-decider, prefix-disaggregation-decider, always-disagg-pd-decider). Point it at a decider "
        "plugin."
    )
    disabled = mutate(
        prod, edit_router(lambda c: plugin(c, "prefix-based-pd-decider")["parameters"].update(nonCachedTokens=0))
    )
    (violation,) = run_policy("router-pd-profiles", disabled)
    assert violation.message == (
        "data[epp-config.yaml] plugin prefix-based-pd-decider (prefix-based-pd-decider) parameters.nonCachedTokens 0 "
        "disables the decider: no request is ever prefilled remotely and P/D silently becomes decode-only. Set "
        "nonCachedTokens > 0 (e.g. 16), or use always-disagg-pd-decider."
    )


def epp_container(m):
    return next(c for c in pod_spec(m, EPP)["containers"] if c["name"] == "epp")


def epp_grpc_port(port, *, flag="--grpc-port"):
    """The EPP serves ext-proc on `port` (its flag in `flag`'s form and its container port `grpc`)."""

    def edit(m):
        container = epp_container(m)
        set_arg(container, "--grpc-port", None)
        container["args"] += [f"{flag}={port}"]
        next(p for p in container["ports"] if p["name"] == "grpc")["containerPort"] = port

    return edit


def reaches(target, grpc):
    return (
        f"spec.endpointPickerRef.port.number 9002 reaches targetPort {target} of Service rebel100/{EPP}, but the EPP "
        f"container serves ext-proc on --grpc-port {grpc}: the gateway talks to the wrong listener. Point the pool at "
        f"the Service port whose targetPort is {grpc}."
    )


@pytest.mark.parametrize("flag", ["--grpc-port", "-grpc-port"], ids=["two-dashes", "go-single-dash"])
def test_the_epps_grpc_port_is_read_from_its_flag(prod, flag):
    (finding,) = run_policy("inference-pool-wiring", mutate(prod, epp_grpc_port(9100, flag=flag)))
    assert finding.message == reaches(9002, 9100)


def test_without_the_flag_the_epp_serves_ext_proc_on_9002(prod):
    def no_flag(m):
        set_arg(epp_container(m), "--grpc-port", None)

    assert run_policy("inference-pool-wiring", mutate(prod, no_flag)) == []
    bad = mutate(prod, no_flag, lambda m: epp_service_port(m, 9002).update(targetPort=9003))
    (finding,) = run_policy("inference-pool-wiring", bad)
    assert finding.message == reaches(9003, 9002)


def test_the_epp_container_is_the_one_with_the_epps_flags(prod):
    """A container without the EPP's flags, listed first in the EPP's pod, is not the EPP; a container with only
    --grpc-port is (its pool may come from elsewhere)."""

    def proxy_first(m):
        pod_spec(m, EPP)["containers"].insert(0, {"name": "proxy", "image": "envoy:v1", "args": ["--log-level=info"]})

    (finding,) = run_policy("inference-pool-wiring", mutate(prod, epp_grpc_port(9100), proxy_first))
    assert finding.message == reaches(9002, 9100)

    def without_pool_flag(m):
        set_arg(epp_container(m), "--pool-name", None)

    (finding,) = run_policy("inference-pool-wiring", mutate(prod, epp_grpc_port(9100), without_pool_flag))
    assert finding.message == reaches(9002, 9100)


def test_only_the_pods_the_epp_service_selects_are_read(prod):
    """Another EPP of the namespace, not selected by the Service and listed first, does not decide the port."""

    def other_epp(m):
        other = copy.deepcopy(get(m, "Deployment", EPP))
        other["metadata"]["name"] = "other-epp"
        other["spec"]["template"]["metadata"]["labels"] = {"app": "other-epp"}
        set_arg(other["spec"]["template"]["spec"]["containers"][0], "--grpc-port", "9100")
        m.insert(0, other)

    assert run_policy("inference-pool-wiring", mutate(prod, other_epp)) == []


def test_an_agg_engine_without_per_rank_ports_serves_on_its_port_alone(agg):
    bad = mutate(agg, lambda m: set_arg(engine(m, DECODE), "--data-parallel-multi-port-external-lb", None))
    (finding,) = run_policy("inference-pool-wiring", bad)
    assert finding.message == (
        "spec.targetPorts [8200, 8201, 8202, 8203] includes [8201, 8202, 8203], where none of the selected pods "
        f"listens, so requests sent there fail (the selected pods serve: {DECODE_ID} on [8200] (engine --port and "
        "ranks)). Set spec.targetPorts to [8200]."
    )


def test_a_sidecar_without_a_data_parallel_size_serves_one_rank(prod):
    bad = mutate(prod, lambda m: set_arg(sidecar(m), "--data-parallel-size", None))
    (finding,) = run_policy("inference-pool-wiring", bad)
    assert f"{DECODE_ID} on [8000] (routing sidecar --port and --data-parallel-size)" in finding.message


def test_the_endpoint_picker_messages_list_what_there_is(prod):
    def second_service(m):
        m.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "other", "namespace": "rebel100"}})

    misnamed = mutate(prod, second_service, lambda m: pool_spec(m)["endpointPickerRef"].update(name="router"))
    (finding,) = run_policy("inference-pool-wiring", misnamed)
    assert "names no Service in namespace rebel100 (Services: minimax-m27-epp, other):" in finding.message
    moved = mutate(prod, lambda m: get(m, "InferencePool", POOL)["metadata"].update(namespace="elsewhere"))
    messages = [v.message for v in run_policy("inference-pool-wiring", moved)]
    assert any("names no Service in namespace elsewhere (Services: none):" in m for m in messages), messages

    def unnamed_metrics_port(m):
        next(p for p in get(m, "Service", EPP)["spec"]["ports"] if p["port"] == 9090).pop("name")

    other_port = mutate(
        prod, unnamed_metrics_port, lambda m: pool_spec(m)["endpointPickerRef"].update(port={"number": 9100})
    )
    (finding,) = run_policy("inference-pool-wiring", other_port)
    assert finding.message == (
        f"spec.endpointPickerRef.port.number 9100 is not a port of Service rebel100/{EPP} (ports: 9002 "
        "(grpc-ext-proc), 9003 (grpc-health), 9090 ()). Use the Service's ext-proc port."
    )


def test_a_plugin_is_known_by_its_name_when_it_has_one(prod):
    def named(config):
        plugin(config, "prefix-based-pd-decider")["name"] = "my-decider"
        plugin(config, "disagg-profile-handler")["parameters"]["deciders"]["prefill"] = "my-decider"

    assert run_policy("router-pd-profiles", mutate(prod, edit_router(named))) == []


# --- the sidecar's messages in full, read against the rule (survivors of make mutate SCOPE=policy, issue 25) -------


def test_a_sidecar_without_a_data_parallel_size_fronts_one_rank(prod):
    (finding,) = run_policy(
        "sidecar-matches-decode", mutate(prod, lambda m: set_arg(sidecar(m), "--data-parallel-size", None))
    )
    assert finding.message == (
        "routing sidecar routing-proxy arg --data-parallel-size 1 (default) does not match the decode engine's 4 local "
        "ranks (container vllm --data-parallel-size-local 4): the sidecar listens on one port per rank and ranks it "
        "does not front get no traffic. Set --data-parallel-size 4."
    )


def test_an_unknown_sidecar_connector_lists_the_known_ones(prod):
    (finding,) = run_policy("sidecar-matches-decode", mutate(prod, BAD["sidecar-unknown-connector"][0]))
    assert finding.message == (
        "routing sidecar routing-proxy arg --kv-connector shm is not a connector this pack knows (lmcache, nixl, "
        "nixlv2). Use nixlv2 with a NIXL connector on the engines."
    )


@pytest.mark.parametrize(
    "edit, who, has",
    [
        (lambda m: set_arg(engine(m, DECODE), "--kv-transfer-config", None), "decode container vllm", "none"),
        (
            lambda m: set_arg(
                engine(m, PREFILL), "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
            ),
            f"prefill {PREFILL_ID} container vllm",
            "LMCacheConnectorV1",
        ),
    ],
    ids=["decode", "prefill"],
)
def test_an_engine_without_the_sidecars_connector_is_named(prod, edit, who, has):
    (finding,) = run_policy("sidecar-matches-decode", mutate(prod, edit))
    assert finding.message == (
        f"routing sidecar routing-proxy arg --kv-connector nixlv2 needs a NIXL connector on every engine, but {who} "
        f"--kv-transfer-config has {has}: the KV transfer handshake fails. Add the NIXL connector (RblnNixlConnector "
        "on Rebel100) to its --kv-transfer-config."
    )


def test_when_only_the_newer_epp_misreads_a_pod_it_is_named_with_both_keys_it_reads(prod):
    """Without an EPP among the manifests both generations read the pod: v0.10 reads llm-d.ai/active-ports first."""
    without_epp = mutate(prod, annotate(PREFILL, active="8001"), lambda m: m.remove(get(m, "Deployment", EPP)))
    (finding,) = run_policy("pool-endpoints-serve", without_epp)
    assert finding.message.startswith(
        f"For the v0.10 EPP, which reads {ACTIVE} then {LEGACY}: InferencePool rebel100/{POOL} targets ports "
    ), finding.message


def test_a_speculative_config_that_is_no_json_is_compared_as_written(prod):
    (finding,) = run_policy(
        "pd-roles-agree", mutate(prod, lambda m: set_arg(engine(m, DECODE), "--speculative-config", "eagle3-draft"))
    )
    assert finding.message.startswith(
        f"decode container vllm and prefill ({PREFILL_ID}) differ on --speculative-config: prefill "
        '{"method":"eagle3","model":"asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k","num_speculative_tokens":3,'
        '"revision":"main"} vs decode eagle3-draft;'
    ), finding.message


def test_an_lmcache_sidecar_needs_an_lmcache_connector_on_every_engine(prod):
    """prefill has one (RBLNLMCacheConnectorV1 in its MultiConnector), decode only NIXL: decode is named."""
    (finding,) = run_policy(
        "sidecar-matches-decode", mutate(prod, lambda m: set_arg(sidecar(m), "--kv-connector", "lmcache"))
    )
    assert finding.message == (
        "routing sidecar routing-proxy arg --kv-connector lmcache needs a LMCACHE connector on every engine, but "
        "decode container vllm --kv-transfer-config has RblnNixlConnector: the KV transfer handshake fails. Add the "
        "LMCACHE connector (RBLNLMCacheConnectorV1 on Rebel100) to its --kv-transfer-config."
    )


def test_the_pool_is_read_by_the_epps_its_service_selects(prod):
    """Another EPP of the namespace at v0.7.1, not selected by the pool's Service, does not read the pool: a pod
    annotated only with the key v0.10 reads is fine. The EPP found by its flag in Go's single-dash form decides."""

    def other_v07_epp(m):
        other = copy.deepcopy(get(m, "Deployment", EPP))
        other["metadata"]["name"] = "other-epp"
        other["spec"]["template"]["metadata"]["labels"] = {"app": "other-epp"}
        v07 = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"
        other["spec"]["template"]["spec"]["containers"][0]["image"] = v07
        m.insert(0, other)

    assert run_policy("pool-endpoints-serve", mutate(prod, annotate(PREFILL, legacy=None), other_v07_epp)) == []

    def v07_single_dash(m):
        container = epp_container(m)
        container["image"] = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"
        container["args"] = ["-pool-name=minimax-m27-pool" if a == "--pool-name" else a for a in container["args"]]
        container["args"].remove("minimax-m27-pool")

    (finding,) = run_policy("pool-endpoints-serve", mutate(prod, annotate(PREFILL, legacy=None), v07_single_dash))
    assert finding.message.startswith(f"InferencePool rebel100/{POOL} targets ports"), finding.message


# --- the HTTPRoute's backends, ref by ref (make mutate SCOPE=policy, issue 25) -------------------------------------


def backend_refs(*refs):
    return lambda m: get(m, "HTTPRoute", ROUTE)["spec"]["rules"][0].update(backendRefs=list(refs))


POOL_REF = {"kind": "InferencePool", "name": POOL, "group": "inference.networking.k8s.io"}


def test_a_backend_ref_is_looked_up_in_its_own_namespace(prod):
    (finding,) = run_policy("httproute-backend-exists", mutate(prod, backend_refs({**POOL_REF, "namespace": "other"})))
    assert finding.message == (
        f"spec.rules[0].backendRefs[0] names InferencePool {POOL}, which does not exist in namespace other "
        "(InferencePools: none): the route has no backend and every request fails. Name an existing pool."
    )


def test_every_backend_ref_is_judged_past_services_and_missing_pools(prod):
    """A Service backend is not judged; a missing pool does not stop the refs after it; the pools of the namespace
    are listed; a ref without a group is the core group."""

    def second_pool(m):
        m.append({**get(m, "InferencePool", POOL), "metadata": {"name": "a-pool", "namespace": "rebel100"}})

    refs = backend_refs(
        {"kind": "Service", "name": "web", "port": 80},
        {**POOL_REF, "name": "missing"},
        {"kind": "InferencePool", "name": POOL},
    )
    found = [v.message for v in run_policy("httproute-backend-exists", mutate(prod, second_pool, refs))]
    assert found == [
        "spec.rules[0].backendRefs[1] names InferencePool missing, which does not exist in namespace rebel100 "
        f"(InferencePools: {POOL}, a-pool): the route has no backend and every request fails. Name an existing pool.",
        f"spec.rules[0].backendRefs[2] has group '(core)' but InferencePool {POOL} is inference.networking.k8s.io/v1: "
        "the gateway looks up a kind that does not exist. Set group inference.networking.k8s.io.",
    ]


# --- parallelism-fits-model in full (make mutate SCOPE=policy, issue 25) -------------------------------------------


def test_every_connector_an_engine_has_is_named(prod):
    two = '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"SharedStorageConnector","kv_role":"kv_both"},{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}]}}'  # noqa: E501
    (finding,) = run_policy(
        "sidecar-matches-decode", mutate(prod, lambda m: set_arg(engine(m, PREFILL), "--kv-transfer-config", two))
    )
    assert (
        "--kv-transfer-config has MultiConnector, SharedStorageConnector, LMCacheConnectorV1: the KV" in finding.message
    ), finding.message


def test_each_distinct_prefill_setting_is_compared_with_decode(prod):
    """A second prefill pool at another block size: decode (4096) differs from it, not from the first; the fix names
    the field."""

    def second_prefill(m):
        other = copy.deepcopy(get(m, "Deployment", PREFILL))
        other["metadata"]["name"] = "prefill-b"
        set_arg(other["spec"]["template"]["spec"]["containers"][0], "--block-size", "2048")
        m.append(other)

    (finding,) = run_policy("pd-roles-agree", mutate(prod, second_prefill))
    assert finding.message.startswith(
        "decode container vllm and prefill (Deployment/rebel100/prefill-b) differ on --block-size: prefill 2048 vs "
        "decode 4096"
    ), finding.message
    assert finding.message.endswith("Set the same --block-size on both roles."), finding.message


def test_every_decode_pool_with_a_sidecar_is_judged(prod):
    def second_decode(m):
        other = copy.deepcopy(get(m, "Deployment", DECODE))
        other["metadata"]["name"] = "decode-b"
        m.append(other)
        for deployment in (get(m, "Deployment", DECODE), other):
            proxy = next(
                c for c in deployment["spec"]["template"]["spec"]["initContainers"] if c["name"] == "routing-proxy"
            )
            set_arg(proxy, "--vllm-port", "8001")

    found = run_policy("sidecar-matches-decode", mutate(prod, second_decode))
    assert sorted(v.resource for v in found) == ["Deployment/rebel100/decode-b", DECODE_ID], found


def test_pods_of_another_namespace_are_not_the_pools(prod):
    def elsewhere(m):
        other = copy.deepcopy(get(m, "Deployment", PREFILL))
        other["metadata"]["namespace"] = "elsewhere"
        other["spec"]["template"]["metadata"]["annotations"].pop(ACTIVE)
        other["spec"]["template"]["metadata"]["annotations"].pop(LEGACY)
        m.append(other)

    assert run_policy("pool-endpoints-serve", mutate(prod, elsewhere)) == []


def test_the_routers_block_size_is_judged_only_with_autotune_off(prod):
    """autoTune left out is on (the EPP's default): blockSizeTokens 1000 is then advice's, not router-block-size's.
    Off, the sub-block unit is named with the flag it comes from; a whole number of sub-blocks (4096) passes."""

    def no_autotune(m):
        config = epp_config(m)
        params = plugin(config, "approx-prefix-cache-producer")["parameters"]
        params.pop("autoTune")
        params["blockSizeTokens"] = 1000
        set_epp_config(m, config)

    assert run_policy("router-block-size", mutate(prod, no_autotune)) == []
    assert run_policy("router-block-size", mutate(prod, producer(autoTune=False, blockSizeTokens=4096))) == []
    (finding,) = run_policy("router-block-size", mutate(prod, producer(autoTune=False, blockSizeTokens=1000)))
    assert "reuse prefixes in (sub-blocks of --max-num-batched-tokens 512 (VLLM_RBLN_SUB_BLOCK_CACHE=1))" in (
        finding.message
    ), finding.message


def test_the_handler_names_its_own_profiles(prod):
    """disagg-profile-handler's prefillProfile and decodeProfile name the profiles it runs (prefill and decode by
    default): renamed on both sides the config passes, renamed in the handler only the profile is missing."""

    def rename(config, both):
        plugin(config, "disagg-profile-handler")["parameters"].update(prefillProfile="p", decodeProfile="d")
        if both:
            for profile in config["schedulingProfiles"]:
                profile["name"] = {"prefill": "p", "decode": "d"}[profile["name"]]

    assert run_policy("router-pd-profiles", mutate(prod, edit_router(lambda c: rename(c, True)))) == []
    found = [v.message for v in run_policy("router-pd-profiles", mutate(prod, edit_router(lambda c: rename(c, False))))]
    assert found == [
        "data[epp-config.yaml] schedulingProfiles ['prefill', 'decode'] lacks the 'p' profile the "
        "disagg-profile-handler runs: P/D cannot pick a p endpoint. Add a 'p' profile (its filter plus scorers and a "
        "picker).",
        "data[epp-config.yaml] schedulingProfiles ['prefill', 'decode'] lacks the 'd' profile the "
        "disagg-profile-handler runs: P/D cannot pick a d endpoint. Add a 'd' profile (its filter plus scorers and a "
        "picker).",
    ]


def test_a_handler_without_a_decider_and_a_profile_gives_both_findings(prod):
    def both(config):
        plugin(config, "disagg-profile-handler")["parameters"]["deciders"] = {}
        config["schedulingProfiles"] = [p for p in config["schedulingProfiles"] if p["name"] != "decode"]

    found = [v.message.split(":")[0] for v in run_policy("router-pd-profiles", mutate(prod, edit_router(both)))]
    assert found == [
        "data[epp-config.yaml] disagg-profile-handler has no parameters.deciders.prefill",
        "data[epp-config.yaml] schedulingProfiles ['prefill'] lacks the 'decode' profile the disagg-profile-handler "
        "runs",
    ]


def test_a_pool_reads_its_target_ports_as_its_api_gives_them(prod):
    """A GA pool without targetPorts targets none; an entry without a number is port 0 (the API refuses both)."""
    (finding,) = run_policy("inference-pool-wiring", mutate(prod, lambda m: pool_spec(m).pop("targetPorts")))
    assert finding.message.startswith("spec.targetPorts [] lacks [8000, 8001, 8002, 8003]"), finding.message
    numberless = mutate(prod, lambda m: pool_spec(m).update(targetPorts=[{"number": 8000}, {}]))
    assert any("spec.targetPorts [0, 8000]" in v.message for v in run_policy("inference-pool-wiring", numberless))


def test_the_pd_profiles_are_judged_past_configs_before_them(prod):
    """Two EndpointPickerConfigs listed before the stack's: one in a namespace without engines (not judged), one in
    rebel100 without a profile handler (its own finding). The stack's config after them, without its decode
    profile, is still judged."""

    def others_first(m):
        config = epp_config(m)
        elsewhere = copy.deepcopy(get(m, "ConfigMap", EPP_CONFIG))
        elsewhere["metadata"].update(name="elsewhere-epp-config", namespace="elsewhere")
        no_handler = copy.deepcopy(get(m, "ConfigMap", EPP_CONFIG))
        no_handler["metadata"]["name"] = "plain-epp-config"
        plain = copy.deepcopy(config)
        plain["plugins"] = [p for p in plain["plugins"] if p["type"] != "disagg-profile-handler"]
        no_handler["data"]["epp-config.yaml"] = yaml.safe_dump(plain, sort_keys=False)
        m[:0] = [elsewhere, no_handler]
        config["schedulingProfiles"] = [p for p in config["schedulingProfiles"] if p["name"] != "decode"]
        set_epp_config(m, config)

    found = run_policy("router-pd-profiles", mutate(prod, others_first))
    assert [(v.resource, v.message.split(":")[0]) for v in found] == [
        (
            "ConfigMap/rebel100/plain-epp-config",
            "data[epp-config.yaml] has no disagg-profile-handler or pd-profile-handler plugin although prefill and "
            "decode pods run in namespace rebel100",
        ),
        (
            EPP_CONFIG_ID,
            "data[epp-config.yaml] schedulingProfiles ['prefill'] lacks the 'decode' profile the "
            "disagg-profile-handler runs",
        ),
    ], found
