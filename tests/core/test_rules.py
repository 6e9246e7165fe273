"""Each rule of core/rules.py at its boundaries, with the verdict written by hand.

A row is the rule's arguments and what it must say: `None` (the values are fine) or the phrases the
refusal must contain, figures worked out by hand from the reference design, never by the rule itself.
The rows sit on both sides of every boundary (equality, one past it, 0, TP > 1), so that a rule
loosened or tightened by one step fails here, not only in the two gates that both call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from core import rules, sizing
from core.versions import Feature, Version

Verdict = Sequence[str] | None


def check(verdict: str | None, expected: Verdict) -> None:
    if expected is None:
        assert verdict is None, verdict
        return
    assert verdict is not None, "the rule passed values it must refuse"
    for phrase in expected:
        assert phrase in verdict, f"{phrase!r} not in {verdict!r}"


def table(rows: dict[str, tuple]) -> Callable:
    """Parametrize a test over named rows (the name shows in the test id)."""
    return pytest.mark.parametrize("args, expected", list(rows.values()), ids=list(rows))


# --- parallelism --------------------------------------------------------------------------------


@table(
    {
        "pp1-dp1": ((1, 1), None),
        "prefill-pp4-dp1": ((4, 1), None),
        "decode-pp1-dp4": ((1, 4), None),
        "pp2-dp2": ((2, 2), ("pipeline parallel size 2 together with data parallel size 2", "PP > 1 with DP > 1")),
        "pp4-dp4": ((4, 4), ("pipeline parallel size 4 together with data parallel size 4",)),
    }
)
def test_pp_with_dp(args, expected):
    check(rules.pp_with_dp(*args), expected)


@table(
    {
        # (TP, PP, DP-local, NPUs per node)
        "prefill-pp4-fills-a-4-npu-node": ((1, 4, 1, 4), None),
        "tp2-pp2-dp2-fills-8": ((2, 2, 2, 8), None),
        "one-npu": ((1, 1, 1, 1), None),
        "tp2-pp2-dp2-on-7": (
            (2, 2, 2, 7),
            (
                "TP 2 x PP 2 x DP-local 2 = 8 NPUs per pod, more than the 7 NPUs of a node (hardware.npusPerNode)",
                "at most 7 NPUs",
            ),
        ),
        "dp-local-5-on-4": ((1, 1, 5, 4), ("= 5 NPUs per pod, more than the 4 NPUs",)),
        "tp-alone-over": ((16, 1, 1, 8), ("TP 16 x PP 1 x DP-local 1 = 16 NPUs per pod",)),
    }
)
def test_devices_fit_node(args, expected):
    check(rules.devices_fit_node(*args, per_node_name="hardware.npusPerNode"), expected)


@table(
    {
        "pp-equals-layers": ((62, 62), None),
        "pp-one-past-layers": (
            (63, 62),
            ("pipeline parallel size 63 exceeds the model's 62 layers (model.layers)", "at most 62 stages"),
        ),
        "pp1-one-layer": ((1, 1), None),
    }
)
def test_pipeline_fits_layers(args, expected):
    check(rules.pipeline_fits_layers(*args, layers_name="model.layers"), expected)


@table(
    {
        # (experts, DP, TP)
        "decode-dp4-tp1": ((256, 4, 1), None),
        "dp3-does-not-divide": (
            (256, 3, 1),
            (
                "256 experts (model.experts) over data parallel 3 x tensor parallel 1 = 3 devices",
                "Choose DP x TP dividing 256",
            ),
        ),
        # DP x TP, not DP alone: 6 experts divide over DP 2 but not over 2 x 2 = 4 devices.
        "tp2-dp2-counts-4-devices": (
            (6, 2, 2),
            ("6 experts (model.experts) over data parallel 2 x tensor parallel 2 = 4 devices",),
        ),
        "tp2-dp4-8-divides-256": ((256, 4, 2), None),
        "tp3-dp2-6-divides-6": ((6, 2, 3), None),
        # 0 % n == 0, yet a model without routed experts has nothing to spread.
        "zero-experts": ((0, 4, 1), ("the model's 0 experts", "= 4 devices", "turn expert parallel off")),
        "zero-experts-one-device": ((0, 1, 1), ("the model's 0 experts",)),
        "one-expert-one-device": ((1, 1, 1), None),
    }
)
def test_experts_divide(args, expected):
    check(rules.experts_divide(*args, experts_name="model.experts"), expected)


def test_experts_divide_counts_dp_times_tp():
    """Killed mutant: `shards = dp` (TP ignored). Every earlier case used TP 1, where the two agree."""
    assert rules.experts_divide(6, 2, 1, experts_name="model.experts") is None
    assert "= 4 devices" in rules.experts_divide(6, 2, 2, experts_name="model.experts")


def test_experts_divide_refuses_zero_experts_with_expert_parallel():
    """Killed mutant: `experts == 0` dropped (0 % shards is 0, so 0 experts would pass)."""
    assert rules.experts_divide(0, 4, 1, experts_name="model.experts") is not None


@table({"pp1": ((1,), None), "pp2": ((2,), ("pipeline parallel size 2 on decode",))})
def test_decode_without_pipeline(args, expected):
    check(rules.decode_without_pipeline(*args), expected)


@table(
    {
        "zero": ((0.0,), ("gpu-memory-utilization 0 is outside (0, 1]",)),
        "negative": ((-0.1,), ("gpu-memory-utilization -0.1 is outside",)),
        "just-above-zero": ((0.01,), None),
        "prefill-0.8": ((0.8,), None),
        "one": ((1.0,), None),
        "just-above-one": ((1.01,), ("gpu-memory-utilization 1.01 is outside (0, 1]",)),
    }
)
def test_utilization_in_range(args, expected):
    check(rules.utilization_in_range(*args), expected)


@table(
    {
        "4096-over-512": ((4096, 512), None),
        "equal": ((512, 512), None),
        "4000-over-512": (
            (4000, 512),
            (
                "block size 4000 is not a multiple of the sub-block size 512 (engine.maxNumBatchedTokens)",
                "divisible by 512",
            ),
        ),
        "smaller-than-sub-block": ((256, 512), ("block size 256 is not a multiple",)),
    }
)
def test_block_holds_sub_blocks(args, expected):
    check(rules.block_holds_sub_blocks(*args, sub_block_name="engine.maxNumBatchedTokens"), expected)


@table(
    {
        "equal": ((204800, 204800), None),
        "one-past": (
            (204801, 204800),
            ("max-model-len 204801 exceeds the model's context of 204800 tokens (model.maxContext)", "at most 204800"),
        ),
        "below": ((8192, 204800), None),
    }
)
def test_max_model_len_fits(args, expected):
    check(rules.max_model_len_fits(*args, context_name="model.maxContext"), expected)


# --- the RDS memory budget (reference design section 5) -----------------------------------------


def budget(
    chunks: int,
    utilization: float | None,
    *,
    drives: int = 2,
    staging: float = 512.0,
    overhead: float = 2.0,
    hbm_gib: float = 36.0,
) -> sizing.RdsBudget:
    return sizing.rds_budget(
        rds_max_chunks=chunks,
        chunk_overhead_mib=overhead,
        drives=drives,
        staging_mib=staging,
        hbm_per_chiplet_gib=hbm_gib,
        gpu_memory_utilization=utilization,
    )


def rds_verdict(value: sizing.RdsBudget) -> str | None:
    return rules.rds_budget_fits(
        value, chunks_name="kvTier.rdsMaxChunks", utilization_name="prefill.gpuMemoryUtilization"
    )


@table(
    {
        # chunks x 2 MiB x drives + staging <= 36 GiB x 1024 x (1 - utilization)
        "target-1000-at-0.8": ((1000, 0.8), None),  # 4000 + 512 = 4512 <= 7372.8
        "exact-equality": ((2176, 0.75), None),  # 2176 x 2 x 2 + 512 = 9216 = 36864 x 0.25
        "one-chunk-over": (
            (2177, 0.75),
            (
                "RDS needs kvTier.rdsMaxChunks 2177 x 2 MiB x 2 NVMe drives + 512 MiB staging "
                "= 9,220 MiB of chiplet-0 memory",
                "prefill.gpuMemoryUtilization 0.75 leaves 36,864 MiB x (1 - 0.75) = 9,216 MiB",
                "Lower kvTier.rdsMaxChunks to at most 2176 or prefill.gpuMemoryUtilization to at most 0.74",
            ),
        ),
        "4000-at-0.8": ((4000, 0.8), ("= 16,512 MiB", "= 7,372.8 MiB", "at most 1715", "at most 0.55")),
        "engine-default-0.9": ((1000, None), ("gpuMemoryUtilization 0.9 leaves", "= 3,686.4 MiB", "at most 793")),
    }
)
def test_rds_budget_fits(args, expected):
    check(rds_verdict(budget(*args)), expected)


def test_rds_budget_fits_at_exact_equality():
    """Killed mutant: `used <= free` changed to `<`. 2176 chunks x 2 MiB x 2 drives + 512 MiB staging = 9216 MiB,
    and 36 GiB = 36864 MiB x (1 - 0.75) = 9216 MiB: equal, so it fits (the section 5 rule is `<=`)."""
    value = budget(2176, 0.75)
    assert (value.used_mib, value.free_mib) == (9216, 9216)
    assert value.fits and value.headroom_mib == 0
    assert rds_verdict(value) is None
    assert rds_verdict(budget(2177, 0.75)) is not None


@table(
    {
        "none": ((None, 1000), None),
        "empty": (("", 1000), None),
        "first-that-reads": (("0.12.0", 1000), None),
        "later": (("v0.13", 1000), None),
        "last-that-ignores": (
            ("0.11.9", 1000),
            (
                "rds_max_chunks 1000 is ignored by lmcache-rbln 0.11.9: only 0.12.0 and later read it",
                "lmcache-rbln 0.12.0 or later",
            ),
        ),
    }
)
def test_lmcache_reads_rds_max_chunks(args, expected):
    check(rules.lmcache_reads_rds_max_chunks(*args), expected)


# --- literal secrets ------------------------------------------------------------------------------


@table(
    {
        "api-key": (
            ("OPENAI_API_KEY", "sk-live-123456"),
            ("OPENAI_API_KEY is a literal value (14 characters, not shown)", "valueFrom.secretKeyRef"),
        ),
        "apikey-one-word": (("SERVICE_APIKEY", "q9z"), ("SERVICE_APIKEY is a literal value (3 characters",)),
        "password": (("REDIS_PASSWORD", "hunter2"), ("(7 characters",)),
        "passwd": (("PASSWD", "#"), ("(1 characters",)),
        "secret-lower-case": (("aws_secret_access_key", "AKIA-q9z"), ("aws_secret_access_key is a literal value",)),
        "token-alone": (("TOKEN", "q9z-token"), ("TOKEN is a literal value (9 characters",)),
        "token-in-the-middle": (("GITHUB_TOKEN_VALUE", "ghp_q9z"), ("GITHUB_TOKEN_VALUE",)),
        # Empty values hold nothing to leak.
        "empty-value": (("REDIS_PASSWORD", ""), None),
        # A name segment, not a substring.
        "tokens-plural": (("MAX_NUM_BATCHED_TOKENS", "512"), None),
        "tokenizers": (("TOKENIZERS_PARALLELISM", "false"), None),
        "secret-inside-a-word": (("SECRETARY", "x"), None),
        "no-secret-word": (("VLLM_RPC_TIMEOUT", "1800000"), None),
        # Pointer suffixes: the value says where the secret is, not what it is.
        "pointer-file": (("HF_TOKEN_FILE", "/var/run/secrets/hf/token"), None),
        "pointer-path": (("DB_PASSWORD_PATH", "/etc/db/password"), None),
        "pointer-dir": (("API_KEY_DIR", "/etc/keys"), None),
        "pointer-name": (("API_KEY_SECRET_NAME", "openai"), None),
        "pointer-lower-case": (("hf_token_file", "/token"), None),
        "pointer-suffix-not-at-end": (("API_KEY_FILE_CONTENT", "q9z"), ("API_KEY_FILE_CONTENT is a literal value",)),
    }
)
def test_literal_secret(args, expected):
    verdict = rules.literal_secret(*args)
    check(verdict, expected)
    if verdict:
        assert args[1] not in verdict, "the secret's value must never be printed"


@pytest.mark.parametrize(
    "name, secret",
    [
        ("OPENAI_API_KEY", True),
        ("api-key", False),
        ("API-KEY", False),
        ("X_PASSWORD", True),
        ("HF_TOKEN", True),
        ("HF_TOKEN_NAME", False),
        ("TOKEN_NAME_X", True),
        ("", False),
    ],
)
def test_is_secret_name(name, secret):
    assert rules.is_secret_name(name) is secret


# --- model weights ----------------------------------------------------------------------------


@table(
    {
        # size, needed, headroom: 200 GB x 1.25 = 250 GB
        "exactly-enough": ((250_000_000_000, 200_000_000_000, 1.25, "250G"), None),
        "233Gi-is-enough": ((233 * sizing.GIB, 200_000_000_000, 1.25, "233Gi"), None),
        "232Gi-is-short": (
            (232 * sizing.GIB, 200_000_000_000, 1.25, "232Gi"),
            (
                "weights.size 232Gi (249.1 GB) is below M (200 GB) x headroom 1.25 = 250 GB",
                "Set weights.size to at least 233Gi",
            ),
        ),
        "one-byte-short": ((249_999_999_999, 200_000_000_000, 1.25, "x"), ("at least 233Gi",)),
    }
)
def test_weights_volume_fits(args, expected):
    size, needed, headroom, text = args
    check(
        rules.weights_volume_fits(size, needed, headroom, size_name="weights.size", size_text=text, what="M"), expected
    )


@table(
    {
        "commit": (("0123456789abcdef0123456789abcdef01234567",), None),
        "branch": (
            ("main",),
            ("weights.revision 'main' of MiniMaxAI/MiniMax-M2.7 is not a commit id", "the 40-hex commit id"),
        ),
        "39-hex": (("0123456789abcdef0123456789abcdef0123456",), ("is not a commit id",)),
        "upper-case-hex": (("0123456789ABCDEF0123456789ABCDEF01234567",), ("is not a commit id",)),
    }
)
def test_revision_pinned(args, expected):
    check(rules.revision_pinned(*args, revision_name="weights.revision", repository="MiniMaxAI/MiniMax-M2.7"), expected)


@table(
    {
        "not-gated": ((False, False), None),
        "not-gated-token-known": ((False, True), None),
        "gated-token-known": ((True, True), None),
        "gated-no-token": (
            (True, False),
            (
                "the weights are gated but the stack neither creates the Secret hf-token "
                "(rebel100:hfToken is not set) nor is told it exists (weights.tokenSecretExists "
                "false)",
                "pulumi config set --secret rebel100:hfToken",
            ),
        ),
    }
)
def test_gated_download_token(args, expected):
    check(
        rules.gated_download_token(
            *args, secret="hf-token", token_name="rebel100:hfToken", exists_name="weights.tokenSecretExists"
        ),
        expected,
    )


@table(
    {
        "same": (("revision", "abc", "abc"), None),
        "differ": (
            ("revision", "abc", "def"),
            (
                "the engine serves revision abc but its weights volume holds def (job)",
                "Serve def, or change the download to abc",
            ),
        ),
    }
)
def test_weights_match(args, expected):
    check(rules.weights_match(*args, held_by="job"), expected)


# --- image pins -----------------------------------------------------------------------------------

FLAG = Feature("vllm-rbln", "flag", "--new-flag", Version(0, 10, 2), "test@0.10.2")
PLUGIN = Feature("vllm-rbln", "env var", "VLLM_NEW", Version(0, 11, 0), "test@0.11.0")


@table(
    {
        "no-version-in-tag": ((None, [FLAG]), None),
        "nothing-used": ((Version(0, 1, 0), []), None),
        "pin-equals-first-version": ((Version(0, 10, 2), [FLAG]), None),
        "pin-newer": ((Version(0, 11, 0), [FLAG, PLUGIN]), None),
        "pin-one-patch-older": (
            (Version(0, 10, 1), [FLAG]),
            (
                "img:0.10.1 (engine.image) is 0.10.1, older than features "
                "the render uses: flag --new-flag needs vllm-rbln 0.10.2 or "
                "later (test@0.10.2)",
                "Pin 0.10.2 or later",
            ),
        ),
        "pin-older-than-both": (
            (Version(0, 10, 0), [PLUGIN, FLAG]),
            (
                "flag --new-flag needs vllm-rbln 0.10.2 or later (test@0.10.2); env var VLLM_NEW needs",
                "Pin 0.11.0 or later",
            ),
        ),
    }
)
def test_image_has_features(args, expected):
    pinned, used = args
    image = f"img:{pinned}" if pinned else "img:latest"
    check(rules.image_has_features(image, pinned, used, image_name="engine.image"), expected)


# --- the routing sidecar's SSRF protection ------------------------------------------------------

V0100, V091, V071 = Version(0, 10, 0), Version(0, 9, 1), Version(0, 7, 1)
OWN = "ns/s-pool"


@table(
    {
        # (pinned, protected, pool, fronting)
        "protected-from-its-own-pool": ((V0100, True, OWN, [OWN]), None),
        "protected-pool-unknown-to-the-caller": ((V0100, True, "ns/other", []), None),
        "protected-no-version": ((None, True, OWN, [OWN]), None),
        "unprotected": (
            (V0100, False, None, [OWN]),
            (
                "runs without SSRF protection",
                "POSTs the prompt to whatever host:port a client sends in x-prefiller-host-port",
                "Set --enable-ssrf-protection=true and --inference-pool ns/s-pool",
            ),
        ),
        "unprotected-no-version": ((None, False, None, []), ("runs without SSRF protection",)),
        "no-pool": ((V0100, True, None, [OWN]), ("no InferencePool is named: the sidecar refuses to start",)),
        "another-pool": (
            (V0100, True, "ns/other", [OWN]),
            (
                "allowlists the pods of InferencePool ns/other, which does not "
                "select this pod; the pool that does is ns/s-pool",
            ),
        ),
        "before-the-ga-allowlist-protected": (
            (V091, True, OWN, [OWN]),
            ("SSRF protection is on but img:0.9.1 is 0.9.1", "refuses every prefill", "Pin 0.10.0 or later"),
        ),
        "before-the-ga-allowlist-unprotected": ((V071, False, None, [OWN]), None),  # advice: sidecar_ssrf_capable
    }
)
def test_sidecar_ssrf_protection(args, expected):
    pinned, protected, pool, fronting = args
    image = f"img:{pinned}" if pinned else "img:latest"
    check(
        rules.sidecar_ssrf_protection(
            image,
            pinned,
            protected=protected,
            pool=pool,
            fronting=fronting,
            can_protect=pinned is None or pinned >= V0100,
            since=V0100,
            fix_pool=OWN,
        ),
        expected,
    )


@table(
    {
        "can-protect": ((V0100, False), None),
        "no-version": ((None, False), None),
        "protected-anyway": ((V071, True), None),  # the mandatory rule says it refuses every prefill
        "one-minor-older": (
            (V091, False),
            ("img:0.9.1 (decode.sidecar.image) is 0.9.1: its SSRF allowlist cannot read", "Pin 0.10.0 or later"),
        ),
        "v0.7.1": (
            (V071, False),
            ("is 0.7.1", "POSTs the prompt to any host:port a client sends in x-prefiller-host-port"),
        ),
    }
)
def test_sidecar_ssrf_capable(args, expected):
    pinned, protected = args
    image = f"img:{pinned}" if pinned else "img:latest"
    check(
        rules.sidecar_ssrf_capable(
            image,
            pinned,
            protected=protected,
            can_protect=pinned is None or pinned >= V0100,
            since=V0100,
            image_name="decode.sidecar.image",
        ),
        expected,
    )


# --- pool_endpoints_serve: the endpoints the EPP makes of a pod the InferencePool selects -----------------------


def _endpoints(targets, serving, active):
    return rules.pool_endpoints_serve(
        "InferencePool ns/p",
        "Deployment ns/prefill",
        targets,
        serving,
        active,
        serving_name="its engine port",
        active_name="llm-d.ai/active-ports",
        fix="Declare the ports.",
    )


def test_a_pod_without_active_ports_gets_an_endpoint_per_target_port_and_the_dead_ones_are_named():
    assert _endpoints([8003, 8000, 8001, 8002], [8000], None) == (
        "InferencePool ns/p targets ports [8000, 8001, 8002, 8003] and selects Deployment ns/prefill, which serves on "
        "[8000] (its engine port): the EPP makes one endpoint per target port (it declares no llm-d.ai/active-ports), "
        "so the endpoints on [8001, 8002, 8003] lead nowhere and a request the router sends there fails (a P/D "
        "prefill pick: 502 from the decode sidecar). Declare the ports."
    )


def test_active_ports_that_are_no_target_ports_are_dropped_beside_a_dead_one():
    assert _endpoints([8000, 8001], [8000], [8000, 8001, 9000]) == (
        "InferencePool ns/p targets ports [8000, 8001] and selects Deployment ns/prefill, which serves on [8000] (its "
        "engine port): the EPP makes one endpoint per target port listed in its llm-d.ai/active-ports "
        "[8000, 8001, 9000], so the endpoints on [8001] lead nowhere and a request the router sends there fails (a "
        "P/D prefill pick: 502 from the decode sidecar); and [9000] are no target ports of the pool: the EPP drops "
        "them. Declare the ports."
    )


def test_active_ports_outside_the_targets_leave_the_pod_without_an_endpoint():
    assert _endpoints([8000], [8000], [9000]) == (
        "InferencePool ns/p targets ports [8000] and selects Deployment ns/prefill, which serves on [8000] (its "
        "engine port): the EPP makes one endpoint per target port listed in its llm-d.ai/active-ports [9000], so the "
        "pod gets no endpoint: the router never sends it a request; and [9000] are no target ports of the pool: the "
        "EPP drops them. Declare the ports."
    )


@pytest.mark.parametrize(
    "targets, serving, active",
    [
        ([8000, 8001, 8002, 8003], [8000], [8000]),  # prefill pods, as rendered
        ([8000, 8001, 8002, 8003], [8000, 8001, 8002, 8003], None),  # decode pods serve every target port
    ],
)
def test_endpoints_that_all_lead_somewhere_pass(targets, serving, active):
    assert _endpoints(targets, serving, active) is None


# --- sidecar_ssrf_protection ---------------------------------------------------------------------------------------


def _ssrf(pinned, **kwargs):
    args = dict(
        protected=True,
        pool="ns/pool",
        fronting=["ns/pool"],
        can_protect=True,
        since=Version(0, 10, 0),
        fix_pool="ns/pool",
    )
    return rules.sidecar_ssrf_protection("sidecar:x", pinned, **{**args, **kwargs})


def test_protection_a_sidecar_cannot_give_is_named_by_its_image_alone_without_a_version():
    assert _ssrf(None, can_protect=False).startswith(
        "SSRF protection is on but sidecar:x, whose allowlist reads an InferencePool's spec.selector as a flat map"
    )
    assert _ssrf(Version(0, 7, 1), can_protect=False).startswith("SSRF protection is on but sidecar:x is 0.7.1, whose")


def test_protection_naming_another_pool_names_every_pool_that_selects_the_pod():
    assert _ssrf(Version(0, 10, 0), pool="ns/a", fronting=["ns/b", "ns/c"]) == (
        "SSRF protection allowlists the pods of InferencePool ns/a, which does not select this pod; the pool that does "
        "is ns/b or ns/c: the prefill pods its EPP picks are refused (403) unless ns/a happens to select them too. Set "
        "--inference-pool ns/pool."
    )


# --- the router and the P/D pair: whole sentences, so that every word the two gates print is checked ----------------


@pytest.mark.parametrize("count", [0, 1, 8])
def test_pool_target_ports_fit_up_to_eight(count):
    assert rules.pool_target_ports_fit(count, ports_name="spec.targetPorts", fix="Fix.") is None


def test_pool_target_ports_fit_refuses_nine():
    assert rules.pool_target_ports_fit(9, ports_name="spec.targetPorts", fix="Lower the ranks.") == (
        "9 target ports (spec.targetPorts) but an InferencePool allows at most 8: the API server refuses the pool. "
        "Lower the ranks."
    )


@pytest.mark.parametrize("tokens, fires", [(16, True), (1, True), (0.5, True), (0, False), (-1, False), (None, False)])
def test_decider_fires_above_zero_tokens(tokens, fires):
    assert rules.decider_fires(tokens) is fires


def test_pd_decider_fires():
    assert rules.pd_decider_fires(1, tokens_name="t", always_name="a") is None
    assert rules.pd_decider_fires("16", tokens_name="parameters.nonCachedTokens", always_name="always-x") == (
        "parameters.nonCachedTokens 16 disables the decider: no request is ever prefilled remotely and P/D silently "
        "becomes decode-only. Set nonCachedTokens > 0 (e.g. 16), or use always-x."
    )


BLOCK_NAMES = dict(block_name="B", batched_name="M", sub_block_name="S on", precise=False)


@pytest.mark.parametrize("size", [512, 1024, 4096])
def test_a_router_block_of_whole_sub_blocks_passes_with_sub_block_caching(size):
    assert rules.router_block_size(size, 4096, 512, True, size_name="z", engines="e", **BLOCK_NAMES) is None


@pytest.mark.parametrize("size", [256, 1000, 0, -512, True])
def test_a_router_block_that_ends_inside_a_sub_block_is_refused(size):
    assert rules.router_block_size(size, 4096, 512, True, size_name="z", engines="the engines", **BLOCK_NAMES) == (
        f"z {size} with autoTune false is not a whole number of the 512-token units the engines reuse prefixes in "
        "(sub-blocks of M 512 (S on)): a prefix the router counts as cached ends inside a unit the engines recompute, "
        "so it routes on reuse that does not happen. Set blockSizeTokens 512 (or a multiple of it, to track coarser "
        "prefixes)."
    )


@pytest.mark.parametrize("size, refused", [(1, False), (7, False), (0, True), (-1, True)])
def test_every_positive_router_block_is_whole_units_of_one_token(size, refused):
    found = rules.router_block_size(size, 1, 512, False, size_name="z", engines="e", **BLOCK_NAMES)
    assert (found is not None) == refused, found


def test_router_block_size_matches_the_block_without_sub_block_caching():
    assert rules.router_block_size(4096, 4096, 512, False, size_name="z", engines="e", **BLOCK_NAMES) is None
    assert rules.router_block_size(512, 4096, 512, False, size_name="z", engines="e", **BLOCK_NAMES) is not None
    assert rules.router_block_size(None, 4096, 512, False, size_name="z", engines="E", **BLOCK_NAMES) == (
        "z (unset) with autoTune false is not a whole number of the 4096-token units E reuse prefixes in (blocks of B "
        "4096): a prefix the router counts as cached ends inside a unit the engines recompute, so it routes on reuse "
        "that does not happen. Set blockSizeTokens 4096 (or a multiple of it, to track coarser prefixes)."
    )


@pytest.mark.parametrize("size", [1, 16, 128, 512, 4096])
def test_a_precise_router_block_that_divides_the_engines_passes(size):
    assert rules.precise_block_size(size, 4096, 512, size_name="z", engines="E", block_name="B") is None


@pytest.mark.parametrize("size", [1000, 8192, 96, 0, -16, True, None])
def test_a_precise_router_block_that_does_not_divide_the_engines_is_refused(size):
    shown = "(unset)" if size is None else size
    assert rules.precise_block_size(size, 4096, 512, size_name="z", engines="E", block_name="B") == (
        f"z {shown} with the precise prefix cache does not divide the 4096-token blocks E announce in their KV events "
        "(B): the EPP hashes each event's tokens in z blocks chained from the event before, so the tail of an event "
        "that is no whole block is dropped and the next event's chain is lost, and most of what the engines hold is "
        "never found. Set blockSizeTokens to a divisor of 4096 (e.g. 512)."
    )


def test_a_precise_router_block_is_advised_the_block_where_the_unit_does_not_divide_it():
    assert "(e.g. 1000)" in rules.precise_block_size(3, 1000, 512, size_name="z", engines="E", block_name="B")


def test_the_precise_prefix_cache_needs_the_engines_prefix_cache():
    assert rules.precise_needs_prefix_caching(True, key_name="K") is None
    assert rules.precise_needs_prefix_caching(False, key_name="K") == (
        "router.prefixCache precise with K false: the engines keep no prefix cache and publish no KV events, so the "
        "router's index stays empty and no prompt ever scores a cached prefix. Turn prefix caching on, or set "
        "router.prefixCache approximate or none."
    )


def test_autotune_block_unit_advises_only_where_the_unit_is_no_block():
    names = dict(router_prefix="p.", engines="E", sub_block_name="S", precise=False)
    assert rules.autotune_block_unit(4096, 512, False, **names) is None
    assert rules.autotune_block_unit(512, 512, True, **names) is None
    assert rules.autotune_block_unit(4096, 512, True, **names) == (
        "p.autoTune true: the router reads --block-size 4096 from each pod's vllm:cache_config_info and tracks "
        "prefixes in 4096-token units, while E reuse 512-token sub-blocks (S): a prefix shorter than 4096 tokens that "
        "every request shares (a system prompt) is reused by every engine but steers no routing, which keeps new "
        "sessions spread over the pods (coding agents: the closest to pinning each session, docs/performance.md). "
        "Routing on 512-token prefixes (autoTune false, blockSizeTokens 512, lruCapacityPerServer the per-pod KV "
        "block count in 512-token units) draws every new session to the pods that first served the shared prefix."
    )


@pytest.mark.parametrize(
    "value, text",
    [(None, "none"), (4096, "4096"), ("fp8", "fp8"), ({"b": 1, "a": [1, 2]}, '{"a":[1,2],"b":1}'), ([1, 2], "[1,2]")],
)
def test_spec_text(value, text):
    assert rules.spec_text(value) == text


def test_roles_agree_compares_the_text_of_the_values():
    assert rules.roles_agree("model", "m", "m", field_name="f", fix="X.") is None
    assert rules.roles_agree("speculative-config", {"a": 1, "b": 2}, {"b": 2, "a": 1}, field_name="f", fix="X.") is None


SAME_SPECULATIVE = "both roles need the same speculative method, draft model and token count"
NGRAM, EAGLE = {"method": "ngram"}, {"method": "eagle3"}


@pytest.mark.parametrize(
    "what, prefill, decode, shown, why",
    [
        (
            "block-size",
            4096,
            8192,
            "prefill 4096 vs decode 8192",
            "NIXL moves KV blocks as they are, so both roles need the same block size",
        ),
        (
            "kv-cache-dtype",
            "fp8",
            "auto",
            "prefill fp8 vs decode auto",
            "decode cannot read KV written in another dtype",
        ),
        ("model", "a", "b", "prefill a vs decode b", "KV computed by one model is garbage for another"),
        ("speculative-config", NGRAM, None, 'prefill {"method":"ngram"} vs decode none', SAME_SPECULATIVE),
        ("speculative-config", None, NGRAM, 'prefill none vs decode {"method":"ngram"}', SAME_SPECULATIVE),
        (
            "speculative-config",
            NGRAM,
            EAGLE,
            'prefill {"method":"ngram"} vs decode {"method":"eagle3"}',
            SAME_SPECULATIVE,
        ),
        (
            "speculative-config",
            None,
            EAGLE,
            'prefill none vs decode {"method":"eagle3"}',
            "EAGLE-3 on decode needs it on prefill too: the draft head fills its own KV during prefill, and decode "
            "receives that KV with the target model's",
        ),
        # Text that is no JSON object: no method is read from it.
        ("speculative-config", None, "eagle3", "prefill none vs decode eagle3", SAME_SPECULATIVE),
        # Only the speculative config is about EAGLE-3.
        (
            "model",
            None,
            EAGLE,
            'prefill none vs decode {"method":"eagle3"}',
            "KV computed by one model is garbage for another",
        ),
    ],
)
def test_roles_agree_says_why(what, prefill, decode, shown, why):
    assert rules.roles_agree(what, prefill, decode, field_name="F", fix="Fix it.") == (
        f"differ on F: {shown}; {why}. Fix it."
    )


# --- rollouts -----------------------------------------------------------------------------------

GRACE_NAMES = dict(grace_name="grace", pre_stop_name="preStop", drain_name="drain")


@table(
    {
        # (grace, preStop, drain): SIGKILL comes `grace` s after deletion, the preStop counted in it.
        "defaults-120-for-15-plus-90": ((120, 15, 90), None),
        "exactly-105": ((105, 15, 90), None),
        "nothing-to-wait-for": ((0, 0, 0), None),
        "one-second-short": (
            (104, 15, 90),
            (
                "grace 104 is shorter than preStop 15 + drain 90 = 105 s",
                "kills the engine 1 s before the drain it was given ends",
                "Set grace to at least 105, or shorten drain",
            ),
        ),
        "kubernetes-default-for-a-drain-alone": (
            (30, 0, 90),
            ("grace 30 is shorter than preStop 0 + drain 90 = 90 s",),
        ),
        "pre-stop-alone": ((10, 15, 0), ("= 15 s", "kills the engine 5 s before")),
    }
)
def test_grace_covers_drain(args, expected):
    check(rules.grace_covers_drain(*args, **GRACE_NAMES), expected)


@table(
    {
        # (grace, drain, the grace period the fix names)
        "render-40-for-30": ((40, 30, 40), None),
        "one-second-past": ((31, 30, 40), None),
        "no-drain": ((1, 0, 10), None),
        "kubernetes-default-with-upstreams-drain": (
            (30, 30, 40),
            ("grace 30 is not longer than drain 30 s", "SIGKILL at 30 s cuts", "Set grace to at least 40"),
        ),
        "a-fraction-of-a-second-inside": ((30, 30.5, 41), ("drain 30.5 s",)),
    }
)
def test_epp_grace_covers_drain(args, expected):
    grace, drain, fix = args
    check(rules.epp_grace_covers_drain(grace, drain, grace_name="grace", drain_name="drain", fix=fix), expected)


# --- alerts ---------------------------------------------------------------------------------------

ALERT_ROLES = ("prefill", "decode", "epp")


@table(
    {
        "a-role-that-runs": ((["A"], "decode", ALERT_ROLES), None),
        "role-that-runs-no-pod": (
            (["A"], "prefill", ("decode", "epp")),
            (
                "A watches the prefill pods, but no prefill pod runs here (roles: decode, epp): the alert reads "
                "nothing and stays silent whatever happens. Remove it, or label it with the role whose pods it "
                "selects.",
            ),
        ),
        "no-role-at-all": ((["A", "B"], "epp", ()), ("A and B watch the epp pods", "(roles: none)")),
    }
)
def test_alert_role_runs(args, expected):
    check(rules.alert_role_runs(*args), expected)


@table(
    {
        "served-as-read": ((["A"], "s", "s"), None),
        "not-served": (
            (["A", "A"], "s", None),
            (
                "A reads s, which img:1 is not known to serve (core/versions says which releases serve which series): "
                "the alert would read nothing and stay silent through the fault it is for. Pin more.",
            ),
        ),
        "not-served-read-by-two": ((["A", "B"], "s", None), ("A and B read s, which img:1 is not known",)),
        "served-under-another-name": (
            (["A", "B"], "old", "new"),
            (
                "A and B read old, but img:1 serves it as new (its router generation, core/versions/router.py): the "
                "alert reads nothing and stays silent. Query new.",
            ),
        ),
        "served-under-another-name-read-by-one": ((["A"], "old", "new"), ("A reads old, but img:1 serves it as new",)),
    }
)
def test_alert_series_served(args, expected):
    check(rules.alert_series_served(*args, image="img:1", fix="Pin more."), expected)


# --- ports and API versions -------------------------------------------------------------------------------------


def test_port_text_names_a_range_or_each_port():
    assert rules.port_text([8203, 8200, 8201, 8202]) == "8200-8203"
    assert rules.port_text([8002, 8000, 8000]) == "8000, 8002"
    assert rules.port_text([9090]) == "9090"


def api_read(pinned, pins_own):
    return rules.api_version_read(
        "v2", Version(0, 8, 0), "src", "epp:v0.7.1", pinned, pins_own, consumer="EPP", api_name="K", image_name="I"
    )


def test_api_version_read_names_the_pins_own_version_where_known():
    assert api_read(None, "v1") is None and api_read(Version(0, 8, 0), "v1") is None
    assert api_read(Version(0, 7, 1), "v1") == (
        "K v2 is read only by EPP 0.8.0 or later (src), but I epp:v0.7.1 is 0.7.1, whose generation reads v1: the "
        "program would refuse its configuration and the pod would crash-loop. Remove K (the render then writes v1, "
        "which this EPP reads), or pin 0.8.0 or later in I."
    )
    assert api_read(Version(0, 7, 1), None) == (
        "K v2 is read only by EPP 0.8.0 or later (src), but I epp:v0.7.1 is 0.7.1: the program would refuse its "
        "configuration and the pod would crash-loop. Remove K, or pin 0.8.0 or later in I."
    )


def test_a_precise_router_has_its_approximate_block_neither_judged_nor_advised():
    """The precise index steers the picks; the approximate one only feeds the P/D decider."""
    names = {**BLOCK_NAMES, "precise": True}
    assert rules.router_block_size(1000, 4096, 512, True, size_name="z", engines="e", **names) is None
    assert rules.router_block_size(1000, 4096, 512, True, size_name="z", engines="e", **BLOCK_NAMES) is not None
    advice = dict(router_prefix="p.", engines="E", sub_block_name="S")
    assert rules.autotune_block_unit(4096, 512, True, **advice, precise=True) is None
    assert rules.autotune_block_unit(4096, 512, True, **advice, precise=False) is not None
