"""engine-weights-match (policy/weights.py): engines serve the model, revision and draft their volume holds."""

import json

import pytest

from tests.policy.conftest import STACKS
from tests.policy.fixtures import DECODE, PREFILL, engine, get, mutate, run_policy, set_arg

POLICY = "engine-weights-match"
JOB = "minimax-m27-weights-89772e4058"  # the dev render's download Job
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("stack", STACKS)
def test_good_render_passes(renders, stack):
    assert run_policy(POLICY, renders[stack]) == []


def job_annotations(m):
    return get(m, "Job", JOB)["metadata"]["annotations"]


def set_draft_revision(container, revision):
    spec = json.loads(container["args"][container["args"].index("--speculative-config") + 1])
    spec["revision"] = revision
    set_arg(container, "--speculative-config", json.dumps(spec))


def messages(manifests):
    return [(v.resource, v.level, v.message) for v in run_policy(POLICY, manifests)]


def test_engine_at_another_revision_is_refused(renders):
    found = messages(mutate(renders["dev"], lambda m: set_arg(engine(m, PREFILL), "--revision", SHA)))
    assert len(found) == 1
    resource, level, message = found[0]
    assert resource == f"Deployment/rebel100/{PREFILL}" and level == "mandatory"
    assert (
        f"container vllm (claim model-weights): the engine serves model MiniMaxAI/MiniMax-M2.7@{SHA} but its "
        f"weights volume holds MiniMaxAI/MiniMax-M2.7@main (Job/rebel100/{JOB}"
    ) in message


def test_download_of_another_revision_refuses_every_engine_on_the_volume(renders):
    found = messages(mutate(renders["dev"], lambda m: job_annotations(m).update({"rebel100.ai/model-revision": SHA})))
    assert sorted(r for r, _, _ in found) == [f"Deployment/rebel100/{DECODE}", f"Deployment/rebel100/{PREFILL}"]
    assert all(f"holds MiniMaxAI/MiniMax-M2.7@{SHA}" in m for _, _, m in found)


def test_another_model_id_is_refused(renders):
    def other_model(m):
        engine(m, DECODE)["args"][0] = "MiniMaxAI/MiniMax-M2"

    [(_, _, message)] = messages(mutate(renders["dev"], other_model))
    assert "serves model MiniMaxAI/MiniMax-M2@main but its weights volume holds MiniMaxAI/MiniMax-M2.7@main" in message


def test_draft_at_another_revision_is_refused(renders):
    [(_, _, message)] = messages(mutate(renders["dev"], lambda m: set_draft_revision(engine(m, DECODE), SHA)))
    assert (
        f"serves draft asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k@{SHA} but its weights volume holds "
        f"asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k@main"
    ) in message


def test_draft_the_download_does_not_hold_is_refused(renders):
    def no_draft(m):
        for key in ("rebel100.ai/draft-model", "rebel100.ai/draft-revision"):
            job_annotations(m).pop(key)

    found = messages(mutate(renders["dev"], no_draft))
    assert len(found) == 2 and all("holds no draft model" in m for _, _, m in found)


def test_annotated_preloaded_pvc_is_checked_too(renders):
    """A PVC someone loaded and annotated by hand (no Job in the set) is what the engines are compared with."""

    def preloaded(m):
        m[:] = [o for o in m if o["kind"] != "Job"]
        get(m, "PersistentVolumeClaim", "model-weights")["metadata"]["annotations"]["rebel100.ai/model-revision"] = SHA

    found = messages(mutate(renders["dev"], preloaded))
    assert len(found) == 2 and all("(PersistentVolumeClaim/rebel100/model-weights" in m for _, _, m in found)


def test_engines_without_a_recorded_volume_are_skipped(renders):
    """prod-4p4d reads a pre-loaded PVC that is not in the render: nothing to compare with."""
    assert (
        run_policy(POLICY, mutate(renders["prod-4p4d"], lambda m: set_arg(engine(m, PREFILL), "--revision", SHA))) == []
    )


def test_a_claim_only_another_container_mounts_is_not_the_engines(renders):
    """Prefill's engine at another revision, its weights volume mounted by another container only (the engine's own
    mount of it removed): the engine does not read that volume, so nothing is compared."""

    def mounted_elsewhere(m):
        container = engine(m, PREFILL)
        volume = next(
            v["name"]
            for v in get(m, "Deployment", PREFILL)["spec"]["template"]["spec"]["volumes"]
            if (v.get("persistentVolumeClaim") or {}).get("claimName") == "model-weights"
        )
        mount = next(mt for mt in container["volumeMounts"] if mt["name"] == volume)
        container["volumeMounts"].remove(mount)
        get(m, "Deployment", PREFILL)["spec"]["template"]["spec"]["containers"].append(
            {"name": "reader", "image": "busybox", "volumeMounts": [mount]}
        )
        set_arg(container, "--revision", SHA)

    assert messages(mutate(renders["dev"], mounted_elsewhere)) == []


@pytest.mark.parametrize("value", ["[1, 2]", '"eagle3"', "{}"], ids=["list", "string", "no-model"])
def test_a_speculative_config_without_a_draft_model_names_no_draft(renders, value):
    """Only a JSON object with a model names a draft; anything else is no draft to compare (vLLM judges the rest)."""
    assert messages(mutate(renders["dev"], lambda m: set_arg(engine(m, DECODE), "--speculative-config", value))) == []


DRAFT = "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k"
OFFLINE = (
    "with HF_HUB_OFFLINE the engine finds no files for what it serves and fails at start, or serves a revision nobody "
    "downloaded on purpose."
)


def test_the_draft_findings_in_full(renders):
    [(_, _, message)] = messages(mutate(renders["dev"], lambda m: set_draft_revision(engine(m, DECODE), SHA)))
    assert message == (
        f"container vllm (claim model-weights): the engine serves draft {DRAFT}@{SHA} but its weights volume holds "
        f"{DRAFT}@main (Job/rebel100/{JOB}, annotations rebel100.ai/draft-model and rebel100.ai/draft-revision): "
        f"{OFFLINE} Serve {DRAFT}@main, or change the download to {DRAFT}@{SHA} (in the stack: one weights.revision / "
        "weights.draftRevision for both)."
    )

    def no_draft(m):
        for key in ("rebel100.ai/draft-model", "rebel100.ai/draft-revision"):
            job_annotations(m).pop(key)

    found = dict((r, m) for r, _, m in messages(mutate(renders["dev"], no_draft)))
    assert found[f"Deployment/rebel100/{PREFILL}"] == (
        f"container vllm (claim model-weights): the engine serves draft {DRAFT}@main but its weights volume holds no "
        f"draft model (Job/rebel100/{JOB}): {OFFLINE} Serve no draft model, or change the download to {DRAFT}@main "
        "(in the stack: one weights.revision / weights.draftRevision for both)."
    )


def test_a_download_without_revision_annotations_holds_main(renders):
    def unrevised(m):
        for key in ("rebel100.ai/model-revision", "rebel100.ai/draft-revision"):
            job_annotations(m).pop(key)

    assert messages(mutate(renders["dev"], unrevised)) == []


def test_a_draft_at_the_revision_the_download_holds_passes(renders):
    """The download Job records the draft at SHA (rebel100.ai/draft-revision) and decode serves it at SHA: they agree;
    read as main (the default for a missing annotation), they would not."""

    def both_at_sha(m):
        job_annotations(m)["rebel100.ai/draft-revision"] = SHA
        for deployment in (DECODE, PREFILL):
            set_draft_revision(engine(m, deployment), SHA)

    assert messages(mutate(renders["dev"], both_at_sha)) == []
