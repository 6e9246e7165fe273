"""The signals a role can scale on, and one role's autoscaling worked out: bounds per Deployment, the PromQL query
of its KEDA trigger, the signal's source and the version fact that says the pinned image serves it.

Pure: the gate judges these values, the objects render them into a ScaledObject, `plan` prints them, the pack reads
the query back out of a ScaledObject (`signal_of_query`). KEDA's prometheus scaler turns the query's one number into
the HPA's external metric with metricType AverageValue, so the HPA runs desired = ceil(query / target): a query is
the role's (or pool's) total, a target is the value per pod (keda v2.18.1 pkg/scalers/prometheus_scaler.go; HPA
replica_calculator.go GetExternalMetricReplicas).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from core import formats, rules
from core.config import Autoscaling, StackConfig
from core.versions import image_version
from core.versions import router as router_versions

KEDA_API_VERSION = "keda.sh/v1alpha1"
KEDA_VERSION = "v2.18.1"  # the kedacore/keda release whose ScaledObject CRD is in crds/
PROMETHEUS_PORT = 9090
# The HPA changes the count only when the signal per pod is off the target by more than this share (the
# kube-controller-manager's --horizontal-pod-autoscaler-tolerance, default 0.1; k8s.io/kubernetes v1.35
# pkg/controller/podautoscaler/replica_calculator.go GetExternalPerPodMetricReplicas: no change while
# |1 - usage / (target x pods)| <= tolerance). The render sets no per-HPA tolerance.
HPA_TOLERANCE = 0.1
# Prometheus computes rates over this window: four scrapes at the default 30 s scrape interval, and no longer.
RATE_WINDOW = "2m"
# How far back an instant vector selector (the engine signals' queries) finds a sample: Prometheus's
# --query.lookback-delta, default 5m (prometheus/prometheus v3 cmd/prometheus/main.go; promql/engine.go
# defaultLookbackDelta). A series scraped less often than this is missing from the query part of the time.
LOOKBACK_DELTA = "5m"


@dataclasses.dataclass(frozen=True)
class Signal:
    """One value of `autoscaling.metric`."""

    name: str
    series: str  # the Prometheus series (for the EPP's counter: of the v0.10 generation; see series_for)
    source: str  # "engine" (the role's own pods) or "epp" (the router)
    roles: tuple[str, ...]  # the roles it can scale
    default_target: float
    unit: str  # what one unit of target is, per pod
    meaning: dict[str, str]  # what it says about each role it can scale
    unit_name: str  # the unit in a word: fraction, requests, decisions per second
    maximum: float | None  # the most one pod's value can be (a fraction: 1); None: no bound

    def highest_target(self, tolerance: float = HPA_TOLERANCE) -> float | None:
        """The target must stay below this for the role to ever scale up: the pods' average has to exceed the target
        by the HPA's tolerance, and it cannot exceed `maximum`. None: any target above 0."""
        return None if self.maximum is None else self.maximum / (1 + tolerance)


SIGNALS: dict[str, Signal] = {
    s.name: s
    for s in (
        Signal(
            "engineQueue",
            "vllm:num_requests_waiting",
            "engine",
            ("prefill", "decode"),
            2.0,
            "requests waiting in the engine's scheduler, per pod",
            {
                "prefill": "prompts waiting for a prefill engine: the work the decider sends prefill outgrows the pods",
                "decode": "requests (their KV already pulled) waiting for a decode slot: maxNumSeqs is exhausted",
            },
            "requests",
            None,
        ),
        Signal(
            "kvCacheUsage",
            "vllm:kv_cache_usage_perc",
            "engine",
            ("prefill", "decode"),
            0.8,
            "share of the KV cache in use (0-1), averaged over a pod's DP ranks",
            {
                "prefill": "prefill KV blocks held until decode pulls them: a sign of slow pulls more than of load",
                "decode": "the running sequences' KV: near 1 the engine preempts, so more pods are needed before it",
            },
            "fraction",
            1.0,
        ),
        Signal(
            "pdDecisionRate",
            "llm_d_epp_disagg_decision_total",
            "epp",
            ("prefill",),
            1.0,
            "requests per second the EPP sends through remote prefill (decision_type prefill-decode), per pod",
            {
                "prefill": "the P/D decider's prefill-decode picks per second: the prefill work as the router creates "
                "it, before any engine queues"
            },
            "decisions per second",
            None,
        ),
    )
}
DEFAULT_METRIC = {"prefill": "engineQueue", "decode": "kvCacheUsage"}
DECISION_TYPE = "prefill-decode"  # the decision_type label of a remote prefill (disagg/metrics.go, both generations)


def per_pool(min_replicas: int, max_replicas: int, groups: int) -> tuple[int, int]:
    """(min, max) of each node group's Deployment: the role's bounds split evenly (the gate asks that they are)."""
    return min_replicas // groups, max_replicas // groups


@dataclasses.dataclass(frozen=True)
class Scaling:
    """One autoscaled role, its defaults resolved; the bounds are the role's, over all its node groups."""

    role: str
    min_replicas: int
    max_replicas: int
    metric: str
    target: float
    scale_up_stabilization_seconds: int
    scale_down_stabilization_seconds: int
    polling_interval_seconds: int

    @property
    def signal(self) -> Signal:
        return SIGNALS[self.metric]

    def per_pool(self, groups: int) -> tuple[int, int]:
        return per_pool(self.min_replicas, self.max_replicas, groups)

    def output(self) -> dict[str, Any]:
        return {
            "minReplicas": self.min_replicas,
            "maxReplicas": self.max_replicas,
            "metric": self.metric,
            "target": self.target,
        }


