"""Each config rule: a failing case with its message, and the passing case next to it."""

import pytest

from core.gate import ConfigError, load_config, warnings_for
from core.versions import Version
from tests.conftest import stack_config, stack_file_refusals


def problems(**overrides):
    with pytest.raises(ConfigError) as info:
        load_config(stack_config("prod-4p4d", **overrides))
    return "\n".join(str(issue) for issue in info.value.issues)


def ok(**overrides):
    return load_config(stack_config("prod-4p4d", **overrides))


def test_pp_with_dp_is_refused():
    text = problems(prefill={"pipelineParallelSize": 4, "dataParallelSize": 2})
    assert "rebel100:prefill.pipelineParallelSize: pipeline parallel size 4 together with data parallel size 2" in text
    assert "refuses PP > 1 with DP > 1" in text
    ok(prefill={"pipelineParallelSize": 4, "dataParallelSize": 1})


def test_devices_must_fit_the_node():
    text = problems(decode={"dataParallelSize": 16, "enableExpertParallel": False})
    assert "TP 1 x PP 1 x DP-local 16 = 16 NPUs per pod, more than the 8 NPUs of a node (hardware.npusPerNode)" in text
    ok(decode={"dataParallelSize": 8, "enableExpertParallel": False}, hardware={"nodes": 6})


def test_cluster_must_hold_all_pods():
    text = problems(hardware={"nodes": 3})
    assert "rebel100:hardware.nodes: the stack needs 32 NPUs but 3 nodes x 8 NPUs = 24" in text


def test_pp_at_most_layers():
    text = problems(prefill={"pipelineParallelSize": 64}, hardware={"npusPerNode": 64})
    assert "pipeline parallel size 64 exceeds the model's 62 layers (model.layers)" in text


def test_experts_divisible_by_dp_tp():
    text = problems(decode={"dataParallelSize": 3})
    assert (
        "expert parallel spreads the model's 256 experts (model.experts) over data parallel 3 x tensor parallel 1 = 3 "
        "devices" in text
    )


def test_decode_pp_refused():
    text = problems(decode={"pipelineParallelSize": 2, "dataParallelSize": 1, "enableExpertParallel": False})
    assert (
        "rebel100:decode.pipelineParallelSize: pipeline parallel size 2 on decode: one token per step crosses every "
        "stage, so PP is not usable for decode" in text
    )


def test_block_size_divisible_by_sub_block():
    text = problems(engine={"blockSize": 4000})
    assert (
        "rebel100:engine.blockSize: block size 4000 is not a multiple of the sub-block size 512 "
        "(engine.maxNumBatchedTokens)" in text
    )
    ok(engine={"blockSize": 4000, "subBlockCache": False}, router={"autoTune": True})


def test_gpu_memory_utilization_range():
    text = problems(prefill={"gpuMemoryUtilization": 1.2})
    assert "rebel100:prefill.gpuMemoryUtilization: gpu-memory-utilization 1.2 is outside (0, 1]" in text
    assert "gpu-memory-utilization 0 is outside" in problems(decode={"gpuMemoryUtilization": 0})


def test_max_model_len_at_most_context():
    assert "max-model-len 300000 exceeds the model's context of 204800 tokens (model.maxContext)" in problems(
        engine={"maxModelLen": 300000}
    )


def test_rds_budget_over_chiplet0():
    text = problems(kvTier={"rdsMaxChunks": 4000})
    assert (
        "rebel100:kvTier.rdsMaxChunks: RDS needs kvTier.rdsMaxChunks 4000 x 2 MiB x 2 NVMe drives + 512 MiB staging = "
        "16,512 MiB" in text
    )
    assert "prefill.gpuMemoryUtilization 0.8 leaves 36,864 MiB x (1 - 0.8) = 7,372.8 MiB" in text
    assert "at most 1715 or prefill.gpuMemoryUtilization to at most 0.55" in text
    ok(kvTier={"rdsMaxChunks": 1715})


def test_rds_budget_counts_utilization():
    text = problems(prefill={"gpuMemoryUtilization": 0.95})
    assert "prefill.gpuMemoryUtilization 0.95" in text and "to at most 0.87" in text


def test_cpu_tier_must_fit_memory_limit():
    text = problems(kvTier={"mode": "cpu", "cpuSizeGib": 300})
    assert "the CPU KV tier of 300 GiB does not fit in the prefill memory limit 256Gi" in text
    ok(kvTier={"mode": "cpu", "cpuSizeGib": 64})


def test_kv_tier_needs_prefill():
    config = stack_config("agg", kvTier={"mode": "rds"})
    with pytest.raises(ConfigError, match="has no prefill pods"):
        load_config(config)


def test_roles_agree_on_block_dtype_and_speculative():
    text = problems(
        decode={"blockSize": 8192, "kvCacheDtype": "auto", "speculative": {"method": "ngram", "model": None}}
    )
    assert "prefill 4096 vs decode 8192; NIXL moves KV blocks as they are" in text
    assert "prefill fp8 vs decode auto; decode cannot read KV written in another dtype" in text
    assert "both roles need the same speculative method, draft model and token count" in text


def test_topology_and_prefill_replicas():
    assert "topology 'pd' needs at least one prefill pod" in problems(prefill={"replicas": 0}, kvTier={"mode": "off"})
    with pytest.raises(ConfigError, match=r"topology 'agg' runs no prefill pods but prefill\.replicas is 2"):
        load_config(stack_config("agg", prefill={"replicas": 2}))


def test_decider_that_cannot_fire():
    text = problems(router={"nonCachedTokens": 0})
    assert "router.nonCachedTokens 0 disables the decider" in text
    ok(router={"nonCachedTokens": 0, "decider": "always-disagg"})


def test_router_block_size_without_autotune():
    text = problems(router={"autoTune": False, "blockSizeTokens": 1000})
    assert "Set blockSizeTokens 512 (or a multiple of it" in text
    for whole_units in (512, 4096):  # the engines' 512-token sub-blocks, or 8 of them (what autoTune reads)
        cfg = ok(router={"autoTune": False, "blockSizeTokens": whole_units})
        assert not [w for w in warnings_for(cfg) if "autoTune" in w.path]


def test_decode_port_overlap():
    text = problems(decode={"port": 8002})
    assert "decode.sidecar.port 8000-8003 and decode.port 8002-8005 both take ports 8002-8003 in the decode pod" in text


def test_autotune_warning():
    assert not [w for w in warnings_for(ok()) if "autoTune" in w.path]  # the default: autoTune off, 4096 blocks
    text = "\n".join(str(w) for w in warnings_for(ok(router={"autoTune": True})))
    assert "4096-token units" in text


def test_the_router_block_is_the_engines_unless_set():
    assert ok().router.block_size_tokens == 4096
    assert ok(engine={"blockSize": 2048}).router.block_size_tokens == 2048
    assert ok(engine={"blockSize": 2048}, router={"blockSizeTokens": 512}).router.block_size_tokens == 512
    # A role's own block (which both roles must share) is the one the router follows.
    assert ok(prefill={"blockSize": 8192}, decode={"blockSize": 8192}).router.block_size_tokens == 8192


# An image older than vllm-rbln 0.12.0, the first known to have --shutdown-timeout, passes only without a drain.
NO_DRAIN = {"drainSeconds": 0}


def test_old_lmcache_with_rds_is_refused_as_the_pack_refuses_it():
    """The lmcache-rbln version is the image's (core.versions.engine), not a setting of its own."""
    text = problems(engine={"image": "rebellions/vllm-rbln:0.11.2"}, rollout=NO_DRAIN)
    assert (
        "rebel100:engine.image: rebellions/vllm-rbln:0.11.2 ships lmcache-rbln 0.11.2: rds_max_chunks 1000 is "
        "ignored by lmcache-rbln 0.11.2"
    ) in text
    # Without alerts: they read vLLM metrics no release before 0.12.0 is known to serve (tests/core/test_alerts.py).
    assert ok(
        engine={"image": "rebellions/vllm-rbln:0.11.2"},
        kvTier={"mode": "cpu"},
        rollout=NO_DRAIN,
        observability={"alerts": {"enabled": False}},
    )
    assert ok(engine={"image": "rebellions/vllm-rbln:0.12.0"})


def test_engine_image_older_than_a_feature_of_the_render_is_refused():
    text = problems(engine={"image": "rebellions/vllm-rbln:0.10.2"}, rollout=NO_DRAIN)
    assert "rebel100:engine.image: rebellions/vllm-rbln:0.10.2 (vllm-rbln) is 0.10.2, older than features" in text
    for feature in (
        "connector RblnNixlConnector needs vllm-rbln 0.10.3",
        "connector RBLNLMCacheConnectorV1 needs",
        "env var VLLM_RBLN_SUB_BLOCK_CACHE needs vllm-rbln 0.10.3",
        "env var VLLM_RBLN_USE_DEVICE_TENSOR needs vllm-rbln 0.10.4",
        "flag --data-parallel-multi-port-external-lb needs vllm-rbln 0.11.0",
    ):
        assert feature in text
    assert "Pin 0.11.0 or later." in text
    # Only what the pinned release lacks is named: 0.10.4 has the connectors and env vars, not the vLLM flag.
    text = problems(engine={"image": "rebellions/vllm-rbln:0.10.4"}, kvTier={"mode": "cpu"}, rollout=NO_DRAIN)
    assert (
        "older than features the render uses: flag --data-parallel-multi-port-external-lb needs vllm-rbln 0.11.0"
        in text
    )
    assert "connector" not in text and "VLLM_RBLN_" not in text
    # 0.11.x has every feature but the drain; with RDS its lmcache-rbln (0.11) still ignores rds_max_chunks (and
    # without alerts: they read vLLM metrics only 0.12.0 is known to serve).
    ok(
        engine={"image": "rebellions/vllm-rbln:0.11.2"},
        kvTier={"mode": "cpu"},
        rollout=NO_DRAIN,
        observability={"alerts": {"enabled": False}},
    )


def test_an_engine_image_not_known_to_drain_is_refused_with_a_drain():
    """rollout.drainSeconds is `vllm serve --shutdown-timeout`, known in the vLLM of vllm-rbln 0.12.0 only: an older pin
    with a drain is refused at the image, naming the flag; without a drain the flag is not passed."""
    assert issues(
        engine={"image": "rebellions/vllm-rbln:0.11.2"},
        kvTier={"mode": "cpu"},
        observability={"alerts": {"enabled": False}},
    ) == {
        (
            "rebel100:engine.image",
            "rebellions/vllm-rbln:0.11.2 (vllm-rbln) is 0.11.2, older than features the render uses: flag "
            "--shutdown-timeout needs vllm-rbln 0.12.0 or later (vllm==0.30.0 (pinned by vllm-rbln==0.12.0) `vllm "
            "serve` parser: --shutdown-timeout, int seconds (core/versions/data/vllm-0.30.0-serve.json)). The program "
            "would refuse its configuration and the pod would crash-loop. Pin 0.12.0 or later.",
            "engine-image-has-features",
        )
    }
    ok(
        engine={"image": "rebellions/vllm-rbln:0.12.0"},
        rollout={"drainSeconds": 300, "terminationGracePeriodSeconds": 315},
    )


