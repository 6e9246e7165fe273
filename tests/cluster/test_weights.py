"""Day-1 weights on the local control plane: the download Job runs to completion (kwok's Job stage),
the engines are created only after it, and a revision bump replaces the download before the
engines roll. A 1P1D stack in a namespace of its own, downloading (weights.source download).

Each test starts from the stack file as the fixture wrote it (revision `main`), and the bump first deploys that
baseline itself (`downloaded`), so each runs alone and in any order."""

from __future__ import annotations

import datetime
import subprocess

import pytest
import yaml

from tests.cluster.conftest import LocalCluster
from tests.prerequisites import require
from tests.pulumi_project import Project, copy_project, toolchain_dir

pytestmark = pytest.mark.cluster

STACK = "weights"
NS = "rebel100-weights"
ROLE = "llm-d.ai/role"
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def site(tmp_path_factory, local_cluster: LocalCluster):
    toolchain = require(toolchain_dir(), "no Pulumi toolchain (run `make toolchain`)")
    project = copy_project(tmp_path_factory.mktemp("cluster-weights") / "project", toolchain)
    project.env.update(KUBECONFIG=str(local_cluster.kubeconfig), PATH=f"{local_cluster.bin_dir}:{project.env['PATH']}")
    dev = yaml.safe_load((project.root / "Pulumi.dev.yaml").read_text())
    config = {key: value for key, value in dev["config"].items() if key != "rebel100:renderDirectory"}
    config.update(
        {
            "rebel100:name": "wt",
            "rebel100:namespace": NS,
            "rebel100:engine": {"podAnnotations": {"rebel100.local/ready-delay": "2s"}},
        }
    )
    (project.root / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump({"config": config}))
    baseline = (project.root / f"Pulumi.{STACK}.yaml").read_text()
    yield project, local_cluster
    (project.root / f"Pulumi.{STACK}.yaml").write_text(baseline)
    project.pulumi("destroy", "-s", STACK, "--yes", timeout=600)
    local_cluster.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=300, check=False)


@pytest.fixture
def baseline(site):
    """The stack file as the module fixture wrote it (revision `main`), whatever an earlier test changed."""
    project, cluster = site
    path = project.root / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    weights = document["config"]["rebel100:weights"]
    document["config"]["rebel100:weights"] = {key: value for key, value in weights.items() if key != "revision"}
    path.write_text(yaml.safe_dump(document))
    return project, cluster


@pytest.fixture
def downloaded(baseline):
    """The precondition of the bump: the baseline deployed, its download complete and both engines created."""
    project, cluster = baseline
    proc = up(project)
    if proc.returncode != 0:
        pytest.fail(
            f"precondition: `scripts/up {STACK}` of the baseline (revision main) failed, exit "
            f"{proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}",
            pytrace=False,
        )
    done = [j for j in jobs(cluster).values() if j["status"].get("succeeded") == 1]
    if len(done) != 1 or len(engine_pods(cluster)) != 2:
        pytest.fail(
            f"precondition: after the baseline `up`, {len(done)} completed download Job(s) and "
            f"{len(engine_pods(cluster))} engine pods, expected 1 and 2",
            pytrace=False,
        )
    return project, cluster


def up(project: Project) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["scripts/up", STACK], cwd=project.root, env=project.env, capture_output=True, text=True, timeout=900
    )


def when(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def jobs(cluster: LocalCluster) -> dict[str, dict]:
    return {j["metadata"]["name"]: j for j in cluster.get("jobs", namespace=NS)}


def engine_pods(cluster: LocalCluster) -> list[dict]:
    return [
        p
        for p in cluster.get("pods", namespace=NS)
        if ROLE in p["metadata"].get("labels", {}) and not p["metadata"].get("deletionTimestamp")
    ]


def test_the_download_completes_before_the_engines_start(baseline):
    project, cluster = baseline
    proc = up(project)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (job,) = jobs(cluster).values()
    assert job["status"].get("succeeded") == 1
    completed = when(job["status"]["completionTime"])
    pods = engine_pods(cluster)
    assert sorted(p["metadata"]["labels"][ROLE] for p in pods) == ["decode", "prefill"]
    assert all(when(p["metadata"]["creationTimestamp"]) >= completed for p in pods), (completed, pods)
    assert all(p["spec"]["initContainers"][0]["name"] == "wait-for-weights" for p in pods)


def test_a_revision_bump_replaces_the_download_then_rolls_the_engines(downloaded):
    project, cluster = downloaded
    before = jobs(cluster)
    config_path = project.root / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(config_path.read_text())
    document["config"]["rebel100:weights"] = {**document["config"]["rebel100:weights"], "revision": SHA}
    config_path.write_text(yaml.safe_dump(document))
    proc = up(project)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.split("Resources:")[-1]
    assert "replaced" in summary and "updated" in summary, summary
    after = jobs(cluster)
    (new_name,) = set(after) - set(before)
    assert not set(before) & set(after)  # the old download is gone: no mix of revisions
    completed = when(after[new_name]["status"]["completionTime"])
    pods = engine_pods(cluster)
    assert len(pods) == 2
    for pod in pods:
        assert pod["metadata"]["annotations"]["rebel100.ai/model-revision"] == SHA
        assert when(pod["metadata"]["creationTimestamp"]) >= completed
