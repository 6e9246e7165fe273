"""Rules 4-5 (policy/memory.py): the RDS budget, lmcache-rbln versions, serving-argument ranges."""

import json

import pytest

from tests.policy.conftest import STACKS
from tests.policy.fixtures import (
    DECODE,
    PREFILL,
    assert_verdict,
    cpu_copy,
    engine,
    get,
    mutate,
    run_policy,
    set_arg,
    set_env,
)

POLICIES = ("rds-memory-budget", "lmcache-reads-rds-max-chunks", "engine-args-in-range")
DECODE_ID, PREFILL_ID = f"Deployment/rebel100/{DECODE}", f"Deployment/rebel100/{PREFILL}"
ANNOTATION = "rebel100.ai/lmcache-rbln-version"


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES)
def test_good_render_passes(renders, stack, policy):
    assert run_policy(policy, renders[stack]) == []


LMCACHE_CONFIG_MAP = "minimax-m27-lmcache"
BUDGET = "rebel100.ai/rds-budget"


def lmcache_data(m) -> dict:
    """The LMCache environment prefill takes through envFrom (RdsTier's ConfigMap)."""
    return get(m, "ConfigMap", LMCACHE_CONFIG_MAP)["data"]


def rds_chunks(chunks):
    return lambda m: lmcache_data(m).update(LMCACHE_EXTRA_CONFIG=json.dumps({"rds_max_chunks": chunks}))


def budget_annotation(**inputs):
    """Edit (or with no inputs remove) the budget inputs RdsTier recorded on its ConfigMap."""

    def edit(m):
        annotations = get(m, "ConfigMap", LMCACHE_CONFIG_MAP)["metadata"]["annotations"]
        if inputs:
            annotations[BUDGET] = json.dumps({**json.loads(annotations[BUDGET]), **inputs})
        else:
            annotations.pop(BUDGET)

    return edit


def annotate_lmcache(version):
    """Set (or with None remove) the pod template's lmcache-rbln version annotation."""

    def edit(m):
        annotations = get(m, "Deployment", PREFILL)["spec"]["template"]["metadata"].setdefault("annotations", {})
        if version is None:
            annotations.pop(ANNOTATION, None)
        else:
            annotations[ANNOTATION] = version

    return edit


def lmcache_image(image):
    """No annotation: the version comes from the image tag (a vllm-rbln image's own, or an lmcache image's)."""
    return lambda m: (annotate_lmcache(None)(m), engine(m, PREFILL).update(image=image))


def foreign_image_annotated(version):
    """An engine image that is not vllm-rbln, whose manifest records its lmcache-rbln version in the annotation."""
    return lambda m: (annotate_lmcache(version)(m), engine(m, PREFILL).update(image="registry.example/team/engine:7"))