def test_lmcache_version_knob_is_gone_and_says_why():
    text = problems(engine={"lmcacheRblnVersion": "0.12.0"})
    assert (
        "rebel100:engine.lmcacheRblnVersion: this key moved: set `rebel100:engine.image (the lmcache-rbln version "
        "is a fact of the image's vllm-rbln version"
    ) in text
    assert "(see docs/consumers-engine.md)" in text


def test_independent_errors_reported_together():
    text = problems(
        prefill={"pipelineParallelSize": 4, "dataParallelSize": 2},
        kvTier={"rdsMaxChunks": 4000},
        engine={"maxModelLen": 300000},
    )
    assert "together with data parallel size 2" in text and "RDS needs" in text and "max-model-len 300000" in text


def test_replicas_split_over_groups():
    assert "prefill.replicas 4 cannot be split evenly over placement.groups 3" in problems(placement={"groups": 3})
    ok(placement={"groups": 2})


# --- weights -----------------------------------------------------------------------------------

SHA = "0123456789abcdef0123456789abcdef01234567"
PINNED = {"source": "download", "revision": SHA, "draftRevision": "f" * 40}


def test_download_volume_must_hold_model_and_draft_with_headroom():
    text = problems(weights={**PINNED, "size": "200Gi"})
    assert (
        "rebel100:weights.size: weights.size 200Gi (214.7 GB) is below MiniMaxAI/MiniMax-M2.7 + "
        "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k (234 GB) x headroom 1.2 = 280.8 GB"
    ) in text
    assert "Set weights.size to at least 262Gi." in text
    ok(weights={**PINNED, "size": "262Gi"})
    # A pre-loaded PVC is not the stack's to size.
    ok(weights={"source": "pvc", "size": "1Gi"})


def test_prod_download_must_be_pinned():
    text = problems(weights={"source": "download"})
    assert "rebel100:weights.revision: weights.revision 'main' of MiniMaxAI/MiniMax-M2.7 is not a commit id" in text
    assert "rebel100:weights.draftRevision: weights.draftRevision 'main'" in text
    ok(weights=PINNED)
    ok(weights={"source": "download"}, environment="dev")


def test_gated_download_needs_a_token_secret():
    text = problems(weights={**PINNED, "gated": True})
    assert "rebel100:weights.gated: the weights are gated but the stack neither creates the Secret hf-token" in text
    ok(weights={**PINNED, "gated": True, "tokenSecretExists": True})
    config = stack_config("prod-4p4d", weights={**PINNED, "gated": True})
    config["rebel100:hfToken"] = "[secret]"
    load_config(config)


def test_moved_storage_keys_say_where_they_went():
    text = problems(storage={"modelPvc": "w", "createModelPvc": False})
    assert "rebel100:storage.modelPvc: this key moved: set `rebel100:weights.pvc` instead" in text
    assert "rebel100:storage.createModelPvc: this key moved: set `rebel100:weights.source (download" in text


def test_revision_must_look_like_a_revision():
    assert "rebel100:weights.revision: 'main; rm -rf /' is not valid" in problems(
        weights={"revision": "main; rm -rf /"}
    )


def test_weights_advice():
    preloaded = [str(w) for w in warnings_for(ok())]
    assert any(w.startswith("rebel100:weights.revision: weights.revision 'main' is not a commit id") for w in preloaded)
    unknown = [
        str(w) for w in warnings_for(ok(weights=PINNED, model={"name": "acme/other"}, engine={"speculative": None}))
    ]
    assert any("the size of acme/other (or its draft) is not in core.weights.MODEL_BYTES" in w for w in unknown)


def test_lmcache_names_lmcache_does_not_read_are_refused():
    text = problems(
        prefill={"extraEnv": {"LMCACHE_CHUNKSIZE": "512", "LMCACHE_LOG_LEVEL": "INFO"}},
        kvTier={"extraConfig": {"chunk_size": 512, "rds_prefetch": True}},
    )
    assert (
        "rebel100:prefill.extraEnv.LMCACHE_CHUNKSIZE: LMCACHE_CHUNKSIZE is not a setting lmcache 0.5.6 reads" in text
        and "Did you mean LMCACHE_CHUNK_SIZE?" in text
    )
    assert "rebel100:kvTier.extraConfig.chunk_size: chunk_size is a top-level setting of lmcache 0.5.6" in text
    assert "LMCACHE_LOG_LEVEL" not in text and "rds_prefetch" not in text
    ok(
        prefill={"extraEnv": {"LMCACHE_LOG_LEVEL": "INFO", "LMCACHE_SAVE_DECODE_CACHE": "True"}},
        kvTier={"extraConfig": {"rds_prefetch": True}},
    )


def test_extra_args_vllm_does_not_know_are_refused_at_their_key_in_vllms_words():
    text = problems(
        prefill={"extraArgs": ["--enforce-eager", "--foo"]}, decode={"extraArgs": ["--kv-cache-dtype-x", "1"]}
    )
    assert (
        "rebel100:prefill.extraArgs[1]: `vllm serve` of vLLM 0.30.0 (the vLLM of vllm-rbln 0.12.0) exits with "
        '"unrecognized arguments: --foo"'
    ) in text
    assert "rebel100:decode.extraArgs[0]:" in text and "unrecognized arguments: --kv-cache-dtype-x 1" in text
    assert "prefill.extraArgs[0]" not in text
    ok(prefill={"extraArgs": ["--enforce-eager", "--max-logprobs=5"]}, decode={"extraArgs": ["--disable-log-stats"]})


def test_extra_args_judged_only_against_the_vllm_of_the_target_release():
    """Another release's vLLM may have other flags: its extraArgs are not judged with 0.30.0's list."""
    ok(
        engine={"image": "rebellions/vllm-rbln:0.11.2"},
        kvTier={"mode": "cpu"},
        prefill={"extraArgs": ["--foo"]},
        rollout=NO_DRAIN,
        observability={"alerts": {"enabled": False}},
    )


def test_literal_secret_in_extra_env_is_refused_at_its_key():
    """The gate's own path for `rules.literal_secret`: a name the generated-name check does not know (unlike
    HF_TOKEN, which that check refuses first), so only the literal-secret rule can refuse it."""
    with pytest.raises(ConfigError) as info:
        load_config(stack_config("prod-4p4d", prefill={"extraEnv": {"OPENAI_API_KEY": "sk-live-123456"}}))
    [issue] = info.value.issues
    assert issue.path == "rebel100:prefill.extraEnv.OPENAI_API_KEY"
    assert issue.message.startswith(
        "OPENAI_API_KEY is a literal value (14 characters, not shown) but its name says it is a secret"
    )
    assert "valueFrom.secretKeyRef" in issue.message and "sk-live-123456" not in issue.message
    assert issue.policy == "no-literal-secrets"


def test_extra_env_that_is_no_literal_secret_passes():
    ok(
        decode={
            "extraEnv": {
                "OPENAI_API_KEY": "",
                "OPENAI_API_KEY_FILE": "/var/run/secrets/openai/key",
                "TOKENIZERS_PARALLELISM": "false",
            }
        }
    )


def test_hf_token_in_extra_env_is_refused_as_generated_not_as_literal():
    text = problems(decode={"extraEnv": {"HF_TOKEN": "hf_literal"}})
    assert "rebel100:decode.extraEnv.HF_TOKEN: HF_TOKEN is generated by the program" in text
    assert "is a literal value" not in text


def test_rds_budget_at_exact_equality_passes_the_gate():
    """2176 x 2 MiB x 2 drives + 512 MiB = 9216 MiB = 36,864 MiB x (1 - 0.75): fits; one chunk more does not."""
    ok(prefill={"gpuMemoryUtilization": 0.75}, kvTier={"rdsMaxChunks": 2176})
    text = problems(prefill={"gpuMemoryUtilization": 0.75}, kvTier={"rdsMaxChunks": 2177})
    assert (
        "rebel100:kvTier.rdsMaxChunks: RDS needs kvTier.rdsMaxChunks 2177 x 2 MiB x 2 NVMe drives + 512 MiB staging = "
        "9,220 MiB" in text
    )


def test_experts_divide_over_dp_times_tp_in_the_gate():
    """Decode DP 2 x TP 2 = 4 devices: 8 experts divide, 6 do not (though 6 divide over DP 2 alone)."""
    ok(model={"experts": 8}, decode={"tensorParallelSize": 2, "dataParallelSize": 2})
    text = problems(model={"experts": 6}, decode={"tensorParallelSize": 2, "dataParallelSize": 2})
    assert (
        "rebel100:decode.enableExpertParallel: expert parallel spreads the model's 6 experts (model.experts) over "
        "data parallel 2 x tensor parallel 2 = 4 devices" in text
    )


def test_zero_experts_with_expert_parallel_is_refused():
    text = problems(model={"experts": 0})
    assert "rebel100:decode.enableExpertParallel: expert parallel spreads the model's 0 experts" in text
    ok(model={"experts": 0}, decode={"enableExpertParallel": False})


@pytest.mark.parametrize(
    "token, flag, field",
    [
        ("--port=9000", "--port", "decode.port"),
        ("--port=a=b", "--port", "decode.port"),  # the flag is what stands before the first `=`
        ("--max-model-len", "--max-model-len", "engine.maxModelLen"),
        ("-tp", "--tensor-parallel-size", "decode.tensorParallelSize"),  # vLLM's short alias
        ("-ep", "--enable-expert-parallel", "decode.enableExpertParallel"),
    ],
)
def test_extra_args_may_not_redefine_a_generated_flag(token, flag, field):
    text = problems(decode={"extraArgs": [token]})
    assert f"rebel100:decode.extraArgs[0]: {token!r} redefines {flag}, which the program generates from {field}" in text


# Other vLLM flags pass; a flag vLLM does not know (`--foo=--port`, `-x`) is refused by vLLM's own parser data.
@pytest.mark.parametrize("token", ["--enforce-eager", "--max-logprobs=5", "--disable-log-stats"])
def test_extra_args_of_other_flags_pass(token):
    ok(decode={"extraArgs": [token]})


NO_AUTOTUNE = {"autoTune": False}  # the default: 4096-token blocks, whole sub-blocks: no issue, no advice


