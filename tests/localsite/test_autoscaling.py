"""Prefill and decode scaled apart by the real KEDA under load through the request path (issue 24): the stack the
router programs read, with both roles autoscaled on their engines' queues (sitetests/scaling.py), served on a local
site of its own with KEDA v2.18.1's operator and metrics API server and Prometheus (localsite/autoscaler.py). The
controller-manager's HPA scales decode up while 16 clients keep every decode slot busy with short prompts
(decode-only: prefill, on its own signal, stays at its minimum), the real scheduler places the new pods with their
DRA claims, the EPP routes to them, and decode goes back to its minimum when the load stops; new long prompts
(prefill then decode) scale prefill.

What the ScaledObject says is the stack's render; everything that acts on it is a real program: KEDA turns it into
an HPA and serves its metric through the aggregation layer, the HPA controller computes the replicas.
"""

from __future__ import annotations

import json
import time
import urllib.parse

import pytest

from core.versions import image_version
from core.versions import router as router_versions
from localsite import binaries, netns
from localsite.autoscaler import PROMETHEUS_PORT
from sitetests import scaling
from sitetests.harness import ServedSite
from tests.localsite.conftest import NAMESPACE, require_site_autoscaling

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def autoscaled(tmp_path_factory, site_binaries) -> ServedSite:
    require_site_autoscaling()
    stack = binaries.stack_for(site_binaries.programs.epp)
    folder = tmp_path_factory.mktemp("autoscaling")
    stack_file = scaling.autoscaled_stack_file(stack, folder)
    site = ServedSite(folder, stack, NAMESPACE, scaling.SIM_ARGS, config_file=stack_file)
    with site:
        yield site
    left = site.leftovers()
    assert not left, f"processes left running after the site and its cluster stopped: {left}"


def assert_placed_through_dra(site: ServedSite, role: str, pods: dict[str, dict]) -> None:
    """Each pod Running with every claim allocated by the scheduler, and no two placed pods of the role on a node."""
    for name, pod in pods.items():
        assert pod["status"].get("phase") == "Running", (name, pod["status"])
        claims = [
            site.get("resourceclaim", s["resourceClaimName"]) for s in pod["status"].get("resourceClaimStatuses", [])
        ]
        assert claims and all(c["status"].get("allocation") for c in claims), (name, claims)
    nodes = [p["spec"]["nodeName"] for p in scaling.live_pods(site, role).values() if p["spec"].get("nodeName")]
    assert len(nodes) == len(set(nodes)), f"one {role} pod per node (spreadRoles): {nodes}"


def test_decode_scales_up_under_load_and_back_to_its_minimum(autoscaled: ServedSite):
    site = autoscaled
    scaling.wait_until_active(site)
    assert scaling.replicas(site, scaling.PREFILL) == scaling.replicas(site, scaling.DECODE) == 1, (
        "an autoscaled Deployment starts at minReplicas"
    )
    (first,) = scaling.live_pods(site, "decode")
    placed: list[str] = []

    def at_maximum(pods: dict[str, dict]) -> None:
        new = {name: pod for name, pod in pods.items() if name != first}
        assert len(new) == scaling.AUTOSCALING["maxReplicas"] - 1
        assert_placed_through_dra(site, "decode", new)
        placed.extend(new)

    cycle = scaling.decode_cycle(site, at_maximum=at_maximum)
    assert placed, "decode reached its maximum and its new pods were checked"
    assert cycle.prefill_at_maximum == 1, "short prompts are decode-only: prefill's own queue stays empty"
    print(
        f"decode 1 -> 4 pods: scaled up {cycle.scaled_up:.0f}s after the load started, a new pod serving after "
        f"{cycle.new_pod_serving:.0f}s; back to 1 {cycle.scaled_down:.0f}s after it stopped; {cycle.answers} "
        f"answers, {cycle.failed} refused or failed"
    )


def test_prefill_scales_on_its_own_queue_under_new_long_prompts(autoscaled: ServedSite):
    site = autoscaled
    site.wait_for("decode back at its minimum", lambda: scaling.replicas(site) == 1, scaling.TIMEOUT)
    (first,) = scaling.live_pods(site, "prefill")
    started = time.monotonic()
    with scaling.Load(site, long_prompts=True) as load:
        site.wait_for(
            "the HPA to scale prefill above 1", lambda: scaling.replicas(site, scaling.PREFILL) > 1, scaling.TIMEOUT
        )
        scaled_up, peak = time.monotonic() - started, scaling.replicas(site, scaling.PREFILL)

        def new_running() -> dict[str, dict]:
            return {name: pod for name, pod in scaling.running_pods(site, "prefill").items() if name != first}

        new = site.wait_for("a new prefill pod Running", new_running, scaling.TIMEOUT)
    assert_placed_through_dra(site, "prefill", new)
    assert load.answered, f"P/D requests answered while prefill scaled ({load.failed} failed)"
    stopped = time.monotonic()
    site.wait_for(
        "prefill back to minReplicas once idle", lambda: scaling.replicas(site, scaling.PREFILL) == 1, scaling.TIMEOUT
    )
    print(
        f"prefill 1 -> {peak}: scaled up {scaled_up:.0f}s after new long prompts started; back to 1 "
        f"{time.monotonic() - stopped:.0f}s after they stopped; {sum(load.answered.values())} answers"
    )


def test_the_sites_prometheus_scrapes_every_pod_monitor_the_epps_with_its_token(autoscaled: ServedSite):
    """Each rendered PodMonitor is a job whose targets answer (`up` 1), the EPP's through the bearer token of the
    metrics-reader Secret the PodMonitor names, and the EPP's P/D decision counter is in Prometheus, as the
    dashboard and the `pdDecisionRate` signal read it."""
    site = autoscaled
    epp_image = site.get("deployment", "minimax-m27-epp")["spec"]["template"]["spec"]["containers"][0]["image"]
    generation = router_versions.generation(image_version(epp_image))
    assert generation is not None, epp_image

    def query(expr: str) -> list[dict]:
        status, text = site.get_in_site(
            str(netns.SITE_ADDRESS), PROMETHEUS_PORT, "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        )
        assert status == 200, text[:500]
        return json.loads(text)["data"]["result"]

    def every_job_up() -> bool:
        jobs = {r["metric"]["job"]: r["value"][1] for r in query("max by (job) (up)")}
        return all(
            jobs.get(f"podMonitor/{NAMESPACE}/minimax-m27-{part}/0") == "1" for part in ("prefill", "decode", "epp")
        )

    site.wait_for("every PodMonitor's targets up in the site's Prometheus", every_job_up, scaling.TIMEOUT)
    site.wait_for(
        f"the EPP's {generation.decision_metric} in Prometheus",
        lambda: query(generation.decision_metric),
        scaling.TIMEOUT,
    )
