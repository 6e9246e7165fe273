"""The simulated Rebel100 site of scripts/cluster: nodes, DRA devices, CRDs, volumes, and the real scheduler and
controllers acting on objects of the stack's shapes (taken from the prod-4p4d golden render)."""

from __future__ import annotations

import copy
import time
from collections import Counter

import pytest
import yaml

from host.ports import random_free_block
from tests.cluster.conftest import (
    PROJECT_ROOT,
    LocalCluster,
    process_alive,
    script,
    start_instance,
    stop_instance,
)

pytestmark = pytest.mark.cluster

GOLDEN = PROJECT_ROOT / "tests" / "golden" / "prod-4p4d" / "1-manifest"
NUMA = "resource.kubernetes.io/numaNode"
NODE_LABELS = {
    "rebellions.ai/npu.present": "true",
    "rebellions.ai/npu.product": "RBLN-CR13",
    "rebellions.ai/rds.present": "true",
}


def golden(name: str) -> dict:
    return yaml.safe_load((GOLDEN / name).read_text())


def in_namespace(obj: dict, namespace: str) -> dict:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    return obj


def wait_until(what: str, check, timeout: float = 60, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="module")
def namespace(local_cluster: LocalCluster) -> str:
    """A namespace of this module's own, deleted (pods gone, devices freed) at the end: other tests of the session
    share the instance, and prod-4p4d's 8 engines need all 8 NUMA nodes of the 4 nodes."""
    local_cluster.kubectl("create", "namespace", "site-test")
    yield "site-test"
    local_cluster.kubectl("delete", "namespace", "site-test", "--wait=true", "--timeout=120s")


def engine_pod(name: str, claim_template: str, annotations: dict | None = None) -> dict:
    """A pod shaped like an engine of the stack: its node affinity, 32 CPU / 256Gi, one claim from a template."""
    decode = golden("apps_v1-deployment-rebel100-minimax-m27-decode.yaml")["spec"]["template"]["spec"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "affinity": decode["affinity"],
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm:sim",
                    "resources": {
                        "requests": {"cpu": "32", "memory": "256Gi"},
                        "limits": {"cpu": "32", "memory": "256Gi"},
                        "claims": [{"name": "npu-rdma"}],
                    },
                }
            ],
            "resourceClaims": [{"name": "npu-rdma", "resourceClaimTemplateName": claim_template}],
        },
    }


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def test_nodes_are_ready_npu_nodes(local_cluster):
    nodes = local_cluster.get("nodes")
    assert sorted(n["metadata"]["name"] for n in nodes) == [f"rebel100-node-{i}" for i in range(4)]
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert NODE_LABELS.items() <= labels.items()
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert condition(node, "Ready")["status"] == "True"
        assert node["status"]["allocatable"]["cpu"] == "128"
        assert not [t for t in node["spec"].get("taints", []) if t["effect"] == "NoSchedule"]


def test_every_node_publishes_8_npus_and_4_nics_on_two_numa_nodes(local_cluster):
    slices = local_cluster.get("resourceslices")
    by_node_driver = {(s["spec"]["nodeName"], s["spec"]["driver"]): s for s in slices}
    for i in range(4):
        node = f"rebel100-node-{i}"
        npus = by_node_driver[(node, "npu.rebellions.ai")]["spec"]["devices"]
        nics = by_node_driver[(node, "dra.net")]["spec"]["devices"]
        assert Counter(d["attributes"][NUMA]["int"] for d in npus) == {0: 4, 1: 4}
        assert Counter(d["attributes"][NUMA]["int"] for d in nics) == {0: 2, 1: 2}
        assert all(d["attributes"]["dra.net/rdma"]["bool"] for d in nics)
    classes = {c["metadata"]["name"]: c for c in local_cluster.get("deviceclasses")}
    assert (
        classes["npu.rebellions.ai"]["spec"]["selectors"][0]["cel"]["expression"]
        == 'device.driver == "npu.rebellions.ai"'
    )
    assert classes["dranet"]["spec"]["selectors"][0]["cel"]["expression"] == 'device.driver == "dra.net"'


def test_vendored_crds_are_established_and_the_gateway_class_exists(local_cluster):
    # crds/<group>_<plural>.yaml holds the CRD named <plural>.<group>
    wanted = {f"{p.stem.split('_', 1)[1]}.{p.stem.split('_', 1)[0]}" for p in (PROJECT_ROOT / "crds").glob("*.yaml")}
    crds = {c["metadata"]["name"]: c for c in local_cluster.get("crds")}
    assert wanted <= crds.keys()
    for name in wanted:
        assert condition(crds[name], "Established")["status"] == "True", name
    assert local_cluster.get("gatewayclass", "istio")["spec"]["controllerName"] == "istio.io/gateway-controller"