@pytest.mark.parametrize(
    "stack, overrides, paths",
    [
        ("prod-4p4d", {}, ["rebel100:weights.revision"]),  # pvc at the branch main
        ("prod-4p4d", {"router": {"autoTune": True}}, ["rebel100:router.autoTune", "rebel100:weights.revision"]),
        ("prod-4p4d", {"router": NO_AUTOTUNE, "weights": {"revision": SHA}}, []),
        (
            "prod-4p4d",
            {"router": NO_AUTOTUNE, "model": {"name": "acme/other"}, "weights": {"revision": SHA}},
            [],
        ),  # a pvc
        ("dev", {"router": NO_AUTOTUNE}, []),  # a download of known size at main: allowed in dev, no advice
        ("dev", {"router": NO_AUTOTUNE, "environment": "dev", "weights": {"source": "pvc"}}, []),  # pvc, not prod
        ("dev", {"router": NO_AUTOTUNE, "model": {"name": "acme/other"}}, ["rebel100:weights.size"]),
        ("dev", {"router": NO_AUTOTUNE, "engine": {"speculative": {"model": "acme/draft"}}}, ["rebel100:weights.size"]),
    ],
)
def test_advice_paths(stack, overrides, paths):
    advice = warnings_for(load_config(stack_config(stack, **overrides)))
    assert [issue.path for issue in advice] == paths


def test_config_error_lists_every_issue_under_one_heading():
    from core.gate import Issue

    one = ConfigError([Issue("rebel100:a", "bad.")], "Pulumi.x.yaml")
    assert str(one) == "Pulumi.x.yaml is invalid (1 problem):\n  - rebel100:a: bad."
    assert one.source == "Pulumi.x.yaml" and one.issues == [Issue("rebel100:a", "bad.")]
    two = ConfigError([Issue("rebel100:a", "bad."), Issue("rebel100:b", "worse.")])
    assert str(two) == ("stack configuration is invalid (2 problems):\n  - rebel100:a: bad.\n  - rebel100:b: worse.")


@pytest.mark.parametrize(
    "overrides, found",
    [
        (
            {"prefill": {"pipelineParallelSize": 4, "dataParallelSize": 2}},  # and 4 x 8 + 4 x 4 = 48 NPUs > 32
            [("rebel100:hardware.nodes", ""), ("rebel100:prefill.pipelineParallelSize", "pp-with-dp")],
        ),
        (
            {"decode": {"dataParallelSize": 16, "enableExpertParallel": False}},
            [
                ("rebel100:decode", "npu-devices-fit-node"),
                ("rebel100:decode.dataParallelSizeLocal", "inference-pool-wiring"),
                ("rebel100:hardware.nodes", ""),
            ],
        ),
        (
            {"prefill": {"pipelineParallelSize": 64}, "hardware": {"npusPerNode": 64}},
            [("rebel100:hardware.nodes", ""), ("rebel100:prefill.pipelineParallelSize", "parallelism-fits-model")],
        ),
        ({"decode": {"dataParallelSize": 3}}, [("rebel100:decode.enableExpertParallel", "parallelism-fits-model")]),
        (
            {"decode": {"pipelineParallelSize": 2, "dataParallelSize": 1, "enableExpertParallel": False}},
            [("rebel100:decode.pipelineParallelSize", "parallelism-fits-model")],
        ),
        (
            {"engine": {"blockSize": 4000}},  # once per role, and the router's block, which follows it
            [
                ("rebel100:engine.blockSize", "engine-args-in-range"),
                ("rebel100:engine.blockSize", "engine-args-in-range"),
                ("rebel100:router.blockSizeTokens", "router-block-size"),
            ],
        ),
        (
            {"prefill": {"blockSize": 4000}},
            [("rebel100:decode.blockSize", "pd-roles-agree"), ("rebel100:prefill.blockSize", "engine-args-in-range")],
        ),
        ({"decode": {"gpuMemoryUtilization": 1.2}}, [("rebel100:decode.gpuMemoryUtilization", "engine-args-in-range")]),
        ({"engine": {"maxModelLen": 300000}}, [("rebel100:engine.maxModelLen", "engine-args-in-range")]),
        ({"kvTier": {"rdsMaxChunks": 4000}}, [("rebel100:kvTier.rdsMaxChunks", "rds-memory-budget")]),
        (
            {"engine": {"image": "rebellions/vllm-rbln:0.11.0"}, "rollout": NO_DRAIN},
            # the two alerts' series, each once
            [
                ("rebel100:engine.image", "alerts-served"),
                ("rebel100:engine.image", "alerts-served"),
                ("rebel100:engine.image", "lmcache-reads-rds-max-chunks"),
            ],
        ),
        ({"kvTier": {"mode": "cpu", "cpuSizeGib": 512}}, [("rebel100:kvTier.cpuSizeGib", "")]),
        ({"hardware": {"nvmeDrivesPerNode": 0}}, [("rebel100:hardware.nvmeDrivesPerNode", "")]),
    ],
)
def test_each_rule_names_its_key_and_the_pack_policy_of_the_same_rule(overrides, found):
    """The key path of each issue, and the policy of the pack that judges the same rule on the render ("" for the
    config-only rules): what `stacks check` and the gates-agree property match on."""
    with pytest.raises(ConfigError) as info:
        load_config(stack_config("prod-4p4d", **overrides))
    assert sorted((issue.path, issue.policy) for issue in info.value.issues) == found


def test_eagle3_needs_its_draft_model_and_other_methods_do_not():
    text = problems(engine={"speculative": {"method": "eagle3", "model": None}})
    assert "rebel100:engine.speculative.model: EAGLE-3 needs a draft model: set engine.speculative.model." in text
    ok(engine={"speculative": {"method": "suffix", "model": None}})


# --- the whole issue: key path, message and policy, written out (issue 18) --------------------------------------
# The tests above match a phrase; these pin every word a user reads, so a changed key path, a dropped value or a
# wrong label in a message fails a test (mutation testing found them unchecked, docs/testing.md).


def issues(stack="prod-4p4d", **overrides):
    """(key path, message, policy) of every issue of the stack with `overrides`, in a set: order is not promised."""
    with pytest.raises(ConfigError) as info:
        load_config(stack_config(stack, **overrides))
    found = [(issue.path, issue.message, issue.policy) for issue in info.value.issues]
    assert len(found) == len(set(found)), f"an issue is reported twice: {found}"
    return set(found)


POD_CLASH = (
    "the containers of a pod share one network namespace, so the second listener cannot bind the port and its "
    "container crash-loops."
)


@pytest.mark.parametrize(
    "stack, overrides, expected",
    [
        (
            "prod-4p4d",
            {"prefill": {"replicas": 0}, "kvTier": {"mode": "off"}},
            {
                (
                    "rebel100:prefill.replicas",
                    "topology 'pd' needs at least one prefill pod; use topology 'agg' for a stack without prefill.",
                    "",
                )
            },
        ),
        (
            "agg",
            {"prefill": {"replicas": 2}},
            {
                (
                    "rebel100:prefill.replicas",
                    "topology 'agg' runs no prefill pods but prefill.replicas is 2: set it to 0.",
                    "",
                )
            },
        ),
        (
            "agg",
            {"prefill": {"replicas": 1}},
            {
                (
                    "rebel100:prefill.replicas",
                    "topology 'agg' runs no prefill pods but prefill.replicas is 1: set it to 0.",
                    "",
                )
            },
        ),
        # 9 ranks on a 9-NPU node: one targetPort more than an InferencePool holds (8).
        (
            "prod-4p4d",
            {
                "decode": {"dataParallelSize": 9, "enableExpertParallel": False},
                "hardware": {"nodes": 6, "npusPerNode": 9},
            },
            {
                (
                    "rebel100:decode.dataParallelSizeLocal",
                    "9 target ports (the stack's InferencePool: one per DP rank of a decode pod) but an "
                    "InferencePool allows at most 8: the API server refuses the pool. Lower "
                    "decode.dataParallelSizeLocal (or decode.dataParallelSize) to at most 8 ranks per pod.",
                    "inference-pool-wiring",
                )
            },
        ),
        # Ranks 8002-8005 against the sidecar's 8000-8003: one issue for the pair, at the key the file sets.
        (
            "prod-4p4d",
            {"decode": {"port": 8002}},
            {
                (
                    "rebel100:decode.port",
                    f"decode.sidecar.port 8000-8003 and decode.port 8002-8005 both take ports 8002-8003 in the decode "
                    f"pod: {POD_CLASH} Set decode.port to a port (and its ranks above it) that nothing else there "
                    "takes, e.g. its default 8200.",
                    "ports-distinct",
                ),
            },
        ),
        (
            "prod-4p4d",
            {"decode": {"dataParallelRpcPort": 8201}},
            {
                (
                    "rebel100:decode.dataParallelRpcPort",
                    f"decode.port 8200-8203 and decode.dataParallelRpcPort 8201 both take port 8201 in the decode pod: "
                    f"{POD_CLASH} Set decode.dataParallelRpcPort to a port that nothing else there takes, e.g. its "
                    "default 5555.",
                    "ports-distinct",
                )
            },
        ),
        # Side channels 5553-5556 against the RPC port 5555.
        (
            "prod-4p4d",
            {"engine": {"nixlSideChannelPort": 5553}},
            {
                (
                    "rebel100:engine.nixlSideChannelPort",
                    f"decode.dataParallelRpcPort 5555 and engine.nixlSideChannelPort 5553-5556 both take port 5555 in "
                    f"the decode pod: {POD_CLASH} Set engine.nixlSideChannelPort to a port (and its ranks above it) "
                    "that nothing else there takes, e.g. its default 5600.",
                    "ports-distinct",
                )
            },
        ),
        # Sidecar 5555-5558, RPC 5555, side channels 5555-5558: one issue per pair, at the key the file sets (of the
        # sidecar and the RPC port, the sidecar); of two keys it sets, at the second (the side channels).
        (
            "prod-4p4d",
            {"decode": {"sidecar": {"port": 5555}}, "engine": {"nixlSideChannelPort": 5555}},
            {
                (
                    "rebel100:decode.sidecar.port",
                    f"decode.sidecar.port 5555-5558 and decode.dataParallelRpcPort 5555 both take port 5555 in the "
                    f"decode pod: {POD_CLASH} Set decode.sidecar.port to a port (and its ranks above it) that nothing "
                    "else there takes, e.g. its default 8000.",
                    "ports-distinct",
                ),
                (
                    "rebel100:engine.nixlSideChannelPort",
                    f"decode.sidecar.port 5555-5558 and engine.nixlSideChannelPort 5555-5558 both take ports 5555-5558 "
                    f"in the decode pod: {POD_CLASH} Set engine.nixlSideChannelPort to a port (and its ranks above it) "
                    "that nothing else there takes, e.g. its default 5600.",
                    "ports-distinct",
                ),
                (
                    "rebel100:engine.nixlSideChannelPort",
                    f"decode.dataParallelRpcPort 5555 and engine.nixlSideChannelPort 5555-5558 both take port 5555 in "
                    f"the decode pod: {POD_CLASH} Set engine.nixlSideChannelPort to a port (and its ranks above it) "
                    "that nothing else there takes, e.g. its default 5600.",
                    "ports-distinct",
                ),
            }
            # The pool follows the sidecar to 5555-5558, where prefill (8000) does not serve.
            | {
                (
                    "rebel100:prefill.port",
                    "the stack's InferencePool targets ports [5555, 5556, 5557, 5558] and selects every "
                    "prefill pod, which serves on [8000] (prefill.port and its DP ranks): the EPP makes "
                    "one endpoint per target port listed in its active-ports annotations [], so the pod "
                    "gets no endpoint: the router never sends it a request. Set prefill.port to one of "
                    "the target ports [5555, 5556, 5557, 5558] (the decode sidecar's: "
                    "decode.sidecar.port and up).",
                    "pool-endpoints-serve",
                )
            },
        ),
        (
            "prod-4p4d",
            {"router": {"nonCachedTokens": 0}},
            {
                (
                    "rebel100:router.nonCachedTokens",
                    "router.nonCachedTokens 0 disables the decider: no request is ever prefilled remotely "
                    "and P/D silently becomes decode-only. Set nonCachedTokens > 0 (e.g. 16), or use "
                    "router.decider always-disagg.",
                    "router-pd-profiles",
                )
            },
        ),
        (
            "prod-4p4d",
            {"router": {"autoTune": False, "blockSizeTokens": 1000}},
            {
                (
                    "rebel100:router.blockSizeTokens",
                    "router.blockSizeTokens 1000 with autoTune false is not a whole number of the 512-token units "
                    "the prefill and decode engines reuse prefixes in (sub-blocks of engine.maxNumBatchedTokens 512 "
                    "(engine.subBlockCache true)): a prefix the router counts as cached ends inside a unit the "
                    "engines recompute, so it routes on reuse that does not happen. Set blockSizeTokens 512 (or a "
                    "multiple of it, to track coarser prefixes).",
                    "router-block-size",
                )
            },
        ),
        # Without sub-block caching the engine reuses whole 4096-token blocks.
        (
            "prod-4p4d",
            {"router": {"autoTune": False, "blockSizeTokens": 512}, "engine": {"subBlockCache": False}},
            {
                (
                    "rebel100:router.blockSizeTokens",
                    "router.blockSizeTokens 512 with autoTune false is not a whole number of the 4096-token "
                    "units the prefill and decode engines reuse prefixes in (blocks of engine.blockSize 4096): a "
                    "prefix the router counts as cached ends inside a unit the engines recompute, so it routes on "
                    "reuse that does not happen. Set blockSizeTokens 4096 (or a multiple of it, to track coarser "
                    "prefixes).",
                    "router-block-size",
                )
            },
        ),
    ],
)
def test_pd_wiring_issues_in_full(stack, overrides, expected):
    assert issues(stack, **overrides) == expected


