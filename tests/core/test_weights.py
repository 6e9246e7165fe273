"""core/weights.py: sizes, keys, cache paths and the plan of the volume, each value written by hand."""

import pytest

from core import weights
from core.config import StackConfig, Weights
from core.derive import derive

MODEL = "MiniMaxAI/MiniMax-M2.7"
DRAFT = "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k"
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    "revision, pinned",
    [(SHA, True), ("main", False), (SHA[:-1], False), (SHA.upper(), False), (SHA + "0", False), ("v1.0", False)],
)
def test_is_pinned(revision, pinned):
    assert weights.is_pinned(revision) is pinned


def test_cache_paths_follow_huggingface_hub():
    assert weights.repo_folder(MODEL) == "models--MiniMaxAI--MiniMax-M2.7"
    assert (
        weights.revision_path("/models", MODEL, SHA) == f"/models/hub/models--MiniMaxAI--MiniMax-M2.7/snapshots/{SHA}"
    )
    assert weights.revision_path("/models", MODEL, "main") == "/models/hub/models--MiniMaxAI--MiniMax-M2.7/refs/main"
    assert weights.marker_path("/models", "abc") == "/models/.rebel100/weights-abc.complete"


def test_needed_bytes_of_model_and_draft():
    assert weights.needed_bytes(MODEL, DRAFT) == 234_000_000_000  # 230 GB + 4 GB
    assert weights.needed_bytes(MODEL, None) == 230_000_000_000
    assert weights.needed_bytes(MODEL, "someone/unknown-draft") is None
    assert weights.needed_bytes("someone/unknown", None) is None


def test_digest_changes_with_each_value_and_ignores_a_draft_revision_without_draft():
    base = weights.digest(MODEL, "main", DRAFT, "main")
    assert len(base) == 10 and all(c in "0123456789abcdef" for c in base)
    changed = {
        weights.digest(MODEL, SHA, DRAFT, "main"),
        weights.digest("x/y", "main", DRAFT, "main"),
        weights.digest(MODEL, "main", "x/d", "main"),
        weights.digest(MODEL, "main", DRAFT, SHA),
    }
    assert base not in changed and len(changed) == 4
    assert weights.digest(MODEL, "main", None, "main") == weights.digest(MODEL, "main", None, SHA)


def test_pvc_plan_waits_for_each_revision_on_the_volume():
    plan = weights.plan_for(
        MODEL, Weights(source="pvc", pvc="w", revision=SHA, draft_revision="main"), DRAFT, "/models"
    )
    assert (plan.source, plan.claim_name, plan.download) == ("pvc", "w", False)
    assert plan.wait_paths == (
        f"/models/hub/models--MiniMaxAI--MiniMax-M2.7/snapshots/{SHA}",
        "/models/hub/models--asherszhang--MiniMax-M2.7-EAGLE3-draft-vocab200k/refs/main",
    )
    assert plan.repositories() == [(MODEL, SHA), (DRAFT, "main")]
    assert plan.annotations() == {
        "rebel100.ai/model": MODEL,
        "rebel100.ai/model-revision": SHA,
        "rebel100.ai/draft-model": DRAFT,
        "rebel100.ai/draft-revision": "main",
    }
    assert plan.output() == {
        "source": "pvc",
        "pvc": "w",
        "model": f"{MODEL}@{SHA}",
        "draft": f"{DRAFT}@main",
        "key": weights.digest(MODEL, SHA, DRAFT, "main"),
    }


def test_download_plan_without_draft_waits_for_its_marker():
    plan = weights.plan_for(MODEL, Weights(source="download", revision=SHA), None, "/models")
    assert plan.download and plan.draft is None
    assert plan.wait_paths == (f"/models/.rebel100/weights-{plan.key}.complete",)
    assert plan.repositories() == [(MODEL, SHA)]
    assert plan.annotations() == {"rebel100.ai/model": MODEL, "rebel100.ai/model-revision": SHA}
    assert plan.output()["draft"] is None
    assert weights.download_args(plan, "/models") == [
        "download",
        f"/models/.rebel100/weights-{plan.key}.complete",
        MODEL,
        SHA,
    ]


@pytest.mark.parametrize(
    "speculative, draft",
    [
        ({}, DRAFT),  # the default: EAGLE-3 with its draft
        (None, None),
        ({"method": "suffix", "model": None}, None),
        ({"method": "ngram", "model": DRAFT}, None),  # only EAGLE-3 loads a draft model
        ({"method": "eagle3", "model": None}, None),
    ],
)
def test_draft_model(speculative, draft):
    engine = {"speculative": speculative} if speculative != {} else {}
    assert derive(StackConfig.model_validate({"engine": engine})).weights.draft == draft


def test_plan_of_a_stack_has_its_draft_under_hf_home():
    cfg = StackConfig.model_validate({})
    plan = weights.plan(cfg, derive(cfg).decode.speculative, "/hf")
    assert plan.draft == DRAFT
    assert plan.wait_paths == (
        "/hf/hub/models--MiniMaxAI--MiniMax-M2.7/refs/main",
        "/hf/hub/models--asherszhang--MiniMax-M2.7-EAGLE3-draft-vocab200k/refs/main",
    )
