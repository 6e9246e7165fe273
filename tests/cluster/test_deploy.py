"""`scripts/up prod-4p4d` with the real Pulumi engine, provider and pack on the local control plane:
admitted by the API server, placed by the scheduler through DRA, updated, drifted, refused,
replaced and destroyed, each asserted from the API.

The tests share one deployment (an `up` takes minutes) but none depends on another having run: each asks
the `deployed` fixture for the baseline deployment (the stack file as copied, engines Ready after
READY_DELAY), which deploys it only when the site is not in that state already, and fails the test's
setup with its own message when it cannot. So each test runs alone (`pytest ...::test_g_...`), in any
order, and a failure names its own cause instead of cascading into the tests after it.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import time

import pytest
import yaml

from tests.cluster.conftest import LocalCluster
from tests.prerequisites import require
from tests.pulumi_project import Project, copy_project, dead_pid, toolchain_dir

pytestmark = pytest.mark.cluster

STACK = "prod-4p4d"
NS = "rebel100"
ROLE = "llm-d.ai/role"
NUMA = "resource.kubernetes.io/numaNode"
READY_DELAY = "3s"  # kwok's Running -> Ready delay for the engines (a compile, scaled down)
BASELINE_REPLICAS = {"minimax-m27-epp": 1, "minimax-m27-prefill": 4, "minimax-m27-decode": 4}


class Site:
    """The copy of the project deployed to the local cluster, and what is known to be deployed there."""

    def __init__(self, project: Project, cluster: LocalCluster):
        self.project = project
        self.cluster = cluster
        self.baseline = stack_document(project)
        # The stack file's config of the last `up` that succeeded; None when nothing (or not known what) is deployed.
        self.deployed: dict | None = None

    def reset_config(self) -> None:
        write_stack_document(self.project, self.baseline)

    def up(self) -> subprocess.CompletedProcess:
        """`scripts/up` with the stack file as it is now; remembers what it deployed when it succeeded."""
        self.deployed = None
        proc = up(self.project)
        if proc.returncode == 0:
            self.deployed = stack_document(self.project)["config"]
        return proc

    def at_baseline(self) -> str | None:
        """None when the baseline is deployed and healthy, else what differs."""
        if self.deployed != self.baseline["config"]:
            return "the last successful `up` was not of the baseline stack file"
        replicas = deployment_replicas(self.cluster)
        if replicas != BASELINE_REPLICAS:
            return f"deployments {replicas}, expected {BASELINE_REPLICAS}"
        pods = engines(self.cluster)
        if len(pods) != 8 or not all(ready(p) for p in pods):
            return f"{len(pods)} engine pods, {sum(ready(p) for p in pods)} Ready, expected 8 Ready"
        return None


@pytest.fixture(scope="module")
def site(tmp_path_factory, local_cluster: LocalCluster) -> Site:
    toolchain = require(toolchain_dir(), "no Pulumi toolchain (run `make toolchain`)")
    project = copy_project(tmp_path_factory.mktemp("cluster-deploy") / "project", toolchain)
    project.env.update(
        KUBECONFIG=str(local_cluster.kubeconfig),
        PATH=f"{local_cluster.bin_dir}:{project.env['PATH']}",
        REBEL100_UNSCHEDULABLE_GRACE="15",
    )
    local_cluster.preload_weights()  # whatever a module before this one deleted
    set_config(project, "rebel100:engine", {"podAnnotations": {"rebel100.local/ready-delay": READY_DELAY}})
    yield Site(project, local_cluster)
    # Free the site's NUMA slots for the other cluster tests, whatever happened above.
    project.pulumi("destroy", "-s", STACK, "--yes", timeout=600)
    local_cluster.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=300, check=False)
    local_cluster.preload_weights()


@pytest.fixture
def deployed(site: Site) -> tuple[Project, LocalCluster]:
    """The precondition of every test but the first up: the baseline stack file, deployed and Ready. Deploys it
    only when the site is not in that state (nothing deployed yet, or an earlier test changed or broke it)."""
    site.reset_config()
    differs = site.at_baseline()
    if differs:
        proc = site.up()
        if proc.returncode != 0:
            pytest.fail(
                f"precondition: the baseline deployment of {STACK} ({differs}) failed, `scripts/up` exit "
                f"{proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}",
                pytrace=False,
            )
        differs = site.at_baseline()
        if differs:
            pytest.fail(
                f"precondition: after `scripts/up` the baseline deployment of {STACK} is not healthy: {differs}",
                pytrace=False,
            )
    return site.project, site.cluster


def stack_document(project: Project) -> dict:
    return yaml.safe_load((project.root / f"Pulumi.{STACK}.yaml").read_text())


def write_stack_document(project: Project, document: dict) -> None:
    (project.root / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(document))


def set_config(project: Project, key: str, value) -> None:
    path = project.root / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    if value is None:
        document["config"].pop(key, None)
    elif isinstance(value, dict) and isinstance(document["config"].get(key), dict):
        document["config"][key] = {**document["config"][key], **value}
    else:
        document["config"][key] = value
    path.write_text(yaml.safe_dump(document))


def up(project: Project) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["scripts/up", STACK], cwd=project.root, env=project.env, capture_output=True, text=True, timeout=1200
    )


def engines(cluster: LocalCluster) -> list[dict]:
    return [
        p
        for p in cluster.get("pods", namespace=NS)
        if ROLE in p["metadata"].get("labels", {}) and not p["metadata"].get("deletionTimestamp")
    ]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def when(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def allocations(cluster: LocalCluster) -> dict[str, list[tuple[str, int]]]:
    """Engine pod -> [(request, NUMA node)] of every device its claim was allocated."""
    numa = {}
    for resource_slice in cluster.get("resourceslices"):
        spec = resource_slice["spec"]
        for device in spec.get("devices", []):
            numa[(spec["driver"], spec["pool"]["name"], device["name"])] = device["attributes"][NUMA]["int"]
    claims = {c["metadata"]["name"]: c for c in cluster.get("resourceclaims", namespace=NS)}
    found = {}
    for pod in engines(cluster):
        results = []
        for status in pod["status"].get("resourceClaimStatuses", []):
            allocation = claims[status["resourceClaimName"]]["status"]["allocation"]
            results += [
                (r["request"], numa[(r["driver"], r["pool"], r["device"])]) for r in allocation["devices"]["results"]
            ]
        found[pod["metadata"]["name"]] = results
    return found


def deployment_replicas(cluster: LocalCluster) -> dict[str, int]:
    return {d["metadata"]["name"]: d["spec"]["replicas"] for d in cluster.get("deployments", namespace=NS)}


def test_a_up_places_every_engine_through_dra(site):
    """`up` of the baseline stack file: from nothing when it runs first, or putting back what another test left."""
    cluster = site.cluster
    site.reset_config()
    proc = site.up()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pods = engines(cluster)
    roles = [p["metadata"]["labels"][ROLE] for p in pods]
    assert sorted(roles) == ["decode"] * 4 + ["prefill"] * 4
    assert all(p["status"]["phase"] == "Running" and ready(p) for p in pods)
    epp = [p for p in cluster.get("pods", namespace=NS) if p["metadata"]["name"].startswith("minimax-m27-epp")]
    assert len(epp) == 1 and epp[0]["status"]["phase"] == "Running"
    for role in ("prefill", "decode"):
        nodes = [p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"][ROLE] == role]
        assert len(set(nodes)) == 4, f"two {role} pods share a node: {nodes}"
    for pod, devices in allocations(cluster).items():
        assert sorted(request for request, _ in devices) == ["npu"] * 4 + ["rdma"] * 2, (pod, devices)
        assert len({node for _, node in devices}) == 1, f"{pod} spans NUMA nodes: {devices}"
    assert "placement of stack 'prod-4p4d': all 8 engine pods fit" in proc.stdout
    assert "npu: npu-" in proc.stdout and "(NUMA " in proc.stdout  # the placement read back, printed


def test_a2_the_epps_metrics_token_passes_the_checks_the_epp_makes(site, deployed):
    """The EPP's metrics filter (controller-runtime pkg/metrics/filters) checks a scrape's bearer token with a
    TokenReview, then a SubjectAccessReview of `get /metrics` for its user, both created as the EPP's ServiceAccount.
    The same two requests, made here as that account with the token the token controller wrote into the rendered
    Secret (the one the EPP's PodMonitor sends): the API server's RBAC on the rendered roles answers them."""
    _, cluster = deployed
    epp = f"system:serviceaccount:{NS}:minimax-m27-epp"
    reader = f"system:serviceaccount:{NS}:minimax-m27-metrics-reader"
    deadline = time.monotonic() + 60
    while (
        not (secret := cluster.get("secret", "minimax-m27-metrics-reader-token", namespace=NS))
        .get("data", {})
        .get("token")
    ):
        assert time.monotonic() < deadline, f"the token controller wrote no token: {secret}"
        time.sleep(1)

    def create_as_epp(document: dict) -> dict:
        return json.loads(
            cluster.kubectl(
                "create", f"--as={epp}", "--validate=false", "-o", "json", "-f", "-", input=json.dumps(document)
            ).stdout
        )["status"]

    review = create_as_epp(
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": base64.b64decode(secret["data"]["token"]).decode()},
        }
    )
    assert review["authenticated"] and review["user"]["username"] == reader, review
    access = create_as_epp(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": reader,
                "groups": review["user"]["groups"],
                "uid": review["user"]["uid"],
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            },
        }
    )
    assert access["allowed"], access
    # The reader reads metrics and nothing else.
    for what in (["get", "pods", f"--namespace={NS}"], ["get", "secrets", f"--namespace={NS}"]):
        assert cluster.kubectl("auth", "can-i", *what, f"--as={reader}", check=False).stdout.strip() == "no", what


def test_b_second_up_changes_nothing(site, deployed):
    """Nothing to change: Pulumi's own preview agrees, and `scripts/up` stops after its preview (the update pass,
    which `pulumi up --yes` would run anyway, is skipped): no update in the state, outputs and placement printed."""
    project, _ = deployed
    proc = project.pulumi("preview", "-s", STACK, "--expect-no-changes", "--refresh")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    state_file = next((project.root / ".pulumi-state").rglob(f"{STACK}.json"))
    state = state_file.read_bytes()
    # The CLI's temporary files go to the caller's TMPDIR (the copy's .tmp): the preview above, run with the bare
    # CLI, left the provider's copy of the kubeconfig there; scripts/up leaves nothing (its own folder, removed).
    temporary = set((project.root / ".tmp").iterdir())
    assert any(p.name.startswith("kubeconfig") for p in temporary), "precondition: the bare CLI leaves the copy"
    again = site.up()
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert set((project.root / ".tmp").iterdir()) == temporary, "scripts/up left temporary files behind"
    # Every resource of the state is one the preview left unchanged, but the default providers, which the engine's
    # display hides (`default`, `default_4_25_0`: here the pulumi provider of the rollout's Stash).
    resources = json.loads(state)["checkpoint"]["latest"]["resources"]
    unchanged = sum(
        1
        for r in resources
        if not (r["type"].startswith("pulumi:providers:") and r["urn"].rsplit("::", 1)[-1].startswith("default"))
    )
    assert f"preview: nothing to change ({unchanged} unchanged)" in again.stderr, again.stderr[-3000:]
    assert "Previewing update (prod-4p4d)" in again.stdout and "Updating (prod-4p4d)" not in again.stdout
    assert state_file.read_bytes() == state
    assert "openaiBaseUrl" in again.stdout and "npu: npu-" in again.stdout  # outputs and placement


def test_b2_a_stale_lock_is_cleared_even_with_nothing_to_change(site, deployed):
    """A lock left by a `pulumi` that died (here: planted, as lock.go writes it, for a pid that is gone): the preview
    proposes nothing, but the update runs anyway, which clears the lock (scripts/up recover_lock)."""
    project, _ = deployed
    project.plant_lock(STACK, os.uname().nodename, dead_pid())
    proc = site.up()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "preview: nothing to change" not in proc.stderr  # the lock alone decides: not even asked
    assert "was locked by a pulumi that is gone (someone@" in proc.stderr, proc.stderr[-3000:]
    assert not list(project.lock_dir(STACK).iterdir())


def test_c_image_bump_rolls_prefill_then_decode(site, deployed):
    project, cluster = deployed
    before = {p["metadata"]["name"] for p in engines(cluster)}
    set_config(project, "rebel100:engine", {"image": "rebellions/vllm-rbln:0.12.1"})
    proc = site.up()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.split("Resources:")[-1]
    assert "2 updated" in summary and "created" not in summary and "deleted" not in summary, summary
    pods = engines(cluster)
    assert not before & {p["metadata"]["name"] for p in pods}
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {"rebellions/vllm-rbln:0.12.1"}
    prefill_ready = max(
        when(c["lastTransitionTime"])
        for p in pods
        if p["metadata"]["labels"][ROLE] == "prefill"
        for c in p["status"]["conditions"]
        if c["type"] == "Ready"
    )
    decode_created = min(
        when(p["metadata"]["creationTimestamp"]) for p in pods if p["metadata"]["labels"][ROLE] == "decode"
    )
    assert decode_created >= prefill_ready, (prefill_ready, decode_created)


def test_d_drift_is_reported_and_undone(site, deployed):
    project, cluster = deployed
    cluster.kubectl("scale", "deployment/minimax-m27-decode", "--replicas=2", f"--namespace={NS}")
    preview = project.pulumi("preview", "-s", STACK, "--refresh", "--diff")
    assert preview.returncode == 0, preview.stderr
    assert "minimax-m27-decode" in preview.stdout and "replicas" in preview.stdout, preview.stdout[-3000:]
    proc = site.up()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert deployment_replicas(cluster)["minimax-m27-decode"] == 4
    assert len([p for p in engines(cluster) if p["metadata"]["labels"][ROLE] == "decode"]) == 4


def up_refused_before_apply(site: Site) -> subprocess.CompletedProcess:
    """`scripts/up` of the changed stack file, which must be refused before apply: exit 1, the state checkpoint
    byte for byte and the Deployments as they were. The stack file is put back to the baseline either way."""
    state_file = next((site.project.root / ".pulumi-state").rglob(f"{STACK}.json"))
    state = state_file.read_bytes()
    deployed_before = site.deployed
    proc = site.up()
    site.reset_config()
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert state_file.read_bytes() == state
    assert deployment_replicas(site.cluster) == BASELINE_REPLICAS
    site.deployed = deployed_before  # refused before apply: what was deployed still is
    return proc


def test_e_a_stack_that_cannot_be_placed_is_refused_before_apply(site, deployed):
    project, _cluster = deployed
    set_config(project, "rebel100:hardware", None)  # nodes unset: the gate cannot know
    set_config(project, "rebel100:prefill", {"replicas": 5})
    set_config(project, "rebel100:decode", {"replicas": 5})
    started = time.monotonic()
    proc = up_refused_before_apply(site)
    took = time.monotonic() - started
    assert "minimax-m27-prefill pod 5" in proc.stderr and "already runs a prefill pod" in proc.stderr, proc.stderr
    assert took < 120


def test_e2_a_pod_the_scheduler_refuses_during_up_cancels_it(site, deployed):
    """Cordoned nodes are not in the preflight's inventory check; the watch beside `pulumi up` names
    the pending pod and the scheduler's reason, and cancels the update within its grace."""
    project, cluster = deployed
    nodes = [n["metadata"]["name"] for n in cluster.get("nodes")]
    for node in nodes:
        cluster.kubectl("cordon", node)
    try:
        set_config(project, "rebel100:engine", {"image": "rebellions/vllm-rbln:0.12.2"})
        started = time.monotonic()
        proc = site.up()
        took = time.monotonic() - started
    finally:
        for node in nodes:
            cluster.kubectl("uncordon", node)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "has been unschedulable for 15 s" in proc.stderr and "unschedulable" in proc.stderr.lower(), proc.stderr[
        -3000:
    ]
    assert took < 300
    again = site.up()  # the nodes are back: the same change now rolls out
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert {c["image"] for p in engines(cluster) for c in p["spec"]["containers"]} == {"rebellions/vllm-rbln:0.12.2"}