@pytest.mark.parametrize(
    "stack, overrides",
    [
        (
            "prod-4p4d",
            {"decode": {"dataParallelSize": 8, "enableExpertParallel": False}, "hardware": {"nodes": 6}},
        ),  # 8 ports
        ("prod-4p4d", {"decode": {"port": 8004}}),  # ranks 8004-8007 next to the sidecar's 8000-8003
        ("prod-4p4d", {"engine": {"nixlSideChannelPort": 5556}}),  # side channels 5556-5559 next to RPC 5555
        ("agg", {"router": {"nonCachedTokens": 0}}),  # no P/D decider in agg
        ("agg", {"decode": {"sidecar": {"port": 8200}}}),  # no sidecar in agg
        ("prod-4p4d", {"router": {"nonCachedTokens": 0, "decider": "always-disagg"}}),
        ("prod-4p4d", {"router": {"autoTune": False, "blockSizeTokens": 4096}, "engine": {"subBlockCache": False}}),
        ("prod-4p4d", {"router": {"autoTune": True, "blockSizeTokens": 4096}}),  # autoTune reads the engine's own
    ],
)
def test_pd_wiring_passes(stack, overrides):
    load_config(stack_config(stack, **overrides))


SPEC_EAGLE3 = '{"method":"eagle3","model":"asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k","numSpeculativeTokens":3}'
SPEC_SAME = "both roles need the same speculative method, draft model and token count"
FIELDS = "speculative (prefill.speculative, decode.speculative, engine.speculative)"
SPEC_FIX = "Set it once in engine.speculative and drop the role overrides."


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            {"decode": {"blockSize": 8192, "kvCacheDtype": "auto", "speculative": {"method": "ngram", "model": None}}},
            {
                (
                    "rebel100:decode.blockSize",
                    "prefill and decode differ on blockSize (prefill.blockSize, decode.blockSize, engine.blockSize): "
                    "prefill 4096 vs decode 8192; NIXL moves KV blocks as they are, so both roles need the same block "
                    "size. Set it once in engine.blockSize and drop the role overrides.",
                    "pd-roles-agree",
                ),
                (
                    "rebel100:decode.kvCacheDtype",
                    "prefill and decode differ on kvCacheDtype (prefill.kvCacheDtype, decode.kvCacheDtype, "
                    "engine.kvCacheDtype): prefill fp8 vs decode auto; decode cannot read KV written in another dtype. "
                    "Set it once in engine.kvCacheDtype and drop the role overrides.",
                    "pd-roles-agree",
                ),
                (
                    "rebel100:decode.speculative",
                    f"prefill and decode differ on {FIELDS}: prefill {SPEC_EAGLE3} vs decode "
                    f'{{"method":"ngram","numSpeculativeTokens":3}}; {SPEC_SAME}. {SPEC_FIX}',
                    "pd-roles-agree",
                ),
            },
        ),
        (
            {"prefill": {"speculative": {"method": "suffix", "model": None, "numSpeculativeTokens": 4}}},
            {
                (
                    "rebel100:decode.speculative",
                    f'prefill and decode differ on {FIELDS}: prefill {{"method":"suffix","numSpeculativeTokens":4}} '
                    f"vs decode {SPEC_EAGLE3}; {SPEC_SAME}. {SPEC_FIX}",
                    "pd-roles-agree",
                )
            },
        ),
        # Speculative decoding off in one role only: `none`, not `null`.
        (
            {"engine": {"speculative": None}, "decode": {"speculative": {"method": "ngram", "model": None}}},
            {
                (
                    "rebel100:decode.speculative",
                    f'prefill and decode differ on {FIELDS}: prefill none vs decode {{"method":"ngram",'
                    f'"numSpeculativeTokens":3}}; {SPEC_SAME}. {SPEC_FIX}',
                    "pd-roles-agree",
                )
            },
        ),
        # EAGLE-3 on decode alone: its draft head needs the KV prefill would have filled.
        (
            {"engine": {"speculative": None}, "decode": {"speculative": {"method": "eagle3"}}},
            {
                (
                    "rebel100:decode.speculative",
                    f"prefill and decode differ on {FIELDS}: prefill none vs decode {SPEC_EAGLE3}; EAGLE-3 on decode "
                    "needs it on prefill too: the draft head fills its own KV during prefill, and decode receives "
                    f"that KV with the target model's. {SPEC_FIX}",
                    "pd-roles-agree",
                )
            },
        ),
    ],
)
def test_roles_agree_issues_in_full(overrides, expected):
    assert issues(**overrides) == expected


def test_roles_agree_passes_when_overrides_repeat_the_engine_values():
    ok(prefill={"blockSize": 4096, "kvCacheDtype": "fp8"}, decode={"blockSize": 4096, "kvCacheDtype": "fp8"})
    ok(
        prefill={"speculative": {"method": "ngram", "model": None}},
        decode={"speculative": {"method": "ngram", "model": None}},
    )


def test_roles_need_not_agree_without_prefill():
    """agg has no prefill pods, so a prefill override there meets no decode engine over NIXL."""
    load_config(stack_config("agg", prefill={"blockSize": 8192, "kvCacheDtype": "auto"}))


GENERATED_ENV = "is generated by the program, and a second entry of one name is refused by the API server"


def test_override_issues_in_full():
    found = issues(
        prefill={"extraArgs": ["--enforce-eager", "-pp", "2"], "extraEnv": {"MY_PASSWORD": "hunter2"}},
        decode={
            "extraArgs": ["--max-num-seqs=2"],
            "extraEnv": {"VLLM_RPC_TIMEOUT": "1", "HF_HOME": "/x", "RBLN_DEVICES": "0"},
        },
        kvTier={"extraConfig": {"rds_max_chunks": 5}},
    )
    assert found == {
        (
            "rebel100:prefill.extraArgs[1]",
            "'-pp' redefines --pipeline-parallel-size, which the program generates from "
            "prefill.pipelineParallelSize: the gates would check one value and the engine "
            "run another. Set prefill.pipelineParallelSize instead.",
            "",
        ),
        (
            "rebel100:prefill.extraEnv.MY_PASSWORD",
            "MY_PASSWORD is a literal value (7 characters, not shown) but its name "
            "says it is a secret: a literal ends up in the stack state, the "
            "rendered YAML and anyone's `kubectl get -o yaml`. Take it from a "
            "Secret (valueFrom.secretKeyRef), or rename it if it is not a "
            "secret.",
            "no-literal-secrets",
        ),
        (
            "rebel100:decode.extraArgs[0]",
            "'--max-num-seqs=2' redefines --max-num-seqs, which the program generates "
            "from decode.maxNumSeqs: the gates would check one value and the engine run "
            "another. Set decode.maxNumSeqs instead.",
            "",
        ),
        # A field with a role in it names the role; a variable fixed by the design has no field to set.
        (
            "rebel100:decode.extraEnv.VLLM_RPC_TIMEOUT",
            f"VLLM_RPC_TIMEOUT {GENERATED_ENV} (duplicate entries for key "
            f"[name='VLLM_RPC_TIMEOUT']). Set engine.rpcTimeoutMs instead.",
            "",
        ),
        (
            "rebel100:decode.extraEnv.HF_HOME",
            f"HF_HOME {GENERATED_ENV} (duplicate entries for key [name='HF_HOME']). It "
            f"is fixed by the design; remove it.",
            "",
        ),
        (
            "rebel100:decode.extraEnv.RBLN_DEVICES",
            f"RBLN_DEVICES {GENERATED_ENV} (duplicate entries for key "
            f"[name='RBLN_DEVICES']). Set decode.tensorParallelSize / "
            f"pipelineParallelSize instead.",
            "",
        ),
        (
            "rebel100:kvTier.extraConfig.rds_max_chunks",
            "rds_max_chunks is set by the program from kvTier.rdsMaxChunks, "
            "where the RDS memory budget checks it; here it would silently "
            "replace the checked value. Set kvTier.rdsMaxChunks instead.",
            "",
        ),
    }