def test_the_stacks_claims_bind_to_site_volumes(local_cluster, namespace):
    # The pre-loaded weights volume as the site offers it (ReadOnlyMany) and a compile cache of the render.
    preloaded = [
        d
        for d in yaml.safe_load_all((PROJECT_ROOT / "cluster" / "site" / "preloaded-weights.yaml").read_text())
        if d["kind"] == "PersistentVolumeClaim"
    ]
    claims = [in_namespace(c, namespace) for c in preloaded] + [
        in_namespace(golden("v1-persistentvolumeclaim-rebel100-minimax-m27-decode-compile-cache.yaml"), namespace)
    ]
    assert {c["spec"]["accessModes"][0] for c in claims} == {"ReadOnlyMany", "ReadWriteMany"}
    local_cluster.apply(claims)
    for claim in claims:
        name = claim["metadata"]["name"]
        bound = wait_until(
            f"PVC {name} Bound",
            lambda name=name: (
                (pvc := local_cluster.get("pvc", name, namespace=namespace))["status"].get("phase") == "Bound" and pvc
            ),
        )
        assert bound["spec"]["storageClassName"] == "site-shared"  # the default StorageClass
        volume = local_cluster.get("pv", bound["spec"]["volumeName"])
        assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_an_engine_claim_gets_4_npus_and_2_nics_of_one_numa_node(local_cluster, namespace):
    template = in_namespace(
        golden(
            next(
                p.name
                for p in GOLDEN.glob(
                    "resource.k8s.io_v1-resourceclaimtemplate-rebel100-minimax-m27-decode-npu-rdma-*.yaml"
                )
            )
        ),
        namespace,
    )
    local_cluster.apply([template, engine_pod("engine-0", template["metadata"]["name"])], namespace=namespace)
    local_cluster.kubectl("wait", "--for=condition=Ready", "pod/engine-0", f"--namespace={namespace}", "--timeout=60s")
    pod = local_cluster.get("pod", "engine-0", namespace=namespace)
    assert pod["status"]["phase"] == "Running"
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = local_cluster.get("resourceclaim", claim_name, namespace=namespace)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert Counter(r["request"] for r in results) == {"npu": 4, "rdma": 2}
    attributes = {
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): d["attributes"]
        for s in local_cluster.get("resourceslices")
        for d in s["spec"]["devices"]
    }
    numa = {attributes[(r["driver"], r["pool"], r["device"])][NUMA]["int"] for r in results}
    assert len(numa) == 1, results
    assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}


def test_a_5_npu_numa_local_claim_stays_pending_with_the_schedulers_reason(local_cluster, namespace):
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "five-npus"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "npu",
                            "exactly": {
                                "deviceClassName": "npu.rebellions.ai",
                                "allocationMode": "ExactCount",
                                "count": 5,
                            },
                        }
                    ],
                    "constraints": [{"requests": ["npu"], "matchAttribute": NUMA}],
                }
            }
        },
    }
    local_cluster.apply([template, engine_pod("too-big", "five-npus")], namespace=namespace)
    scheduled = wait_until(
        "the scheduler's verdict",
        lambda: condition(local_cluster.get("pod", "too-big", namespace=namespace), "PodScheduled").get("reason"),
    )
    pod = local_cluster.get("pod", "too-big", namespace=namespace)
    assert scheduled == "Unschedulable"
    assert pod["status"]["phase"] == "Pending"
    assert "cannot allocate all claims" in condition(pod, "PodScheduled")["message"]


def test_a_job_runs_to_completion(local_cluster, namespace):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:sim"}]}},
        },
    }
    local_cluster.apply(job, namespace=namespace)
    local_cluster.kubectl("wait", "--for=condition=Complete", "job/once", f"--namespace={namespace}", "--timeout=60s")
    assert local_cluster.get("job", "once", namespace=namespace)["status"]["succeeded"] == 1


def test_a_slow_engine_is_running_but_not_ready_until_its_delay(local_cluster, namespace):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "slow", "annotations": {"rebel100.local/ready-delay": "6s"}},
        "spec": {"containers": [{"name": "vllm", "image": "vllm:sim"}]},
    }
    local_cluster.apply(pod, namespace=namespace)
    running = wait_until(
        "pod slow Running",
        lambda: (p := local_cluster.get("pod", "slow", namespace=namespace))["status"].get("phase") == "Running" and p,
    )
    assert condition(running, "Ready")["status"] == "False"
    started = time.monotonic()
    local_cluster.kubectl("wait", "--for=condition=Ready", "pod/slow", f"--namespace={namespace}", "--timeout=60s")
    assert time.monotonic() - started > 3


def test_start_is_idempotent_and_stop_leaves_no_process(tmp_path, cluster_bins):
    """A second, one-node instance of its own: start twice, stop twice, nothing left running."""
    port = random_free_block(6)
    cluster = start_instance(tmp_path / "instance", port, nodes=1)
    again = script("start", "--dir", str(cluster.dir), "--port", str(port), "--nodes", "1")
    assert again.returncode == 0 and "already running" in again.stderr
    assert again.stdout.strip().splitlines()[-1] == str(cluster.kubeconfig)
    assert script("kubeconfig", "--dir", str(cluster.dir)).stdout.strip() == str(cluster.kubeconfig)
    assert script("status", "--dir", str(cluster.dir)).returncode == 0
    pids = cluster.pids()
    assert sorted(pids) == sorted(["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"])
    stop_instance(cluster)
    assert not [pid for pid in pids.values() if process_alive(pid)]
    assert not list((cluster.dir / "run").glob("*.pid"))
    assert (cluster.dir / "logs" / "kube-apiserver.log").exists()  # what the user may want to read stays
    second = script("stop", "--dir", str(cluster.dir))
    assert second.returncode == 0 and "not running" in second.stderr
    assert script("kubeconfig", "--dir", str(cluster.dir)).returncode == 1
    assert script("status", "--dir", str(cluster.dir)).returncode == 1
