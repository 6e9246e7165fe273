"""Autoscaled engines on a real API server (the local control plane, KEDA's ScaledObject CRD from crds/ installed by
scripts/cluster): the ScaledObjects are admitted as rendered and refused when malformed, and Pulumi does not fight
the autoscaler: after the Deployment is scaled through its scale subresource, as the HPA does, a preview with
--refresh proposes nothing and a second `scripts/up` changes nothing.

No KEDA operator runs here: nothing acts on the ScaledObjects, and the scale is written by hand with the HPA
controller's field manager (kube-controller-manager's HPA updates the scale subresource).
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml

from core.stackfile import stack_file
from stacks.render import render_stack_file
from tests.cluster.conftest import LocalCluster
from tests.prerequisites import require
from tests.pulumi_project import Project, copy_project, toolchain_dir

pytestmark = pytest.mark.cluster

STACK = "prod-autoscale"
NS = "rebel100"
DECODE, PREFILL = "minimax-m27-decode", "minimax-m27-prefill"
READY_DELAY = "3s"  # kwok's Running -> Ready delay for the engines
HPA_MANAGER = "kube-controller-manager"  # the field manager of the HPA controller's scale updates


def rendered_scaled_objects() -> list[dict]:
    manifests = render_stack_file(stack_file(STACK), STACK).manifests
    return [m for m in manifests if m["kind"] == "ScaledObject"]


def test_the_scaled_objects_are_admitted_and_a_typo_is_refused(local_cluster: LocalCluster, tmp_path):
    """Server-side apply with strict field validation (unknown fields refused, not pruned), in a namespace of its
    own: what the API server keeps is what the render says."""
    ns = "autoscaling-admission"
    local_cluster.kubectl("create", "namespace", ns)
    try:
        objects = rendered_scaled_objects()
        assert sorted(o["metadata"]["name"] for o in objects) == [DECODE, PREFILL]
        for scaled in objects:
            scaled = {**scaled, "metadata": {**scaled["metadata"], "namespace": ns}}
            path = tmp_path / f"{scaled['metadata']['name']}.yaml"
            path.write_text(yaml.safe_dump(scaled))
            local_cluster.kubectl(
                "apply", "--server-side", "--field-manager=autoscaling-test", "--validate=strict", f"--filename={path}"
            )
            stored = local_cluster.get("scaledobject", scaled["metadata"]["name"], namespace=ns)
            assert stored["spec"] == scaled["spec"], (stored["spec"], scaled["spec"])
        decode = local_cluster.get("scaledobject", DECODE, namespace=ns)["spec"]
        assert (decode["minReplicaCount"], decode["maxReplicaCount"]) == (1, 4)
        assert decode["triggers"][0]["metadata"]["threshold"] == "0.8"
        typo = {
            **objects[0],
            "metadata": {"name": "typo", "namespace": ns},
            "spec": {**objects[0]["spec"], "maxReplicas": 4},
        }
        path = tmp_path / "typo.yaml"
        path.write_text(yaml.safe_dump(typo))
        refused = local_cluster.kubectl(
            "apply", "--server-side", "--validate=strict", f"--filename={path}", check=False
        )
        assert refused.returncode != 0
        assert ".spec.maxReplicas: field not declared in schema" in refused.stderr, refused.stderr
    finally:
        local_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, local_cluster: LocalCluster) -> Project:
    toolchain = require(toolchain_dir(), "no Pulumi toolchain (run `make toolchain`)")
    project = copy_project(tmp_path_factory.mktemp("cluster-autoscaling") / "project", toolchain)
    project.env.update(
        KUBECONFIG=str(local_cluster.kubeconfig),
        PATH=f"{local_cluster.bin_dir}:{project.env['PATH']}",
        REBEL100_UNSCHEDULABLE_GRACE="15",
    )
    local_cluster.preload_weights()  # whatever a module before this one deleted
    path = project.root / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["rebel100:engine"] = {"podAnnotations": {"rebel100.local/ready-delay": READY_DELAY}}
    path.write_text(yaml.safe_dump(document))
    proc = up(project)
    if proc.returncode != 0:
        pytest.fail(
            f"`scripts/up {STACK}` failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}",
            pytrace=False,
        )
    yield project
    project.pulumi("destroy", "-s", STACK, "--yes", timeout=600)
    local_cluster.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=300, check=False)
    local_cluster.preload_weights()


def up(project: Project) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["scripts/up", STACK], cwd=project.root, env=project.env, capture_output=True, text=True, timeout=1200
    )


def replicas_owners(cluster: LocalCluster, name: str) -> list[str]:
    """The field managers that own the Deployment's spec.replicas (kubectl hides managedFields unless asked)."""
    deployment = json.loads(
        cluster.kubectl("get", "deployment", name, f"--namespace={NS}", "-o", "json", "--show-managed-fields").stdout
    )
    assert deployment["metadata"].get("managedFields"), "no managedFields read"
    owners = []
    for entry in deployment["metadata"]["managedFields"]:
        if "f:replicas" in ((entry.get("fieldsV1") or {}).get("f:spec") or {}):
            owners.append(entry["manager"])
    return owners