def test_e3_a_change_the_retained_volumes_cannot_take_is_refused_before_apply(site, deployed):
    """Issue 16: switching weights.source to download where the site holds the pre-loaded `model-weights`, and
    changing the StorageClass of the deployed compile caches, pass the config gate; the preflight reads the live
    PVCs and refuses both, naming the object and the field, before Pulumi applies anything."""
    project, cluster = deployed
    pvcs_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in cluster.get("pvc", namespace=NS)}
    commit = "0123456789abcdef0123456789abcdef01234567"
    set_config(project, "rebel100:weights", {"source": "download", "revision": commit, "draftRevision": commit})
    set_config(project, "rebel100:storage", {"storageClass": "fast-nvme"})
    proc = up_refused_before_apply(site)
    assert f"PersistentVolumeClaim {NS}/model-weights already exists" in proc.stderr, proc.stderr[-3000:]
    assert "weights.pvc" in proc.stderr and "weights.source: pvc" in proc.stderr, proc.stderr[-3000:]
    assert "spec.storageClassName" in proc.stderr and "storage.storageClass asks for 'fast-nvme'" in proc.stderr, (
        proc.stderr[-3000:]
    )
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in cluster.get("pvc", namespace=NS)} == pvcs_before


def test_e4_a_change_the_pack_refuses_stops_at_the_preview(site, deployed):
    """What only the pack judges (image hygiene at the prod level): the preview that scripts/up runs first
    refuses it, and the update never starts."""
    project, _ = deployed
    # The gate judges the pins its version facts read (the engine, the EPP, the sidecar: a :latest there is refused
    # before the preview); the downloader's image, run by the engines' wait-for-weights init container, is the pack's.
    set_config(project, "rebel100:weights", {"downloaderImage": "python:latest"})
    proc = up_refused_before_apply(site)
    assert "[mandatory]  image-tag-pinned" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    assert "up: the preview of stack prod-4p4d failed (exit 1): nothing was changed" in proc.stderr
    assert "Updating (prod-4p4d)" not in proc.stdout