def test_prefill_override_names_the_prefill_field():
    assert issues(prefill={"extraArgs": ["--port=9000"], "extraEnv": {"RBLN_DEVICES": "0"}}) == {
        (
            "rebel100:prefill.extraArgs[0]",
            "'--port=9000' redefines --port, which the program generates from "
            "prefill.port: the gates would check one value and the engine run another. "
            "Set prefill.port instead.",
            "",
        ),
        (
            "rebel100:prefill.extraEnv.RBLN_DEVICES",
            f"RBLN_DEVICES {GENERATED_ENV} (duplicate entries for key "
            f"[name='RBLN_DEVICES']). Set prefill.tensorParallelSize / "
            f"pipelineParallelSize instead.",
            "",
        ),
    }


@pytest.mark.parametrize(
    "stack, overrides, expected",
    [
        (
            "agg",
            {"kvTier": {"mode": "cpu"}},
            {
                (
                    "rebel100:kvTier.mode",
                    "kvTier.mode 'cpu' offloads prefill KV, but this stack has no prefill pods (topology "
                    "'agg', prefill.replicas 0): set kvTier.mode off.",
                    "",
                )
            },
        ),
        (
            "prod-4p4d",
            {"prefill": {"replicas": 0}},
            {
                (
                    "rebel100:kvTier.mode",
                    "kvTier.mode 'rds' offloads prefill KV, but this stack has no prefill pods (topology "
                    "'pd', prefill.replicas 0): set kvTier.mode off.",
                    "",
                ),
                (
                    "rebel100:prefill.replicas",
                    "topology 'pd' needs at least one prefill pod; use topology 'agg' for a stack without prefill.",
                    "",
                ),
            },
        ),
        (
            "prod-4p4d",
            {"hardware": {"nvmeDrivesPerNode": 0}},
            {
                (
                    "rebel100:hardware.nvmeDrivesPerNode",
                    "RDS needs NVMe drives: set hardware.nvmeDrivesPerNode or "
                    "kvTier.rdsDrives, or use kvTier.mode cpu.",
                    "",
                )
            },
        ),
        # 256 GiB of tier in a 256Gi limit leaves nothing for the engine: refused at equality.
        (
            "prod-4p4d",
            {"kvTier": {"mode": "cpu", "cpuSizeGib": 256}},
            {
                (
                    "rebel100:kvTier.cpuSizeGib",
                    "the CPU KV tier of 256 GiB does not fit in the prefill memory limit 256Gi "
                    "(prefill.resources.memory): raise the limit or shrink the tier.",
                    "",
                )
            },
        ),
        (
            "prod-4p4d",
            {"kvTier": {"mode": "cpu", "cpuSizeGib": 100.5}, "prefill": {"resources": {"memory": "100Gi"}}},
            {
                (
                    "rebel100:kvTier.cpuSizeGib",
                    "the CPU KV tier of 100.5 GiB does not fit in the prefill memory limit 100Gi "
                    "(prefill.resources.memory): raise the limit or shrink the tier.",
                    "",
                )
            },
        ),
    ],
)
def test_kv_tier_issues_in_full(stack, overrides, expected):
    assert issues(stack, **overrides) == expected


@pytest.mark.parametrize(
    "stack, overrides",
    [
        ("prod-4p4d", {"kvTier": {"mode": "cpu", "cpuSizeGib": 255.5}}),
        ("prod-4p4d", {"hardware": {"nvmeDrivesPerNode": 0}, "kvTier": {"rdsDrives": 1}}),  # drives of its own
        ("prod-4p4d", {"hardware": {"nvmeDrivesPerNode": 0}, "kvTier": {"mode": "cpu"}}),
        ("prod-4p4d", {"kvTier": {"mode": "off", "cpuSizeGib": 1000}}),  # off: no tier to fit
        ("agg", {"kvTier": {"mode": "off", "rdsMaxChunks": 100000}}),
    ],
)
def test_kv_tier_passes(stack, overrides):
    load_config(stack_config(stack, **overrides))


NOT_A_COMMIT = (
    "is not a commit id: a download in prod would take whatever the branch points at on the day the Job "
    "runs, so two environments (or a re-created Job) can serve different weights."
)
GATED = (
    "the weights are gated but the stack neither creates the Secret hf-token (rebel100:hfToken is not set) nor is "
    "told it exists (weights.tokenSecretExists false): the download Job would fail with 401 on its first file. Set "
    "the token with `pulumi config set --secret rebel100:hfToken hf_...`, or create the Secret and set "
    "weights.tokenSecretExists true."
)


def test_weights_issues_in_full():
    assert issues(weights={"source": "download", "size": "200Gi", "gated": True}) == {
        (
            "rebel100:weights.size",
            "weights.size 200Gi (214.7 GB) is below MiniMaxAI/MiniMax-M2.7 + "
            "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k (234 GB) x headroom 1.2 = 280.8 GB: "
            "the download would fill the volume part way and fail. Set weights.size to at least "
            "262Gi.",
            "",
        ),
        (
            "rebel100:weights.revision",
            f"weights.revision 'main' of MiniMaxAI/MiniMax-M2.7 {NOT_A_COMMIT} Set "
            f"weights.revision to the 40-hex commit id to serve.",
            "",
        ),
        (
            "rebel100:weights.draftRevision",
            f"weights.draftRevision 'main' of asherszhang/MiniMax-M2.7-EAGLE3-draft-"
            f"vocab200k {NOT_A_COMMIT} Set weights.draftRevision to the 40-hex commit "
            f"id to serve.",
            "",
        ),
        ("rebel100:weights.gated", GATED, ""),
    }


@pytest.mark.parametrize("speculative", [None, {"method": "suffix", "model": None}])
def test_weights_without_a_draft_size_and_pin_the_model_alone(speculative):
    """No draft model (speculative off, or a draft-free method): 230 GB x 1.2 = 276 GB, and no draft revision."""
    assert issues(weights={"source": "download", "size": "200Gi"}, engine={"speculative": speculative}) == {
        (
            "rebel100:weights.size",
            "weights.size 200Gi (214.7 GB) is below MiniMaxAI/MiniMax-M2.7 (230 GB) x headroom "
            "1.2 = 276 GB: the download would fill the volume part way and fail. Set weights.size "
            "to at least 258Gi.",
            "",
        ),
        (
            "rebel100:weights.revision",
            f"weights.revision 'main' of MiniMaxAI/MiniMax-M2.7 {NOT_A_COMMIT} Set "
            f"weights.revision to the 40-hex commit id to serve.",
            "",
        ),
    }


def test_gated_download_in_dev_is_refused_at_weights_gated():
    assert issues("dev", weights={"gated": True}) == {("rebel100:weights.gated", GATED, "")}
    ok(weights={"gated": True})  # a pre-loaded PVC downloads nothing: no token needed


def paths_and_policies(stack="prod-4p4d", **overrides):
    """(key path, policy) of every issue: for rules whose wording lives (and is tested) in another module."""
    return sorted((path, policy) for path, _, policy in issues(stack, **overrides))


def test_groups_issue_names_each_role_at_its_key():
    assert issues(placement={"groups": 3}) == {
        (
            "rebel100:prefill.replicas",
            "prefill.replicas 4 cannot be split evenly over placement.groups 3 node groups: use a multiple of 3.",
            "",
        ),
        (
            "rebel100:decode.replicas",
            "decode.replicas 4 cannot be split evenly over placement.groups 3 node groups: use a multiple of 3.",
            "",
        ),
    }


def test_vllm_args_refusal_of_decode_alone_is_reported_after_a_prefill_that_parses():
    assert issues(decode={"extraArgs": ["--foo"]}) == {
        (
            "rebel100:decode.extraArgs[0]",
            "`vllm serve` of vLLM 0.30.0 (the vLLM of vllm-rbln 0.12.0) exits with "
            '"unrecognized arguments: --foo" before the engine starts, so the pod '
            "crash-loops. Remove the entry, or spell it as `vllm serve --help` of that "
            "version does.",
            "vllm-args-known",
        )
    }


def test_lmcache_names_carry_the_policy_of_the_pack():
    assert paths_and_policies(
        prefill={"extraEnv": {"LMCACHE_CHUNKSIZE": "512"}}, kvTier={"extraConfig": {"chunk_size": 512}}
    ) == [
        ("rebel100:kvTier.extraConfig.chunk_size", "lmcache-env-known"),
        ("rebel100:prefill.extraEnv.LMCACHE_CHUNKSIZE", "lmcache-env-known"),
    ]


def test_engine_image_issue_carries_the_policy_of_the_pack():
    assert paths_and_policies(engine={"image": "rebellions/vllm-rbln:0.10.4"}, kvTier={"mode": "cpu"}) == [
        ("rebel100:engine.image", "alerts-served"),
        ("rebel100:engine.image", "alerts-served"),
        ("rebel100:engine.image", "engine-image-has-features"),
    ]


API_VERSION_ON_AN_OLD_EPP = (
    "router.configApiVersion llm-d.ai/v1alpha1 is read only by llm-d EPP 0.9.0 or later "
    "(github.com/llm-d/llm-d-router@v0.9.0 apix/config/v1alpha1/zz_generated.register.go), but router.image "
    "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1 is 0.7.1, whose generation reads "
    "inference.networking.x-k8s.io/v1alpha1: the program would refuse its configuration and the pod would crash-loop. "
    "Remove router.configApiVersion (the render then writes inference.networking.x-k8s.io/v1alpha1, which this llm-d "
    "EPP reads), or pin 0.9.0 or later in router.image."
)


def test_epp_pin_older_than_a_feature_is_reported_once_though_its_line_has_schema_data():
    """v0.7.1 has schema data (core/versions/data/epp-v0.7.1.json), which would refuse the v0.9 apiVersion set by
    hand again in its own words; the feature rule names what is missing, and the schema is not asked. The apiVersion
    was set beside the pin: reported at that key (issue 38), naming the pin."""
    assert issues(
        router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1", "configApiVersion": "llm-d.ai/v1alpha1"}
    ) == {("rebel100:router.configApiVersion", API_VERSION_ON_AN_OLD_EPP, "router-images-have-features")}


def test_the_issues_example_the_newer_api_version_with_an_older_epp_is_refused_at_the_api_version(tmp_path):
    text = """\
        rebel100:router:
          image: ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1
          configApiVersion: llm-d.ai/v1alpha1
        rebel100:decode:
          sidecar: {image: ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1}
    """
    assert stack_file_refusals(tmp_path, text) == [
        ("rebel100:router.configApiVersion", API_VERSION_ON_AN_OLD_EPP, "router-images-have-features")
    ]
    # The pin's own apiVersion passes; so does the newer one with a newer pin.
    own = text.replace("llm-d.ai/v1alpha1", "inference.networking.x-k8s.io/v1alpha1")
    assert stack_file_refusals(tmp_path, own) == []
    newer = (
        "rebel100:router:\n  image: ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0\n"
        "  configApiVersion: llm-d.ai/v1alpha1\n"
    )
    assert stack_file_refusals(tmp_path, newer) == []