def scaling(role: str, settings: Autoscaling | None) -> Scaling | None:
    """The role's autoscaling with the defaults of its role and signal; None for fixed replicas."""
    if settings is None:
        return None
    metric = settings.metric or DEFAULT_METRIC[role]
    return Scaling(
        role,
        settings.min_replicas,
        settings.max_replicas,
        metric,
        settings.target if settings.target is not None else SIGNALS[metric].default_target,
        settings.scale_up_stabilization_seconds,
        settings.scale_down_stabilization_seconds,
        settings.polling_interval_seconds,
    )


def role_scalings(cfg: StackConfig) -> dict[str, Scaling]:
    """Every autoscaled role that runs pods, by config key."""
    found = {name: scaling(name, role.autoscaling) for name, role in cfg.engine_roles()}
    return {name: value for name, value in found.items() if value is not None}


def prometheus_address(cfg: StackConfig) -> str:
    """Where the triggers read: `observability.prometheusAddress`, else the Prometheus Operator's governing Service
    `prometheus-operated` in the namespace the NetworkPolicies let scrape (security.monitoringNamespace)."""
    return (
        cfg.observability.prometheus_address
        or f"http://prometheus-operated.{cfg.security.monitoring_namespace}.svc:{PROMETHEUS_PORT}"
    )


def series_for(signal: Signal, epp_image: str) -> str | None:
    """The series the pinned images serve for a signal; None when they serve none: an EPP pin of no known generation
    has no known decision counter."""
    if signal.source == "engine":
        return signal.series
    generation = router_versions.generation(image_version(epp_image))
    return generation.decision_metric if generation else None


def pool_pods(pool: str) -> str:
    """A regex of the pods of one Deployment (`<pool>-<replicaset hash>-<suffix>`; PromQL anchors it), which is not
    also a pod of `<pool>-g0`: the scrape's own `pod` label, so the query needs no relabelling in the PodMonitors. A
    pool name is a DNS label (`[a-z0-9-]`), nothing in it to escape (a PromQL string refuses `\\-`)."""
    return f"{pool}-[a-z0-9]+-[a-z0-9]+"


def query(signal: Signal, *, series: str, namespace: str, pool: str, groups: int) -> str:
    """The trigger's query: the pool's total of the signal (0 when nothing is scraped yet: `or vector(0)`, one
    element, as KEDA's prometheus scaler needs). Its lookback (`query_lookback`): the EPP's counter as a rate over
    RATE_WINDOW (two samples in it), the engine signals as instant selectors (one sample within LOOKBACK_DELTA); the
    scrape interval must fit it (core.rules.scraped_in_lookback)."""
    if signal.source == "epp":
        # One EPP picks over every node group's prefill pods: each pool's share of the decisions.
        total = f'sum(rate({series}{{namespace="{namespace}",decision_type="{DECISION_TYPE}"}}[{RATE_WINDOW}]))'
        return f"({total} / {groups}) or vector(0)" if groups > 1 else f"{total} or vector(0)"
    selector = f'{{namespace="{namespace}",pod=~"{pool_pods(pool)}"}}'
    if signal.name == "kvCacheUsage":
        # Each DP rank reports its own share: averaged per pod, so the target is per pod whatever the ranks.
        return f"sum(avg by (pod) ({series}{selector})) or vector(0)"
    return f"sum({series}{selector}) or vector(0)"


@dataclasses.dataclass(frozen=True)
class Lookback:
    """How far back a trigger's query reads its series and how many samples it needs there: an instant selector one
    sample within Prometheus's lookback delta, a rate() two within its range."""

    window: str  # a Prometheus duration
    samples: int
    how: str  # in words, for messages

    @property
    def window_ms(self) -> int:
        ms = formats.prometheus_duration_ms(self.window)
        assert ms is not None  # the windows below are durations
        return ms


_RANGE = re.compile(r"\[([0-9]+(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*)\]")


def query_lookback(text: str) -> Lookback:
    """The lookback of a query as `query` builds it (and as the pack reads one back): a range selector `[2m]` (a rate:
    two samples in the range; the shortest when there are several), else an instant selector (one sample within
    LOOKBACK_DELTA)."""
    windows = [w for w in _RANGE.findall(text) if formats.prometheus_duration_ms(w) is not None]
    if windows:
        window = min(windows, key=lambda w: formats.prometheus_duration_ms(w) or 0)
        return Lookback(window, 2, f"its rate() needs two samples within its [{window}] range")
    return Lookback(
        LOOKBACK_DELTA,
        1,
        f"an instant query finds a sample only {LOOKBACK_DELTA} back (Prometheus's --query.lookback-delta)",
    )


def signal_lookback(signal: Signal) -> Lookback:
    """The lookback of the query `query` builds for a signal."""
    return query_lookback(query(signal, series="series", namespace="namespace", pool="pool", groups=1))


def signal_of_query(text: str) -> tuple[Signal, str] | None:
    """(the signal, the series) a trigger's query reads, or None for a series no signal has: the pack's reader."""
    for signal in SIGNALS.values():
        names = (
            [signal.series] if signal.source == "engine" else [g.decision_metric for g in router_versions.GENERATIONS]
        )
        for name in names:
            if re.search(rf"(?<![A-Za-z0-9_:]){re.escape(name)}(?![A-Za-z0-9_:])", text):
                return signal, name
    return None


def decider_feeds_prefill(decider: str, non_cached_tokens: int) -> bool:
    """Whether the P/D decider sends any request through remote prefill: always-disagg all of them (a P/D ratio of 1
    request to 1), prefix-based those with more than nonCachedTokens tokens not cached (0 disables it)."""
    return decider == "always-disagg" or rules.decider_fires(non_cached_tokens)
