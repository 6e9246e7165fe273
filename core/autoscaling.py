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

from core import rules
from core.config import Autoscaling, StackConfig
from core.versions import image_version
from core.versions import router as router_versions

KEDA_API_VERSION = "keda.sh/v1alpha1"
KEDA_VERSION = "v2.18.1"  # the kedacore/keda release whose ScaledObject CRD is in crds/
PROMETHEUS_PORT = 9090
# Prometheus computes rates over this window: four scrapes at the default 30 s scrape interval, and no longer.
RATE_WINDOW = "2m"


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
    element, as KEDA's prometheus scaler needs)."""
    if signal.source == "epp":
        # One EPP picks over every node group's prefill pods: each pool's share of the decisions.
        total = f'sum(rate({series}{{namespace="{namespace}",decision_type="{DECISION_TYPE}"}}[{RATE_WINDOW}]))'
        return f"({total} / {groups}) or vector(0)" if groups > 1 else f"{total} or vector(0)"
    selector = f'{{namespace="{namespace}",pod=~"{pool_pods(pool)}"}}'
    if signal.name == "kvCacheUsage":
        # Each DP rank reports its own share: averaged per pod, so the target is per pod whatever the ranks.
        return f"sum(avg by (pod) ({series}{selector})) or vector(0)"
    return f"sum({series}{selector}) or vector(0)"


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
