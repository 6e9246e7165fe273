"""Prefill and decode scaled apart by the real KEDA under load through the request path (issue 24): the stack the
router programs read, with both roles autoscaled on their engines' queues, served on a local site of its own with
KEDA v2.18.1's operator and metrics API server and Prometheus (localsite/autoscaler.py). The controller-manager's HPA
scales decode up while 16 clients keep every decode slot busy with short prompts (decode-only: prefill, on its own
signal, stays at its minimum), the real scheduler places the new pods with their DRA claims, the EPP routes to them,
and decode goes back to its minimum when the load stops; new long prompts (prefill then decode) scale prefill.

What the ScaledObject says is the stack's render; everything that acts on it is a real program: KEDA turns it into
an HPA and serves its metric through the aggregation layer, the HPA controller computes the replicas.
"""

from __future__ import annotations

import pathlib
import threading
import time

import pytest
import yaml

from core.stackfile import stack_file
from localsite import binaries
from localsite.autoscaler import PROMETHEUS_ADDRESS, SiteAutoscaling
from localsite.harness import ServedSite, completion
from tests.cluster.conftest import cluster_bin_dir
from tests.localsite.conftest import NAMESPACE
from tests.localsite.test_requests import long_prompt
from tests.prerequisites import require

pytestmark = pytest.mark.cluster

DECODE, PREFILL = "minimax-m27-decode", "minimax-m27-prefill"
CLIENTS = 16  # four times a decode pod's slots (4 DP ranks x maxNumSeqs 1): a queue builds on one pod
# Every engine rank answers after 400 ms: 16 clients on one decode pod keep about 12 requests waiting.
SIM_ARGS = ("--time-to-first-token=400ms",)
SCALE_TIMEOUT = 240.0  # KEDA's polling and the HPA's 15 s sync, Prometheus's 5 s scrape, kwok's start of the pods
AUTOSCALING = {
    "minReplicas": 1,
    "maxReplicas": 4,
    "metric": "engineQueue",
    "target": 1,
    "scaleDownStabilizationSeconds": 0,
    "pollingIntervalSeconds": 5,
}


def autoscaled_stack_file(stack: str, folder: pathlib.Path) -> pathlib.Path:
    """The generation's stack with decode autoscaled and the triggers on the site's Prometheus."""
    config = yaml.safe_load(stack_file(stack).read_text())
    values = config["config"]
    for role in ("rebel100:prefill", "rebel100:decode"):
        values[role] = {**{k: v for k, v in values[role].items() if k != "replicas"}, "autoscaling": AUTOSCALING}
    values["rebel100:rollout"] = {"strategy": "RollingUpdate"}
    values["rebel100:observability"] = {"prometheusAddress": PROMETHEUS_ADDRESS, "scrapeInterval": "5s"}
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def autoscaled(tmp_path_factory, site_binaries) -> ServedSite:
    require(cluster_bin_dir(), "the local cluster is not built (run `scripts/cluster build` or `make cluster`)")
    for program in SiteAutoscaling.PROGRAMS:
        try:
            binaries.program(program)
        except binaries.Missing as err:
            require(None, f"the site's autoscaling is not built ({err}; scripts/consumers build keda prometheus)")
    stack = binaries.stack_for(site_binaries.programs.epp)
    folder = tmp_path_factory.mktemp("autoscaling")
    site = ServedSite(folder, stack, NAMESPACE, SIM_ARGS, config_file=autoscaled_stack_file(stack, folder))
    with site:
        yield site
    left = site.leftovers()
    assert not left, f"processes left running after the site and its cluster stopped: {left}"


def replicas(site: ServedSite, deployment: str = DECODE) -> int:
    return site.get("deployment", deployment)["spec"].get("replicas", 1)


def live_pods(site: ServedSite, role: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in site.pods(role) if not p["metadata"].get("deletionTimestamp")}


def hpa_ready(site: ServedSite, deployment: str) -> bool:
    """KEDA made the HPA of the Deployment's ScaledObject (`keda-hpa-<name>`), and it reads its external metric."""
    found = site.kubectl("get", "hpa", f"keda-hpa-{deployment}", f"--namespace={NAMESPACE}", "-o", "json", check=False)
    if found.returncode != 0:
        return False
    conditions = {c["type"]: c["status"] for c in yaml.safe_load(found.stdout).get("status", {}).get("conditions", [])}
    return conditions.get("ScalingActive") == "True"


