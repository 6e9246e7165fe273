"""Load that makes the local site's autoscaling act, for its test (tests/localsite/test_autoscaling.py) and `make
bench` (section `autoscaling`): the generation's stack with both roles autoscaled on their engines' queue, engines
that answer after 400 ms, and clients that keep one decode pod's slots over-full.

Both roles scale between 1 and 4 pods on `engineQueue` with a target of 1 waiting request per pod, KEDA polling every
5 s and Prometheus scraping every 5 s, no scale-down window: what the HPA does is then limited by its 15 s sync (the
controller-manager's default) and the site, not by the stack's windows (prod-autoscale keeps the defaults)."""

from __future__ import annotations

import functools
import pathlib
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from localsite.autoscaler import PROMETHEUS_ADDRESS
from sitetests.harness import ServedSite, completion, long_prompt, stack_file_variant

DECODE, PREFILL = "minimax-m27-decode", "minimax-m27-prefill"
CLIENTS = 16  # four times a decode pod's slots (4 DP ranks x maxNumSeqs 1): a queue builds on one pod
SIM_ARGS = ("--time-to-first-token=400ms",)  # 16 clients on one decode pod keep about 12 requests waiting
TIMEOUT = 240.0  # KEDA's polling, the HPA's 15 s sync, Prometheus's 5 s scrape, kwok's start of the new pods
AUTOSCALING = {
    "minReplicas": 1,
    "maxReplicas": 4,
    "metric": "engineQueue",
    "target": 1,
    "scaleDownStabilizationSeconds": 0,
    "pollingIntervalSeconds": 5,
}


def autoscaled_stack_file(stack: str, folder: pathlib.Path) -> pathlib.Path:
    """The stack file of `stack` with both roles autoscaled and the triggers on the site's Prometheus."""

    def edit(values: dict) -> None:
        for role in ("rebel100:prefill", "rebel100:decode"):
            values[role] = {**{k: v for k, v in values[role].items() if k != "replicas"}, "autoscaling": AUTOSCALING}
        values["rebel100:rollout"] = {"strategy": "RollingUpdate"}
        values["rebel100:observability"] = {"prometheusAddress": PROMETHEUS_ADDRESS, "scrapeInterval": "5s"}

    return stack_file_variant(stack, folder, edit)


def replicas(site: ServedSite, deployment: str = DECODE) -> int:
    return site.get("deployment", deployment)["spec"].get("replicas", 1)


def live_pods(site: ServedSite, role: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in site.pods(role) if not p["metadata"].get("deletionTimestamp")}


def running_pods(site: ServedSite, role: str) -> dict[str, dict]:
    """The role's live pods that run: a pod the scheduler has placed is Pending until the site has started it."""
    return {name: pod for name, pod in live_pods(site, role).items() if pod["status"].get("phase") == "Running"}


def hpa_active(site: ServedSite, deployment: str) -> bool:
    """KEDA made the HPA of the Deployment's ScaledObject (`keda-hpa-<name>`), and it reads its external metric."""
    found = site.kubectl(
        "get", "hpa", f"keda-hpa-{deployment}", f"--namespace={site.namespace}", "-o", "json", check=False
    )
    if found.returncode != 0:
        return False
    conditions = {c["type"]: c["status"] for c in yaml.safe_load(found.stdout).get("status", {}).get("conditions", [])}
    return conditions.get("ScalingActive") == "True"


class Load:
    """`clients` threads sending completions until stopped: new short ones (decode-only) or new long ones (prefill, then
    decode); the pods that answered, and how many were refused or failed."""

    def __init__(self, site: ServedSite, long_prompts: bool = False, clients: int = CLIENTS):
        self.site = site
        self.long_prompts = long_prompts
        self.stop = threading.Event()
        self.answered: dict[str, int] = {}
        self.failed = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client, daemon=True) for _ in range(clients)]

    def client(self) -> None:
        while not self.stop.is_set():
            # A short prompt of its own each time. One prompt for all is a shared prefix (v0.10.0 hashes a prompt's
            # partial last block too: prefixhash getKVCacheBlocksFromTokens), cached on the first decode pod, which
            # then scores 2 (prefix-cache-scorer) against a new pod's 1 + 1 (queue, active-request): the EPP kept
            # every request there for minutes in two full runs (2026-12-03), as the weights say it should.
            prompt = long_prompt() if self.long_prompts else f"hi {uuid.uuid4().hex[:8]}"
            try:
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


@dataclass
class DecodeCycle:
    """One round of decode-only load on a site at its minimum, and the idle time after it (seconds)."""

    first_pod: str
    scaled_up: float = 0.0  # load start -> the HPA raised the Deployment's replicas
    new_pod_serving: float = 0.0  # load start -> an answer from a pod that did not exist before
    at_maximum: float = 0.0  # load start -> maxReplicas pods live
    scaled_down: float = 0.0  # load end -> the Deployment back at minReplicas
    prefill_at_maximum: int = 0  # prefill's replicas when decode was at its maximum
    pods_at_maximum: dict[str, dict] = field(default_factory=dict)
    answers: int = 0
    failed: int = 0


def decode_cycle(
    site: ServedSite, timeout: float = TIMEOUT, at_maximum: Callable[[dict[str, dict]], None] | None = None
) -> DecodeCycle:
    """Load until decode is at its maximum (`at_maximum` is called then with its pods, which still exist), then idle
    until it is back at its minimum."""
    (first,) = live_pods(site, "decode")
    cycle = DecodeCycle(first)
    started = time.monotonic()
    with Load(site) as load:
        site.wait_for("the HPA to scale decode above 1 under load", lambda: replicas(site) > 1, timeout)
        cycle.scaled_up = time.monotonic() - started
        try:
            site.wait_for("a new decode pod answering", lambda: any(p != first for p in dict(load.answered)), timeout)
        except AssertionError as err:  # once seen in a full run and not again: what the router did, for the next
            answered = dict(load.answered)
            raise AssertionError(
                f"{err}\nanswered by {answered} of {sorted(live_pods(site, 'decode'))}\n{site.epp_account()}"
            ) from None
        cycle.new_pod_serving = time.monotonic() - started
        maximum = AUTOSCALING["maxReplicas"]
        site.wait_for("decode at its maximum", lambda: len(live_pods(site, "decode")) == maximum, timeout)
        cycle.at_maximum = time.monotonic() - started

        def all_running() -> dict[str, dict]:
            running = running_pods(site, "decode")
            return running if len(running) == maximum else {}

        cycle.pods_at_maximum = site.wait_for("decode's pods at its maximum Running", all_running, timeout)
        cycle.prefill_at_maximum = replicas(site, PREFILL)
        if at_maximum is not None:
            at_maximum(cycle.pods_at_maximum)
    cycle.answers, cycle.failed = sum(load.answered.values()), load.failed
    stopped = time.monotonic()
    site.wait_for("decode back to minReplicas once idle", lambda: replicas(site) == 1, timeout)
    cycle.scaled_down = time.monotonic() - stopped
    return cycle


def wait_until_active(site: ServedSite, timeout: float = TIMEOUT) -> None:
    """Wait for KEDA's HPAs of both roles to read their metrics (the site's wait_for fails with its log)."""
    for deployment in (PREFILL, DECODE):
        site.wait_for(f"KEDA's HPA for {deployment}, active", functools.partial(hpa_active, site, deployment), timeout)