def test_a_pin_too_old_for_its_plugins_too_is_told_at_the_image_beside_the_api_version():
    """v0.6.0 has no disagg-profile-handler either (a feature of the render, not of the apiVersion): that stays at
    router.image, the apiVersion at its own key."""
    found = issues(
        router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.6.0", "configApiVersion": "llm-d.ai/v1alpha1"}
    )
    assert {(path, policy) for path, _, policy in found} == {
        ("rebel100:router.configApiVersion", "router-images-have-features"),
        ("rebel100:router.image", "router-images-have-features"),
    }
    image = next(message for path, message, _ in found if path == "rebel100:router.image")
    assert "plugin type" in image and "apiVersion" not in image


def test_epp_schema_refusal_in_full():
    assert issues("agg", router={"pluginParameters": {"token-load-scorer": {"queueThreshold": 8192}}}) == {
        (
            "rebel100:router.pluginParameters.token-load-scorer.queueThreshold",
            "the EPP 0.10.0 ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 would refuse "
            "plugins[3].parameters.queueThreshold of the rendered EndpointPickerConfig: json: unknown field "
            '"queueThreshold" (its own rule, from core/versions/data/epp-v0.10.0.json). The pod would crash-loop. '
            "Remove or "
            "correct the parameter, or pin an EPP that has it.",
            "router-config-schema",
        )
    }


def sidecar_data_without(flag):
    """epp_schema.data_for, with a sidecar line that lacks `flag`: the render's flags are known to every sidecar we
    hold data for, so only such data shows how the gate reports a refused flag."""
    from core.versions import epp_schema

    real = epp_schema.data_for

    def data_for(program, pinned):
        data = real(program, pinned)
        if program == "sidecar" and pinned is not None and (pinned.major, pinned.minor) in ((0, 10), (0, 6)):
            data = real(program, Version(0, 10, 0))
            data = {**data, "flags": {k: v for k, v in data["flags"].items() if k != flag}}
        return data

    return data_for


def test_sidecar_flag_its_pin_does_not_know_is_refused_at_the_sidecar_image(monkeypatch):
    from core.versions import epp_schema

    monkeypatch.setattr(epp_schema, "data_for", sidecar_data_without("secure-proxy"))
    assert issues() == {
        (
            "rebel100:decode.sidecar.image",
            "the P/D sidecar 0.10.0 ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0 would refuse flag "
            "--secure-proxy: exits 2: unknown flag: --secure-proxy (its own rule, from "
            "core/versions/data/sidecar-v0.10.0.json). The pod would crash-loop. Pin a sidecar that has the flag.",
            "router-config-schema",
        )
    }
    load_config(stack_config("agg"))  # agg runs no sidecar: its flags are not judged


def test_sidecar_pin_older_than_a_feature_is_reported_once(monkeypatch):
    """v0.6.0 lacks --kv-connector (0.7.0): the feature rule says so; the schema data of its line is not asked."""
    from core.versions import epp_schema

    monkeypatch.setattr(epp_schema, "data_for", sidecar_data_without("kv-connector"))
    assert paths_and_policies(decode={"sidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.6.0"}}) == [
        ("rebel100:decode.sidecar.image", "router-images-have-features")
    ]


@pytest.mark.parametrize(
    "settings, problem, field",
    [
        ({}, ("approx-prefix-cache-producer", "blockSizeTokens"), "router.blockSizeTokens"),  # a generated parameter
        (
            {"pluginParameters": {"token-load-scorer": {"queueThresholdTokens": 1}}},
            ("token-load-scorer", "queueThresholdTokens"),
            "router.pluginParameters.token-load-scorer.queueThresholdTokens",
        ),
        ({}, ("max-score-picker", "maxNumOfEndpoints"), "router.image"),  # rendered, from no field: the pin reads it so
        ({}, (None, None), "router.image"),  # e.g. the apiVersion
    ],
)
def test_router_field_of_a_schema_problem(settings, problem, field):
    from core.config import Router, StackConfig
    from core.gate.router import _router_field
    from core.versions.epp_schema import Problem

    plugin_type, parameter = problem
    router = StackConfig(router=Router.model_validate(settings)).router  # its block resolved, as in a stack
    assert _router_field(router, Problem("p", "m", plugin_type, parameter)) == field


PD_PLUGINS = (
    "active-request-scorer, agent-identity, approx-prefix-cache-producer, decode-filter, disagg-profile-handler, "
    "inflight-load-producer, max-score-picker, prefill-filter, prefix-based-pd-decider, prefix-cache-scorer, "
    "queue-scorer, session-affinity-scorer, token-load-scorer"
)


def test_plugin_parameters_issues_in_full_each_entry_judged():
    assert issues(
        router={
            "pluginParameters": {
                "prefix-cache-affinity-filter": {"x": 1},
                "prefix-based-pd-decider": {"nonCachedTokens": 0},
            }
        }
    ) == {
        (
            "rebel100:router.pluginParameters.prefix-cache-affinity-filter",
            f"plugin type 'prefix-cache-affinity-filter' is not in this stack's EndpointPickerConfig (topology 'pd' "
            f"declares "
            f"{PD_PLUGINS}): its parameters would configure nothing. Use one of those types.",
            "",
        ),
        (
            "rebel100:router.pluginParameters.prefix-based-pd-decider.nonCachedTokens",
            "nonCachedTokens of prefix-based-pd-decider is generated by the program from router.nonCachedTokens, "
            "where the gates check it. Set router.nonCachedTokens instead.",
            "",
        ),
    }


# --- parsing: the config map, schema errors and the heading ---------------------------------------------------


def test_namespace_values_keeps_only_its_own_keys_and_decodes_objects():
    from core.gate import namespace_values

    raw = {
        "aws:region": "x",
        "rebel100:hfToken": "[secret]",
        "rebel100:nodes": 3,
        "rebel100:flag": True,
        "rebel100:prefill": '{"replicas": 2}',
        "rebel100:list": "[1, 2]",
        "rebel100:text": "{not json",
        "rebel100:empty": "",
        "kubernetes:context": "y",
    }
    assert namespace_values(raw) == {
        "nodes": 3,
        "flag": True,
        "prefill": {"replicas": 2},
        "list": [1, 2],
        "text": "{not json",
        "empty": "",
    }


def test_a_key_of_a_map_is_refused_at_the_map_with_the_next_error_beside_it():
    assert issues(prefill={"extraEnv": {"A=B": "x"}}, decode={"replicas": 0}) == {
        (
            "rebel100:prefill.extraEnv",
            "key 'A=B' is not valid: contains '=': an environment variable name is non-empty "
            "printable ASCII without '=' (k8s.io/apimachinery v0.35.4 "
            "pkg/util/validation/validation.go IsRelaxedEnvVarName).",
            "",
        ),
        (
            "rebel100:decode.replicas",
            "0 is not valid: Input should be greater than or equal to 1. (allowed: >= 1 and <= 1024)",
            "",
        ),
    }


def test_a_value_of_a_map_is_refused_at_its_key_without_bounds():
    assert issues(prefill={"extraEnv": {"OK": 5}}) == {
        (
            "rebel100:prefill.extraEnv.OK",
            "5 is a whole number, but prefill.extraEnv.OK takes a str: text (quote a value YAML reads as a number or "
            'a boolean: `cpu: "32"`). Quote it: `OK: "5"`.',
            "",
        )
    }


def test_field_models_of_a_path_through_a_map_is_none():
    from core.config import Prefill, StackConfig
    from core.gate.parse import _field_models

    assert _field_models(StackConfig, ("prefill",)) is Prefill
    assert _field_models(StackConfig, ("prefill", "extraEnv")) is None
    assert _field_models(StackConfig, ("prefill", "replicas")) is None  # a field that is no section
    assert _field_models(StackConfig, ("prefill", "extraEnv", "FOO")) is None
    assert _field_models(StackConfig, ("prefill", "replicas", "x")) is None


def test_a_moved_key_of_a_section_without_its_own_page_points_to_the_readme(monkeypatch):
    """Every moved key today is in a section with a page (storage, engine); the fallback is the README. The page is
    found by the key's first part, also for a key two levels deep."""
    from core import config

    monkeypatch.setitem(config.MOVED_KEYS, "router.oldKey", "router.newKey")
    monkeypatch.setitem(config.MOVED_KEYS, "decode.sidecar.oldPort", "decode.sidecar.port")
    monkeypatch.setitem(config.MOVED_KEYS_DOCS, "decode", "docs/decode.md")
    assert issues(router={"oldKey": 1}, decode={"sidecar": {"oldPort": 1}}) == {
        ("rebel100:router.oldKey", "this key moved: set `rebel100:router.newKey` instead (see the README).", ""),
        (
            "rebel100:decode.sidecar.oldPort",
            "this key moved: set `rebel100:decode.sidecar.port` instead (see docs/decode.md).",
            "",
        ),
    }


def test_config_error_heading_names_the_source():
    for overrides in ({"decode": {"replicas": 0}}, {"placement": {"groups": 3}}):  # schema, then a rule
        with pytest.raises(ConfigError) as info:
            load_config(stack_config("prod-4p4d", **overrides))
        assert str(info.value).startswith("stack configuration is invalid (")
        assert info.value.source == "stack configuration"
        with pytest.raises(ConfigError) as info:
            load_config(stack_config("prod-4p4d", **overrides), "Pulumi.x.yaml")
        assert str(info.value).startswith("Pulumi.x.yaml is invalid (") and info.value.source == "Pulumi.x.yaml"


def test_validate_assumes_no_token_secret_unless_told():
    from core.config import StackConfig
    from core.gate import validate

    cfg = StackConfig.model_validate({"environment": "dev", "weights": {"source": "download", "gated": True}})
    assert [issue.path for issue in validate(cfg)] == ["rebel100:weights.gated"]
    assert validate(cfg, hf_token_set=True) == []


def test_an_engine_image_without_a_version_is_not_judged_on_rds_max_chunks():
    """A digest names no vllm-rbln version, so no lmcache-rbln version either: the pin is refused as undated
    (image-pin-dated), and the RDS rule has nothing to compare (no second issue)."""
    found = issues(engine={"image": "rebellions/vllm-rbln@sha256:" + "a" * 64})
    assert [(path, policy) for path, _, policy in found] == [("rebel100:engine.image", "image-pin-dated")]