def wait_for(cluster: LocalCluster, what, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(1)


def test_pulumi_leaves_the_replica_count_to_the_autoscaler(deployed: Project, local_cluster: LocalCluster):
    """The autoscaled Deployments are created without spec.replicas (the API server defaults it to 1, Pulumi owns no
    count); scaled to 3 and 2 through the scale subresource by the HPA's field manager, the next preview with
    --refresh proposes no change and the next `up` stops after its preview, the counts untouched."""
    for name in (DECODE, PREFILL):
        deployment = local_cluster.get("deployment", name, namespace=NS)
        assert deployment["spec"]["replicas"] == 1
        owners = replicas_owners(local_cluster, name)
        assert not [m for m in owners if m.startswith("pulumi")], owners
        # A PodDisruptionBudget of maxUnavailable 1 still lets a drain evict the one pod left at minReplicas.
        budget = wait_for(
            local_cluster,
            lambda name=name: (
                local_cluster.get("pdb", name, namespace=NS).get("status", {}).get("disruptionsAllowed") == 1
            ),
        )
        assert budget, local_cluster.get("pdb", name, namespace=NS).get("status")
    for name, count in ((DECODE, 3), (PREFILL, 2)):
        local_cluster.kubectl(
            "patch",
            "deployment",
            name,
            f"--namespace={NS}",
            "--subresource=scale",
            "--type=merge",
            f"--patch={json.dumps({'spec': {'replicas': count}})}",
            f"--field-manager={HPA_MANAGER}",
        )
        # (A scale-subresource write records no owner of spec.replicas here, v1.35.4: seen on this site.)
        assert not [m for m in replicas_owners(local_cluster, name) if m.startswith("pulumi")]
    ready = wait_for(
        local_cluster,
        lambda: all(
            (local_cluster.get("deployment", name, namespace=NS).get("status") or {}).get("availableReplicas") == count
            for name, count in ((DECODE, 3), (PREFILL, 2))
        ),
        timeout=180,
    )
    assert ready, {n: local_cluster.get("deployment", n, namespace=NS).get("status") for n in (DECODE, PREFILL)}
    preview = deployed.pulumi("preview", "-s", STACK, "--expect-no-changes", "--refresh")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]
    again = up(deployed)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "preview: nothing to change" in again.stderr, again.stderr[-3000:]
    assert "Updating (prod-autoscale)" not in again.stdout
    for name, count in ((DECODE, 3), (PREFILL, 2)):
        assert local_cluster.get("deployment", name, namespace=NS)["spec"]["replicas"] == count
    assert sorted(o["metadata"]["name"] for o in local_cluster.get("scaledobjects", namespace=NS)) == [DECODE, PREFILL]


def set_roles(project: Project, prefill: dict, decode: dict) -> None:
    path = project.root / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["rebel100:prefill"] = prefill
    document["config"]["rebel100:decode"] = {"maxNumSeqs": 1, **decode}
    path.write_text(yaml.safe_dump(document))


def test_turning_autoscaling_on_for_a_fixed_stack(deployed: Project, local_cluster: LocalCluster):
    """Fixed at 4, Pulumi owns spec.replicas; turned to autoscaling the next `up` applies without the field, which
    then has no owner: server-side apply resets it to its default, 1 (until an HPA raises it to minReplicas). Turned
    back to fixed, the count is Pulumi's again."""
    scaled = {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}}
    try:
        set_roles(deployed, {"replicas": 4}, {"replicas": 4})
        proc = up(deployed)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        for name in (DECODE, PREFILL):
            assert local_cluster.get("deployment", name, namespace=NS)["spec"]["replicas"] == 4
            assert [m for m in replicas_owners(local_cluster, name) if m.startswith("pulumi")], replicas_owners(
                local_cluster, name
            )
        set_roles(deployed, scaled, scaled)
        proc = up(deployed)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        for name in (DECODE, PREFILL):
            assert local_cluster.get("deployment", name, namespace=NS)["spec"]["replicas"] == 1
            assert not [m for m in replicas_owners(local_cluster, name) if m.startswith("pulumi")]
    finally:
        set_roles(deployed, scaled, scaled)


def test_an_up_waits_for_the_rollout_of_an_autoscaled_deployment(deployed: Project, local_cluster: LocalCluster):
    """The autoscaled Deployments' waitFor names no pod count (the Progressing reason NewReplicaSetAvailable): a
    template change (a longer ready delay, so a new ReplicaSet whose pods are Ready only after it) makes `up` wait
    until every pod is of the new template and available, not return on the previous rollout's status."""
    path = deployed.root / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["rebel100:engine"] = {"podAnnotations": {"rebel100.local/ready-delay": "20s"}}
    path.write_text(yaml.safe_dump(document))
    try:
        started = time.monotonic()
        proc = up(deployed)
        took = time.monotonic() - started
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        for name in (DECODE, PREFILL):
            deployment = local_cluster.get("deployment", name, namespace=NS)
            status, replicas = deployment["status"], deployment["spec"]["replicas"]
            assert deployment["spec"]["template"]["metadata"]["annotations"]["rebel100.local/ready-delay"] == "20s"
            assert status["observedGeneration"] == deployment["metadata"]["generation"], status
            assert (status.get("updatedReplicas"), status.get("availableReplicas"), status.get("replicas")) == (
                replicas,
                replicas,
                replicas,
            ), status
        assert took > 20, f"`up` returned after {took:.0f} s, before a pod of the new template could be Ready"
    finally:
        document["config"]["rebel100:engine"] = {"podAnnotations": {"rebel100.local/ready-delay": READY_DELAY}}
        path.write_text(yaml.safe_dump(document))