class Load:
    """CLIENTS threads sending completions until stopped: short ones (decode-only) or new long ones (prefill, then
    decode); the pods that answered."""

    def __init__(self, site: ServedSite, long_prompts: bool = False):
        self.site = site
        self.long_prompts = long_prompts
        self.stop = threading.Event()
        self.answered: dict[str, int] = {}
        self.failed = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client, daemon=True) for _ in range(CLIENTS)]

    def client(self) -> None:
        while not self.stop.is_set():
            try:
                prompt = long_prompt() if self.long_prompts else "hi"
                answer = self.site.post("/completions", completion(prompt), timeout=60)
            except OSError:
                answer = None
            with self.lock:
                if answer is not None and answer.status == 200:
                    self.answered[answer.pod] = self.answered.get(answer.pod, 0) + 1
                else:
                    self.failed += 1

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=90)


def assert_placed_through_dra(site: ServedSite, role: str, pods: dict[str, dict]) -> None:
    """Each pod Running with every claim allocated by the scheduler, and one pod of the role per node."""
    for name, pod in pods.items():
        assert pod["status"].get("phase") == "Running", (name, pod["status"])
        claims = [
            site.get("resourceclaim", s["resourceClaimName"]) for s in pod["status"].get("resourceClaimStatuses", [])
        ]
        assert claims and all(c["status"].get("allocation") for c in claims), (name, claims)
    nodes = [p["spec"]["nodeName"] for p in live_pods(site, role).values()]
    assert len(nodes) == len(set(nodes)), f"one {role} pod per node (spreadRoles): {nodes}"


def test_decode_scales_up_under_load_and_back_to_its_minimum(autoscaled: ServedSite):
    site = autoscaled
    for deployment in (PREFILL, DECODE):
        site.wait_for(f"KEDA's HPA for {deployment}, active", lambda d=deployment: hpa_ready(site, d), SCALE_TIMEOUT)
        assert replicas(site, deployment) == 1, "an autoscaled Deployment starts at minReplicas"
    (first,) = live_pods(site, "decode")
    started = time.monotonic()
    with Load(site) as load:
        site.wait_for("the HPA to scale decode above 1 under load", lambda: replicas(site) > 1, SCALE_TIMEOUT)
        scaled_up = time.monotonic() - started
        site.wait_for(
            "a new decode pod answering through the EPP",
            lambda: any(pod != first for pod in dict(load.answered)),
            SCALE_TIMEOUT,
        )
        serving_after = time.monotonic() - started
        site.wait_for("decode at its maximum", lambda: len(live_pods(site, "decode")) == 4, SCALE_TIMEOUT)
        assert replicas(site, PREFILL) == 1, "short prompts are decode-only: prefill's own queue stays empty"
    assert_placed_through_dra(site, "decode", {n: p for n, p in live_pods(site, "decode").items() if n != first})
    stopped = time.monotonic()
    site.wait_for("decode back to minReplicas once idle", lambda: replicas(site) == 1, SCALE_TIMEOUT)
    scaled_down = time.monotonic() - stopped
    print(
        f"decode 1 -> 4 pods: scaled up {scaled_up:.0f}s after the load started, a new pod serving after "
        f"{serving_after:.0f}s; back to 1 {scaled_down:.0f}s after it stopped; {sum(load.answered.values())} answers, "
        f"{load.failed} refused or failed"
    )


def test_prefill_scales_on_its_own_queue_under_new_long_prompts(autoscaled: ServedSite):
    site = autoscaled
    site.wait_for("decode back at its minimum", lambda: replicas(site) == 1, SCALE_TIMEOUT)
    (first,) = live_pods(site, "prefill")
    started = time.monotonic()
    with Load(site, long_prompts=True) as load:
        site.wait_for("the HPA to scale prefill above 1", lambda: replicas(site, PREFILL) > 1, SCALE_TIMEOUT)
        scaled_up, peak = time.monotonic() - started, replicas(site, PREFILL)
        site.wait_for("a new prefill pod Running", lambda: len(live_pods(site, "prefill")) > 1, SCALE_TIMEOUT)
    assert_placed_through_dra(site, "prefill", {n: p for n, p in live_pods(site, "prefill").items() if n != first})
    assert load.answered, f"P/D requests answered while prefill scaled ({load.failed} failed)"
    stopped = time.monotonic()
    site.wait_for("prefill back to minReplicas once idle", lambda: replicas(site, PREFILL) == 1, SCALE_TIMEOUT)
    print(
        f"prefill 1 -> {peak}: scaled up {scaled_up:.0f}s after new long prompts started; back to 1 "
        f"{time.monotonic() - stopped:.0f}s after they stopped; {sum(load.answered.values())} answers"
    )
