"""ModelWeights under the mock runtime: nothing for a pre-loaded PVC; a sized volume and a pinned, resumable Job
for a download, keyed by the revisions so that a bump is a new Job and new wait paths for the engines."""

from components.model_weights import ModelWeights
from core.config import Weights
from tests import defaults
from tests.conftest import env_map

SHA = "0123456789abcdef0123456789abcdef01234567"
DRAFT = "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k"


def build(run_under_mocks, **settings):
    holder = {}
    args = defaults.weights_args(settings=Weights(**settings), draft_model=DRAFT)
    cluster = run_under_mocks(lambda: holder.setdefault("weights", ModelWeights("t-weights", args)))
    return cluster, holder["weights"]


def test_preloaded_pvc_creates_nothing_and_waits_for_the_snapshots(run_under_mocks):
    cluster, weights = build(run_under_mocks, pvc="my-weights", revision=SHA)
    assert cluster.manifests == [] and weights.job is None
    engine = weights.engine_weights
    assert engine.claim_name == "my-weights" and engine.revision == SHA
    assert engine.wait_paths == [
        f"/models/hub/models--MiniMaxAI--MiniMax-M2.7/snapshots/{SHA}",  # a commit: its snapshot
        "/models/hub/models--asherszhang--MiniMax-M2.7-EAGLE3-draft-vocab200k/refs/main",  # a branch: its ref
    ]


def test_download_volume_and_job(run_under_mocks):
    cluster, weights = build(run_under_mocks, source="download", revision=SHA, size="300Gi")
    claim = cluster.get("PersistentVolumeClaim", "model-weights")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "300Gi"
    [job] = cluster.of_kind("Job")
    name = job["metadata"]["name"]
    assert (
        name.startswith("t-weights-")
        and name == f"t-weights-{weights.engine_weights.wait_paths[0].split('weights-')[1].split('.')[0]}"
    )
    assert job["metadata"]["annotations"]["rebel100.ai/model-revision"] == SHA
    assert job["metadata"]["annotations"]["rebel100.ai/draft-model"] == DRAFT
    assert job["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
    spec = job["spec"]
    assert (
        spec["backoffLimit"] == 6 and "ttlSecondsAfterFinished" not in spec
    )  # a finished Job stays, so Pulumi sees it
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"  # a restart keeps the volume: the partial files resume
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "model-weights"}
    download = pod["containers"][0]
    # model and draft at their revisions, after the marker the engines wait for
    assert download["command"][3:] == [
        "download",
        weights.engine_weights.wait_paths[0],
        "MiniMaxAI/MiniMax-M2.7",
        SHA,
        DRAFT,
        "main",
    ]
    env = env_map(download)
    assert env["HF_HOME"] == "/models" and env["HUB_VERSION"] == "0.34.4"
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}}
    context = download["securityContext"]
    assert context["runAsNonRoot"] and context["readOnlyRootFilesystem"] and context["capabilities"]["drop"] == ["ALL"]
    assert (
        pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        and pod["securityContext"]["fsGroup"] == 65532
    )
    assert download["resources"]["requests"] == {"cpu": "2", "memory": "4Gi"}


def test_gated_download_needs_the_secret(run_under_mocks):
    cluster, _ = build(run_under_mocks, source="download", gated=True)
    env = env_map(cluster.of_kind("Job")[0]["spec"]["template"]["spec"]["containers"][0])
    assert env["HF_TOKEN"]["secretKeyRef"]["optional"] is False


def test_revision_bump_is_a_new_job_and_new_wait_paths(run_under_mocks):
    before, old = build(run_under_mocks, source="download", revision=SHA)
    after, new = build(run_under_mocks, source="download", revision="f" * 40)
    draft_only, newer = build(run_under_mocks, source="download", revision=SHA, draft_revision="a" * 40)
    names = {c.of_kind("Job")[0]["metadata"]["name"] for c in (before, after, draft_only)}
    assert len(names) == 3
    assert len({w.engine_weights.wait_paths[0] for w in (old, new, newer)}) == 3
    # the volume is the same claim: unchanged files are not downloaded again
    assert (
        after.get("PersistentVolumeClaim", "model-weights")["spec"]
        == before.get("PersistentVolumeClaim", "model-weights")["spec"]
    )