def test_roles_need_not_agree_when_pd_has_no_prefill_pods():
    """pd with prefill.replicas 0 is refused once, for the replicas; a prefill override then meets no decode engine."""
    assert issues(prefill={"replicas": 0, "blockSize": 8192}, kvTier={"mode": "off"}) == {
        (
            "rebel100:prefill.replicas",
            "topology 'pd' needs at least one prefill pod; use topology 'agg' for a stack without prefill.",
            "",
        )
    }


def test_rule_weights_assumes_no_token_secret_unless_told():
    from core.config import StackConfig
    from core.derive import derive
    from core.gate import rule_weights

    cfg = StackConfig.model_validate({"environment": "dev", "weights": {"source": "download", "gated": True}})
    assert [issue.path for issue in rule_weights(cfg, derive(cfg))] == ["rebel100:weights.gated"]
    assert list(rule_weights(cfg, derive(cfg), hf_token_set=True)) == []


def test_epp_pin_of_agg_is_judged_by_the_agg_render():
    """agg declares plugins pd does not for this pin (inflight-load-producer, prefix-cache-affinity-filter,
    token-load-scorer: pd's only from 0.9.0): the features come from the stack's own topology (0.8.0 is in no
    generation: it gets the newest render)."""
    [(path, message, policy)] = issues("agg", router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.8.0"})
    assert (path, policy) == ("rebel100:router.image", "router-images-have-features")
    for feature in (
        "plugin type inflight-load-producer needs llm-d EPP 0.9.0",
        "plugin type prefix-cache-affinity-filter needs llm-d EPP 0.9.0",
        "plugin type token-load-scorer needs llm-d EPP 0.9.0",
    ):
        assert feature in message


# --- the pool's endpoints (issue 23) --------------------------------------------------------------------------


def test_prefill_serving_on_no_target_port_is_refused_as_the_pack_refuses_it():
    """The pool targets the decode sidecar's ports; a prefill pod serving on none of them gets no endpoint (the render
    declares the empty set of active ports), so the router never finds a prefill endpoint."""
    assert issues(prefill={"port": 8100}) == {
        (
            "rebel100:prefill.port",
            "the stack's InferencePool targets ports [8000, 8001, 8002, 8003] and selects every prefill pod, which "
            "serves on [8100] (prefill.port and its DP ranks): the EPP makes one endpoint per target port listed in "
            "its active-ports annotations [], so the pod gets no endpoint: the router never sends it a request. Set "
            "prefill.port to one of the target ports [8000, 8001, 8002, 8003] (the decode sidecar's: "
            "decode.sidecar.port and up).",
            "pool-endpoints-serve",
        )
    }


@pytest.mark.parametrize(
    "overrides",
    [{"prefill": {"port": 8003}}, {"prefill": {"port": 7999, "dataParallelSize": 2, "pipelineParallelSize": 1}}],
)
def test_prefill_serving_on_a_target_port_passes(overrides):
    load_config(stack_config("prod-4p4d", **overrides))


def test_pod_annotations_may_not_redefine_the_active_ports():
    found = issues(engine={"podAnnotations": {"llm-d.ai/active-ports": "8001", "example.com/team": "a"}})
    assert found == {
        (
            "rebel100:engine.podAnnotations",
            "'llm-d.ai/active-ports' is written by the program: the target ports of the InferencePool each engine pod "
            "serves on (from prefill.port, decode.sidecar.port and the DP ranks), which the EPP makes its endpoints "
            "of; the value here would be replaced. Remove it.",
            "",
        )
    }


def test_no_autotune_advice_where_the_engines_reuse_whole_blocks():
    """Without sub-block caching the engines reuse --block-size units, the very unit autoTune reads: nothing to advise
    (the pack's router-autotune-block-unit says the same of the render)."""
    cfg = ok(engine={"subBlockCache": False})
    assert [w.path for w in warnings_for(cfg) if w.policy == "router-autotune-block-unit"] == []


def test_validate_derives_the_facts_once(monkeypatch):
    """Every rule reads the facts validate derived (core/derive.py: computed once), none derives its own."""
    from core import derive as derive_module
    from core import gate

    original, calls = derive_module.derive, []

    def counted(cfg):
        calls.append(cfg)
        return original(cfg)

    monkeypatch.setattr(gate, "derive", counted)
    monkeypatch.setattr(derive_module, "derive", counted)
    cfg = load_config(stack_config("prod-autoscale"))
    calls.clear()
    gate.validate(cfg)
    assert len(calls) == 1


def test_the_advice_of_prod_4p4d_in_full():
    """Each piece of advice with its key path, policy and message (issue 25: make mutate SCOPE=core found the
    autoTune and SSRF advice read by a phrase only)."""
    cfg = ok(
        router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1", "autoTune": True},
        decode={"sidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"}},
    )
    assert [(w.path, w.policy, w.message) for w in warnings_for(cfg)][:2] == [
        (
            "rebel100:router.autoTune",
            "router-autotune-block-unit",
            "router.autoTune true: the router reads --block-size 4096 from each pod's vllm:cache_config_info and "
            "tracks prefixes in 4096-token units, while the prefill and decode engines reuse 512-token sub-blocks "
            "(engine.subBlockCache true): a prefix shorter than 4096 tokens that every request shares (a system "
            "prompt) is reused by every engine but steers no routing, which keeps new sessions spread over the pods "
            "(coding agents: the closest to pinning each session, docs/performance.md). Routing on 512-token "
            "prefixes (autoTune false, blockSizeTokens 512, lruCapacityPerServer the per-pod KV block count in "
            "512-token units) draws every new session to the pods that first served the shared prefix.",
        ),
        (
            "rebel100:decode.sidecar.image",
            "sidecar-ssrf-capable",
            "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1 (decode.sidecar.image) is 0.7.1: its SSRF allowlist cannot "
            "read the GA InferencePool's spec.selector.matchLabels (it would refuse every prefill), so it runs "
            "without the protection and, on a decode-only request, POSTs the prompt to any host:port a client sends "
            "in x-prefiller-host-port. Pin 0.10.0 or later: the render then turns --enable-ssrf-protection on.",
        ),
    ]


def test_a_role_that_sets_its_own_block_size_is_named_by_its_key():
    """The unit the router must match is named by the keys it comes from: decode's own, prefill's the engine's."""
    assert problems(
        router={"autoTune": False, "blockSizeTokens": 2048}, engine={"subBlockCache": False}, decode={"blockSize": 4096}
    ) == (
        "rebel100:router.blockSizeTokens: router.blockSizeTokens 2048 with autoTune false is not a whole number of "
        "the 4096-token units the prefill and decode engines reuse prefixes in (blocks of decode.blockSize and "
        "engine.blockSize 4096): a prefix the router counts as cached ends inside a unit the engines recompute, so it "
        "routes on reuse that does not happen. Set blockSizeTokens 4096 (or a multiple of it, to track coarser "
        "prefixes)."
    )


@pytest.mark.parametrize(
    "drop, add, message",
    [
        (
            "--enable-ssrf-protection=true",
            [],
            "the sidecar runs without SSRF protection: on a decode-only request it POSTs the prompt to whatever "
            "host:port a client sends in x-prefiller-host-port (the EPP sets that header only when it picks a prefill "
            "pod), a request forged from inside the cluster. Set --enable-ssrf-protection=true and --inference-pool "
            "rebel100/minimax-m27-pool: it then calls only pods of that pool and answers 403 to anything else.",
        ),
        (
            "rebel100/minimax-m27-pool",
            ["other/pool"],
            "SSRF protection allowlists the pods of InferencePool other/pool, which does not select this pod; the "
            "pool that does is rebel100/minimax-m27-pool: the prefill pods its EPP picks are refused (403) unless "
            "other/pool happens to select them too. Set --inference-pool rebel100/minimax-m27-pool.",
        ),
    ],
    ids=["protection-dropped", "another-pool"],
)
def test_the_gate_refuses_a_sidecar_render_that_drifts_from_the_ssrf_rule(monkeypatch, drop, add, message):
    """The render always protects a pin that can, from the stack's own pool; if it drifted (its flags changed under
    the gate), the rule names the sidecar's image and the policy, as the pack would."""
    from core.gate import router

    rendered = router.rendered_sidecar_args

    def drifted(cfg, facts):
        args = [a for a in rendered(cfg, facts) if a != drop]
        return args + add

    monkeypatch.setattr(router, "rendered_sidecar_args", drifted)
    assert issues() == {("rebel100:decode.sidecar.image", message, "sidecar-ssrf-protection")}


# --- ports of one Service or pod, in stack files written as a user writes them (issue 38) ----------------------------

SERVICE_CLASH = (
    "a Service lists each port once: the API server refuses a second entry of one port (spec.ports: Duplicate value), "
    "and the program behind it cannot listen twice on one port either."
)


def test_the_issues_example_the_grpc_port_on_the_metrics_port_is_refused_at_the_grpc_port(tmp_path):
    assert stack_file_refusals(tmp_path, "rebel100:router:\n  grpcPort: 9090\n") == [
        (
            "rebel100:router.grpcPort",
            "router.grpcPort 9090 and router.metricsPort 9090 both take port 9090 in the EPP's Service minimax-m27-epp "
            f"(and its container): {SERVICE_CLASH} Set router.grpcPort to a port that nothing else there takes, e.g. "
            "its default 9002.",
            "ports-distinct",
        )
    ]


def test_a_clash_is_reported_at_the_key_the_file_sets_though_it_comes_first(tmp_path):
    """decode.port 5600 on the NIXL side channels (the default 5600-5603): the file set decode.port, so it is the
    key to change, though the side channels come later in the pod."""
    assert stack_file_refusals(tmp_path, "rebel100:decode:\n  port: 5600\n") == [
        (
            "rebel100:decode.port",
            "decode.port 5600-5603 and engine.nixlSideChannelPort 5600-5603 both take ports 5600-5603 in the decode "
            f"pod: {POD_CLASH} Set decode.port to a port (and its ranks above it) that nothing else there takes, "
            "e.g. its default 8200.",
            "ports-distinct",
        )
    ]


def test_two_keys_the_file_sets_on_one_port_are_reported_at_the_second_without_a_default_that_clashes(tmp_path):
    text = "rebel100:router:\n  healthPort: 9002\n  metricsPort: 9003\n  grpcPort: 9003\n"
    assert stack_file_refusals(tmp_path, text) == [
        (
            "rebel100:router.metricsPort",
            "router.grpcPort 9003 and router.metricsPort 9003 both take port 9003 in the EPP's Service minimax-m27-epp "
            f"(and its container): {SERVICE_CLASH} Set router.metricsPort to a port that nothing else there takes, "
            "e.g. its default 9090.",
            "ports-distinct",
        ),
    ]
    # Swapped ports clash with nothing.
    assert stack_file_refusals(tmp_path, "rebel100:router:\n  grpcPort: 9003\n  healthPort: 9002\n") == []