def test_f_a_slow_engine_is_waited_for(site, deployed):
    project, cluster = deployed
    set_config(project, "rebel100:engine", {"podAnnotations": {"rebel100.local/ready-delay": "5s"}})
    started = time.monotonic()
    proc = site.up()
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pods = engines(cluster)
    assert len(pods) == 8 and all(ready(p) for p in pods)
    # Every engine took its 5 s to become Ready, and `up` returned only after that (not before, not failed).
    for pod in pods:
        became_ready = next(when(c["lastTransitionTime"]) for c in pod["status"]["conditions"] if c["type"] == "Ready")
        assert (became_ready - when(pod["metadata"]["creationTimestamp"])).total_seconds() >= 4, pod["metadata"]["name"]
    # The 8 engines rolled one at a time (maxSurge 0, maxUnavailable 1), each its 5 s, all waited for.
    assert took >= 40, took


def test_g_an_immutable_claim_change_replaces_cleanly(site, deployed):
    project, cluster = deployed
    set_config(project, "rebel100:engine", {"podAnnotations": {"rebel100.local/ready-delay": READY_DELAY}})
    set_config(project, "rebel100:hardware", {"rdmaNicsPerPod": 1})
    proc = site.up()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "replaced" in proc.stdout.split("Resources:")[-1], proc.stdout[-2000:]
    templates = {t["metadata"]["name"]: t for t in cluster.get("resourceclaimtemplates", namespace=NS)}
    for template in templates.values():
        requests = {r["name"]: r["exactly"]["count"] for r in template["spec"]["spec"]["devices"]["requests"]}
        assert requests == {"npu": 4, "rdma": 1}
    for pod, devices in allocations(cluster).items():
        assert sorted(request for request, _ in devices) == ["npu"] * 4 + ["rdma"], (pod, devices)


def test_h_destroy_keeps_only_the_data_volumes(site, deployed):
    project, cluster = deployed
    site.deployed = None
    proc = project.pulumi("destroy", "-s", STACK, "--yes", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    left = json.loads(
        cluster.kubectl(
            "get",
            "all,configmaps,resourceclaimtemplates,pvc,networkpolicies,poddisruptionbudgets",
            f"--namespace={NS}",
            "-o",
            "json",
        ).stdout
    )["items"]
    kinds = sorted(
        (o["kind"], o["metadata"]["name"])
        for o in left
        if not (o["kind"] == "ConfigMap" and o["metadata"]["name"] == "kube-root-ca.crt")
    )
    assert kinds == [
        ("PersistentVolumeClaim", "minimax-m27-decode-compile-cache"),
        ("PersistentVolumeClaim", "minimax-m27-prefill-compile-cache"),
        ("PersistentVolumeClaim", "model-weights"),
    ], kinds
    cluster_wide = json.loads(cluster.kubectl("get", "clusterroles,clusterrolebindings", "-o", "json").stdout)["items"]
    assert not [o["metadata"]["name"] for o in cluster_wide if o["metadata"]["name"].startswith(f"{NS}-minimax-m27-")]