BAD = {
    "prefill-rds-max-chunks-4000": (
        rds_chunks(4000),
        "rds-memory-budget",
        PREFILL_ID,
        (
            "rds_max_chunks 4000 x 2 MiB x 2 NVMe drives + 512 MiB staging = 16,512 MiB",
            "--gpu-memory-utilization 0.8 leaves 36,864 MiB x (1 - 0.8) = 7,372.8 MiB",
            "16384000 tokens per rank at LMCACHE_CHUNK_SIZE 4096",
            "at most 1715",
            "at most 0.55",
        ),
    ),
    "prefill-utilization-0.9-equals-form": (
        lambda m: set_arg(engine(m, PREFILL), "--gpu-memory-utilization", "0.9", equals=True),
        "rds-memory-budget",
        PREFILL_ID,
        ("rds_max_chunks 1000", "= 4,512 MiB", "--gpu-memory-utilization 0.9 leaves", "= 3,686.4 MiB", "at most 793"),
    ),
    "prefill-utilization-left-to-engine-default": (
        lambda m: set_arg(engine(m, PREFILL), "--gpu-memory-utilization", None),
        "rds-memory-budget",
        PREFILL_ID,
        ("the engine default --gpu-memory-utilization 0.9", "= 3,686.4 MiB"),
    ),
    "prefill-extra-config-not-json": (
        lambda m: set_env(engine(m, PREFILL), "LMCACHE_EXTRA_CONFIG", "rds_max_chunks=1000"),
        "rds-memory-budget",
        PREFILL_ID,
        ("env LMCACHE_EXTRA_CONFIG 'rds_max_chunks=1000' is not JSON, so LMCache drops it",),
    ),
    # YAML reads it, LMCache does not (tests/consumers/test_lmcache.py): no budget is judged from what never runs.
    "prefill-extra-config-yaml": (
        lambda m: set_env(engine(m, PREFILL), "LMCACHE_EXTRA_CONFIG", "{rds_max_chunks: 1000}"),
        "rds-memory-budget",
        PREFILL_ID,
        ("env LMCACHE_EXTRA_CONFIG '{rds_max_chunks: 1000}' is not JSON", 'e.g. {"rds_max_chunks": 1000}'),
    ),
    "prefill-extra-config-json-list": (
        lambda m: set_env(engine(m, PREFILL), "LMCACHE_EXTRA_CONFIG", "[1000]"),
        "rds-memory-budget",
        PREFILL_ID,
        ("env LMCACHE_EXTRA_CONFIG '[1000]' is not a JSON object",),
    ),
    "prefill-vllm-rbln-0.11.2-image": (
        lmcache_image("rebellions/vllm-rbln:0.11.2"),
        "lmcache-reads-rds-max-chunks",
        PREFILL_ID,
        (
            "rds_max_chunks 1000 is ignored by lmcache-rbln 0.11.2",
            "from image rebellions/vllm-rbln:0.11.2, which ships lmcache-rbln 0.11.2",
            "0.12.0 and later",
        ),
    ),
    "prefill-foreign-image-lmcache-0.11.2-annotated": (
        foreign_image_annotated("0.11.2"),
        "lmcache-reads-rds-max-chunks",
        PREFILL_ID,
        (
            "rds_max_chunks 1000 is ignored by lmcache-rbln 0.11.2",
            f"from annotation {ANNOTATION} 0.11.2",
            "0.12.0 and later",
        ),
    ),
    "prefill-lmcache-image-v0.11.0": (
        lmcache_image("registry.example:5000/rbln/lmcache-rbln:v0.11.0"),
        "lmcache-reads-rds-max-chunks",
        PREFILL_ID,
        ("ignored by lmcache-rbln v0.11.0", "from image registry.example:5000/rbln/lmcache-rbln:v0.11.0"),
    ),
    "decode-utilization-1.5": (
        lambda m: set_arg(engine(m, DECODE), "--gpu-memory-utilization", "1.5"),
        "engine-args-in-range",
        DECODE_ID,
        ("gpu-memory-utilization 1.5 is outside (0, 1]",),
    ),
    "decode-utilization-0-equals-form": (
        lambda m: set_arg(engine(m, DECODE), "--gpu-memory-utilization", "0", equals=True),
        "engine-args-in-range",
        DECODE_ID,
        ("gpu-memory-utilization 0 is outside (0, 1]",),
    ),
    "decode-block-size-4000-with-sub-blocks": (
        lambda m: set_arg(engine(m, DECODE), "--block-size", "4000"),
        "engine-args-in-range",
        DECODE_ID,
        (
            "block size 4000 is not a multiple of the sub-block size 512",
            "VLLM_RBLN_SUB_BLOCK_CACHE=1",
            "divisible by 512",
        ),
    ),
    "prefill-max-model-len-300000": (
        lambda m: set_arg(engine(m, PREFILL), "--max-model-len", "300000"),
        "engine-args-in-range",
        PREFILL_ID,
        ("max-model-len 300000 exceeds the model's context of 204800 tokens",),
    ),
    "prefill-block-size-not-a-number": (
        lambda m: set_arg(engine(m, PREFILL), "--block-size", "4k"),
        "engine-args-in-range",
        PREFILL_ID,
        ("--block-size '4k' is not an integer",),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(prod, case):
    edit, policy, resource, contains = BAD[case]
    assert_verdict(run_policy(policy, mutate(prod, edit)), resource=resource, level="mandatory", contains=contains)


GOOD = {
    "prefill-rds-max-chunks-1715-just-fits": rds_chunks(1715),
    "prefill-foreign-image-lmcache-0.12.0-annotated": foreign_image_annotated("0.12.0"),
    # The render's image is vllm-rbln 0.12.0: a stale annotation cannot say otherwise.
    "prefill-vllm-rbln-0.12.0-annotated-0.11.2-the-image-wins": annotate_lmcache("0.11.2"),
    "prefill-lmcache-version-unknown": lmcache_image("registry.example/team/engine:7"),
    "prefill-lmcache-image-0.12.1": lmcache_image("rbln/lmcache-rbln:0.12.1"),
    "decode-block-size-4000-without-sub-blocks": lambda m: (
        set_arg(engine(m, DECODE), "--block-size", "4000"),
        set_env(engine(m, DECODE), "VLLM_RBLN_SUB_BLOCK_CACHE", "0"),
    ),
    "prefill-cpu-tier-no-rds": lambda m: (
        lmcache_data(m).pop("LMCACHE_EXTRA_CONFIG"),
        set_arg(engine(m, PREFILL), "--gpu-memory-utilization", None),
    ),
    "prefill-one-drive-3000-chunks": lambda m: (rds_chunks(3000)(m), budget_annotation(nvmeDrives=1)(m)),
}


@pytest.mark.parametrize("case", GOOD, ids=list(GOOD))
def test_good_edit_passes(prod, case):
    edited = mutate(prod, GOOD[case])
    for policy in POLICIES:
        assert run_policy(policy, edited) == [], policy


def test_budget_inputs_come_from_the_annotation_first(prod):
    """The stack's own drives win over the pack config: 4 drives there, 1000 x 2 MiB x 4 + 512 = 8512 MiB."""
    assert run_policy("rds-memory-budget", prod, {"rds-memory-budget": {"nvmeDrivesPerNode": 4}}) == []
    violations = run_policy("rds-memory-budget", mutate(prod, budget_annotation(nvmeDrives=4)))
    assert_verdict(
        violations,
        resource=PREFILL_ID,
        level="mandatory",
        contains=("x 4 NVMe drives", "= 8,512 MiB", f"ConfigMap {LMCACHE_CONFIG_MAP} annotation {BUDGET}"),
    )


def test_without_the_annotation_the_policy_config_decides(prod):
    bare = mutate(prod, budget_annotation())
    violations = run_policy("rds-memory-budget", bare, {"rds-memory-budget": {"nvmeDrivesPerNode": 4}})
    assert_verdict(
        violations,
        resource=PREFILL_ID,
        level="mandatory",
        contains=("x 4 NVMe drives", "(drives, overhead, staging and HBM from the policy config, "),
    )
    assert run_policy("rds-memory-budget", bare, {"rds-memory-budget": {"hbmPerChipletGib": 64}}) == []


@pytest.mark.parametrize("drives", ["two", True], ids=["a-word", "a-boolean"])
def test_an_annotated_input_that_is_no_number_is_taken_from_the_policy_config(prod, drives):
    """The annotation's nvmeDrives "two" or true is no number: the pack config's 4 drives count (1000 x 2 MiB x 4 +
    512 = 8,512 MiB), the annotation's other inputs still do."""
    violations = run_policy(
        "rds-memory-budget",
        mutate(prod, budget_annotation(nvmeDrives=drives)),
        {"rds-memory-budget": {"nvmeDrivesPerNode": 4}},
    )
    assert_verdict(
        violations,
        resource=PREFILL_ID,
        level="mandatory",
        contains=("x 4 NVMe drives", "= 8,512 MiB", f"ConfigMap {LMCACHE_CONFIG_MAP} annotation {BUDGET}"),
    )


def test_rds_defaults_match_the_program():
    from core.config import Hardware, KvTier
    from policy.facts import DEFAULTS

    assert DEFAULTS.nvme_drives_per_node == Hardware().nvme_drives_per_node == 2
    assert DEFAULTS.rds_staging_buffer_mib == KvTier().staging_buffer_mib == 512
    assert DEFAULTS.rds_chunk_overhead_mib == KvTier().rds_chunk_overhead_mib == 2
    assert DEFAULTS.hbm_per_chiplet_gib == Hardware().hbm_per_chiplet_gib == 36


# --- rds_max_chunks at its lower boundary and in the wrong type, each verdict by hand (issue 25) ------------------


@pytest.mark.parametrize(
    "chunks, shown",
    [(0, "0"), (-1, "-1"), (True, "True"), ("1000", "'1000'"), (2.5, "2.5")],
    ids=["zero", "negative", "a-boolean", "a-string", "a-fraction"],
)
def test_rds_max_chunks_that_is_no_positive_integer_is_refused(prod, chunks, shown):
    """LMCache reads a chunk count: 0 chunks is no tier at all, JSON true or "1000" is no count."""
    (violation,) = run_policy("rds-memory-budget", mutate(prod, rds_chunks(chunks)))
    assert (violation.resource, violation.message) == (
        PREFILL_ID,
        f"container vllm: env LMCACHE_EXTRA_CONFIG rds_max_chunks {shown} is not a positive integer. Set "
        f"a chunk count such as 1000.",
    )


def test_one_rds_chunk_is_the_smallest_count_and_fits(prod):
    assert run_policy("rds-memory-budget", mutate(prod, rds_chunks(1))) == []


def test_an_unreadable_utilization_is_left_to_engine_args_in_range(prod):
    """The budget cannot be computed from `--gpu-memory-utilization abc`: engine-args-in-range names it."""
    bad = mutate(prod, lambda m: set_arg(engine(m, PREFILL), "--gpu-memory-utilization", "abc"))
    assert run_policy("rds-memory-budget", bad) == []
    assert len(run_policy("engine-args-in-range", bad)) == 1


@pytest.mark.parametrize(
    "flag, value, message",
    [
        (
            "--max-model-len",
            "300000",
            "container vllm arg --max-model-len: max-model-len 300000 exceeds the model's context of 204800 tokens "
            "(modelMaxContext): the engine refuses it, or serves positions the model was not trained for. Set it to "
            "at most 204800.",
        ),
        (
            "--max-num-batched-tokens",
            "abc",
            "container vllm arg --max-num-batched-tokens 'abc' is not an integer. Set a token count.",
        ),
        ("--max-model-len", "abc", "container vllm arg --max-model-len 'abc' is not an integer. Set a token count."),
    ],
    ids=["max-model-len", "batched-unreadable", "max-model-len-unreadable"],
)
def test_an_engine_arg_out_of_range_in_full(prod, flag, value, message):
    (violation,) = run_policy("engine-args-in-range", mutate(prod, lambda m: set_arg(engine(m, DECODE), flag, value)))
    assert violation.message == message


BUDGET_RULE = "(rule: chunks x chunk overhead x drives + staging <= chiplet-0 HBM x (1 - gpu-memory-utilization))"
FROM_ANNOTATION = (
    "drives, overhead, staging and HBM from ConfigMap minimax-m27-lmcache annotation rebel100.ai/rds-budget"
)


@pytest.mark.parametrize(
    "case, message",
    [
        (
            # 4000 x 2 MiB x 2 + 512 = 16,512 MiB; 36,864 x 0.2 = 7,372.8; (7,372.8 - 512) / 4 = 1715.2;
            # 1 - 16,512 / 36,864 = 0.552; 4000 chunks x 4096 tokens = 16,384,000
            "prefill-rds-max-chunks-4000",
            f"container vllm env LMCACHE_EXTRA_CONFIG ({FROM_ANNOTATION}, 16384000 tokens per rank at "
            "LMCACHE_CHUNK_SIZE 4096): RDS needs rds_max_chunks 4000 x 2 MiB x 2 NVMe drives + 512 MiB staging = "
            "16,512 MiB of chiplet-0 memory, but --gpu-memory-utilization 0.8 leaves 36,864 MiB x (1 - 0.8) = "
            f"7,372.8 MiB {BUDGET_RULE}. Lower rds_max_chunks to at most 1715 or --gpu-memory-utilization to at most "
            "0.55 (change the two together).",
        ),
        (
            # 1000 x 4 + 512 = 4,512; 36,864 x 0.1 = 3,686.4; (3,686.4 - 512) / 4 = 793.6; 1 - 4,512 / 36,864 = 0.877
            "prefill-utilization-left-to-engine-default",
            f"container vllm env LMCACHE_EXTRA_CONFIG ({FROM_ANNOTATION}, 4096000 tokens per rank at "
            "LMCACHE_CHUNK_SIZE 4096): RDS needs rds_max_chunks 1000 x 2 MiB x 2 NVMe drives + 512 MiB staging = "
            "4,512 MiB of chiplet-0 memory, but the engine default --gpu-memory-utilization 0.9 leaves 36,864 MiB x "
            f"(1 - 0.9) = 3,686.4 MiB {BUDGET_RULE}. Lower rds_max_chunks to at most 793 or the engine default "
            "--gpu-memory-utilization to at most 0.87 (change the two together).",
        ),
    ],
)
def test_the_rds_budget_in_full_with_the_figures_worked_out(prod, case, message):
    edit, policy, resource, _ = BAD[case]
    assert [(v.resource, v.message) for v in run_policy(policy, mutate(prod, edit))] == [(resource, message)]


def test_an_older_lmcache_without_rds_max_chunks_has_nothing_to_ignore(prod):
    """lmcache-rbln 0.11.2 ignores rds_max_chunks; an LMCache config that sets none gives it nothing to ignore."""
    unset = mutate(
        prod, foreign_image_annotated("0.11.2"), lambda m: lmcache_data(m).update(LMCACHE_EXTRA_CONFIG=json.dumps({}))
    )
    assert run_policy("lmcache-reads-rds-max-chunks", unset) == []


def test_the_budget_is_judged_past_engines_it_does_not_apply_to(prod):
    """A CPU copy of prefill (no resourceClaims: no Rebel100 chiplet) and decode (no RDS tier) listed first are passed
    over; prefill at 4000 chunks after them is still refused (16,512 MiB, more than it leaves free)."""

    def others_first(m):
        cpu = cpu_copy(m, "Deployment", PREFILL, "cpu-prefill")
        decode = get(m, "Deployment", DECODE)
        m.remove(decode)
        m[:0] = [cpu, decode]

    found = run_policy("rds-memory-budget", mutate(prod, rds_chunks(4000), others_first))
    assert [v.resource for v in found] == [PREFILL_ID], found


@pytest.mark.parametrize("chunk_size", [None, "4k"], ids=["chunk-size-unset", "chunk-size-not-a-number"])
def test_without_a_readable_chunk_size_the_budget_names_no_capacity(prod, chunk_size):
    """LMCACHE_CHUNK_SIZE unset or "4k": the tokens per rank cannot be worked out, so the budget finding (4000 chunks,
    the figures of prefill-rds-max-chunks-4000) says nothing of them."""

    def chunk(m):
        data = lmcache_data(m)
        data.pop("LMCACHE_CHUNK_SIZE")
        if chunk_size is not None:
            data["LMCACHE_CHUNK_SIZE"] = chunk_size

    (violation,) = run_policy("rds-memory-budget", mutate(prod, rds_chunks(4000), chunk))
    assert violation.message.startswith(
        f"container vllm env LMCACHE_EXTRA_CONFIG ({FROM_ANNOTATION}): RDS needs rds_max_chunks 4000 x 2 MiB x 2 NVMe "
        "drives + 512 MiB staging = 16,512 MiB of chiplet-0 memory, "
    ), violation.message