def test_a_prefill_rank_on_a_nixl_side_channel_is_refused(tmp_path):
    """Prefill with DP 2 listens on 5599 and 5600; its NIXL side channels are 5600 and 5601."""
    text = "rebel100:prefill:\n  port: 5599\n  dataParallelSize: 2\n  pipelineParallelSize: 1\n"
    assert [issue for issue in stack_file_refusals(tmp_path, text) if issue[2] == "ports-distinct"] == [
        (
            "rebel100:prefill.port",
            "prefill.port 5599-5600 and engine.nixlSideChannelPort 5600-5601 both take port 5600 in the prefill pod: "
            f"{POD_CLASH} Set prefill.port to a port (and its ranks above it) that nothing else there takes, e.g. its "
            "default 8000.",
            "ports-distinct",
        )
    ]


def test_ports_of_different_pods_may_be_equal(tmp_path):
    """The NIXL side channels on 9090-9093, the EPP's metrics port: another pod, another network namespace."""
    assert stack_file_refusals(tmp_path, "rebel100:engine:\n  nixlSideChannelPort: 9090\n") == []


def test_the_key_the_file_sets_is_the_one_blamed():
    from core.gate.blame import likely_wrong, set_in_file

    cfg = load_config({"rebel100:decode": '{"sidecar": {"port": 8000}, "port": 8200}'})
    assert set_in_file(cfg, "decode.sidecar.port") and set_in_file(cfg, "decode.port")
    assert not set_in_file(cfg, "decode.dataParallelRpcPort") and not set_in_file(cfg, "router.grpcPort")
    assert not set_in_file(cfg, "decode.sidecar.image") and not set_in_file(cfg, "decode.port.x")
    assert likely_wrong(cfg, "decode.port", "engine.nixlSideChannelPort") == "decode.port"
    assert likely_wrong(cfg, "engine.nixlSideChannelPort", "decode.port") == "decode.port"
    assert likely_wrong(cfg, "decode.sidecar.port", "decode.port") == "decode.port"  # both set: the second
    assert likely_wrong(cfg, "router.grpcPort", "router.metricsPort") == "router.metricsPort"  # neither: the second


# --- image pins the version facts can date (issue 38) ------------------------------------------------------------

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_the_issues_example_an_epp_pinned_by_digest_alone_is_refused(tmp_path):
    text = f"rebel100:router:\n  image: ghcr.io/llm-d/llm-d-router-endpoint-picker@{DIGEST}\n"
    assert stack_file_refusals(tmp_path, text) == [
        (
            "rebel100:router.image",
            f"router.image ghcr.io/llm-d/llm-d-router-endpoint-picker@{DIGEST} has a digest and no tag: the llm-d EPP "
            "version facts (core/versions/router.py) cannot tell which release it is, so the shape of the "
            "EndpointPickerConfig (its router generation) and the plugin types and apiVersion it may use are guessed: "
            "the newest generation's. Pin the release's tag, beside the digest: "
            f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST} (the tag of the release you run).",
            "image-pin-dated",
        )
    ]


@pytest.mark.parametrize(
    "text, path, what, fix",
    [
        (
            "rebel100:engine:\n  image: rebellions/vllm-rbln:latest\n",
            "rebel100:engine.image",
            "rebellions/vllm-rbln:latest has tag 'latest', which is no version: the vllm-rbln version facts "
            "(core/versions/engine.py)",
            "Pin the release's tag: rebellions/vllm-rbln:0.12.0 (the tag of the release you run).",
        ),
        (
            f"rebel100:engine:\n  image: registry.local:5000/rebellions/vllm-rbln@{DIGEST}\n",
            "rebel100:engine.image",
            f"registry.local:5000/rebellions/vllm-rbln@{DIGEST} has a digest and no tag",
            f"Pin the release's tag, beside the digest: registry.local:5000/rebellions/vllm-rbln:0.12.0@{DIGEST} (the "
            "tag of the release you run).",
        ),
        (
            "rebel100:decode:\n  sidecar: {image: ghcr.io/llm-d/llm-d-router-disagg-sidecar}\n",
            "rebel100:decode.sidecar.image",
            "ghcr.io/llm-d/llm-d-router-disagg-sidecar has no tag: the llm-d P/D sidecar version facts",
            "Pin the release's tag: ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0 (the tag of the release you "
            "run).",
        ),
    ],
)
def test_every_pinned_image_the_facts_judge_must_name_its_release(tmp_path, text, path, what, fix):
    (found,) = stack_file_refusals(tmp_path, text)
    assert found[0] == path and found[2] == "image-pin-dated"
    assert what in found[1] and found[1].endswith(fix), found[1]


@pytest.mark.parametrize(
    "text",
    [
        f"rebel100:router:\n  image: ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST}\n",
        f"rebel100:engine:\n  image: rebellions/vllm-rbln:0.12.0@{DIGEST}\n",
        # Another vLLM image is not judged by the vllm-rbln facts (nor refused for being undated).
        "rebel100:engine:\n  image: vllm/vllm-openai:latest\n",
        # The AGG topology runs no sidecar: its pin is not read.
        "rebel100:topology: agg\nrebel100:prefill:\n  replicas: 0\nrebel100:kvTier:\n  mode: 'off'\n"
        "rebel100:decode:\n  sidecar: {image: ghcr.io/llm-d/llm-d-router-disagg-sidecar:latest}\n",
    ],
)
def test_dated_pins_pass(tmp_path, text):
    assert [f for f in stack_file_refusals(tmp_path, text) if f[2] == "image-pin-dated"] == []


def test_the_engines_grace_period_holds_their_pre_stop_and_drain():
    """rule_engine_grace at its boundary: 15 + 90 = 105 s fits 105, not 104; no preStop and no drain fit 0. One issue
    for both roles, at the grace period's key, tagged with the pack's policy of the same rule."""
    ok(rollout={"terminationGracePeriodSeconds": 105})
    ok(rollout={"terminationGracePeriodSeconds": 0, "preStopSeconds": 0, "drainSeconds": 0})
    assert issues(rollout={"terminationGracePeriodSeconds": 104}) == {
        (
            "rebel100:rollout.terminationGracePeriodSeconds",
            "rollout.terminationGracePeriodSeconds 104 is shorter than rollout.preStopSeconds 15 + "
            "rollout.drainSeconds 90 = 105 s: the grace period counts from the pod's deletion, its preStop included, "
            "so the kubelet kills the engine 1 s before the drain it was given ends, and the requests still running "
            "then fail. Set "
            "rollout.terminationGracePeriodSeconds to at least 105, or shorten rollout.drainSeconds (the longest "
            "request a stopping pod lets finish).",
            "engine-grace-covers-drain",
        )
    }


def test_a_drain_for_an_epp_without_the_flag_is_advice_only_when_set():
    """pd-router07's EPP (v0.7.1) has no --drain-timeout: the default router.drainSeconds says nothing; a set one is
    advice at its key (it would have no effect)."""
    router07 = {"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1", "autoTune": False, "blockSizeTokens": 512}
    assert [i.path for i in warnings_for(ok(router=router07, weights={"revision": "0" * 40}))] == []
    advice = warnings_for(ok(router={**router07, "drainSeconds": 30}, weights={"revision": "0" * 40}))
    assert [i.path for i in advice] == ["rebel100:router.drainSeconds"]
    assert advice[0].message.startswith("router.drainSeconds 30 is set, but ghcr.io/llm-d/llm-d-inference-scheduler:")
    assert (
        warnings_for(
            ok(router={"drainSeconds": 60, "autoTune": False, "blockSizeTokens": 512}, weights={"revision": "0" * 40})
        )
        == []
    )


def test_an_epp_making_its_own_certificate_is_advice_at_prod_only():
    """router.certificate epp: every EPP start waits for an RSA key; advice at a prod stack, silence at dev and with the
    default (stack)."""
    quiet = {"autoTune": False, "blockSizeTokens": 512}  # no autoTune advice in the way
    assert warnings_for(ok(router=quiet, weights={"revision": "0" * 40})) == []
    [advice] = warnings_for(ok(router={**quiet, "certificate": "epp"}, weights={"revision": "0" * 40}))
    assert advice.path == "rebel100:router.certificate"
    assert advice.message.startswith("router.certificate epp: every start of the EPP")
    assert "With failureMode FailOpen the gateway sends each request to a ready pod itself" in advice.message
    [closed] = warnings_for(
        ok(router={**quiet, "certificate": "epp", "failureMode": "FailClose"}, weights={"revision": "0" * 40})
    )
    assert "With failureMode FailClose the gateway answers every request with an error." in closed.message
    assert advice.message.endswith(
        "Set router.certificate stack (the default): the stack makes the certificate once and the EPP reads it at "
        "its start."
    )
    dev = ok(environment="dev", router={**quiet, "certificate": "epp"}, weights={"revision": "0" * 40})
    assert warnings_for(dev) == []


PRECISE = {"prefixCache": "precise", "blockSizeTokens": 512}


@pytest.mark.parametrize("size", [16, 128, 512, 4096])
def test_a_precise_router_in_blocks_that_divide_the_engines_passes(size):
    cfg = ok(router={**PRECISE, "blockSizeTokens": size})
    assert not [w for w in warnings_for(cfg) if "autoTune" in w.path]  # the approximate index only feeds the decider


def test_a_precise_router_in_blocks_that_do_not_divide_the_engines_is_refused():
    text = problems(router={**PRECISE, "blockSizeTokens": 1000})
    assert "rebel100:router.blockSizeTokens: router.blockSizeTokens 1000 with the precise prefix cache" in text
    assert "Set blockSizeTokens to a divisor of 4096 (e.g. 512)" in text


def test_a_precise_router_needs_the_engines_prefix_cache():
    text = problems(router=PRECISE, engine={"enablePrefixCaching": False})
    assert "rebel100:router.prefixCache: router.prefixCache precise with engine.enablePrefixCaching false" in text


def test_a_precise_router_is_refused_where_the_pinned_epp_lacks_it():
    text = problems(router={**PRECISE, "image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"})
    for plugin_type in ("token-producer", "precise-prefix-cache-producer", "endpoint-notification-source"):
        assert f"plugin type {plugin_type} needs llm-d EPP 0.10.0 or later" in text


def test_the_kv_event_sockets_and_the_tokenizer_take_ports_of_their_pods():
    text = problems(router={**PRECISE, "kvEventsPort": 8201, "tokenizerPort": 9090})
    assert "decode.port 8200-8203 and router.kvEventsPort 8201-8204 both take ports 8201-8203 in the decode pod" in text
    assert "router.metricsPort 9090 and router.tokenizerPort 9090 both take port 9090" in text
    assert "prefill.port 8000 and router.kvEventsPort" not in text
    assert "router.kvEventsPort" in problems(router={**PRECISE, "kvEventsPort": 8000})  # prefill's one rank
