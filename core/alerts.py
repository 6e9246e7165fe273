"""The stack's alerts: what an operator of this stack is woken or warned for, as Prometheus alerting rules, worked out
once from the config and the version facts (the series each pinned program serves: core/versions).

Pure: `objects/monitoring.py` renders them into a PrometheusRule, the gate judges the series they read against the
pinned images (core/gate/alerts.py), the pack reads them back out of any PrometheusRule (`series_in`, `served_as`).
docs/operations.md has a runbook per alert, under a heading of the alert's name (its `runbook_url`).

What they read, and who serves it:
- the engines' vLLM metrics, `core/versions/engine.py` METRICS (read in the vLLM that vllm-rbln 0.12.0 pins);
- the EPP's counters of its generation, `core/versions/router.py` GENERATIONS (P/D decisions, requests, errors);
- Prometheus's own `up` of each target the PodMonitors make;
- kube-state-metrics' pod readiness and container restarts (the stack assumes it, as the Kubernetes mixins do: a
  pod that is not Ready serves no metrics to tell it by).
A role's pods are told by the scrape's `pod` label, as the autoscalers' triggers tell them (core/autoscaling.py
`pool_pods`), so a rule needs no relabelling in the PodMonitors.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from core import autoscaling, routing
from core.config import StackConfig
from core.labels import epp_name, pool_names
from core.versions import engine as engine_versions
from core.versions import image_version, missing_features
from core.versions import router as router_versions

API_VERSION = "monitoring.coreos.com/v1"  # PrometheusRule, prometheus-operator v0.93.0 (its CRD is in crds/)
CRITICAL, WARNING = "critical", "warning"  # critical: users are not served; warning: a person should look today
EPP_ROLE = "epp"
ROLES = ("prefill", "decode", EPP_ROLE)  # the `role` label of an alert: the pods it watches

# Who serves a series an alert reads.
ENGINE, EPP, KUBE_STATE, PROMETHEUS = "engine", "epp", "kube-state-metrics", "prometheus"
# kube-state-metrics v2 (kube-state-metrics/docs/metrics/workload/pod-metrics.md): a pod's Ready condition (one
# series per condition value, 1 on the current one) and a container's restarts.
POD_READY = "kube_pod_status_ready"
RESTARTS = "kube_pod_container_status_restarts_total"
UP = "up"
# The EPP's counters, by the attribute of core/versions/router.py Generation that names each in a generation.
EPP_COUNTERS = ("decision_metric", "request_metric", "request_error_metric")


@dataclasses.dataclass(frozen=True)
class Read:
    """One series an alert reads, and who serves it."""

    series: str
    source: str  # ENGINE, EPP, KUBE_STATE or PROMETHEUS


@dataclasses.dataclass(frozen=True)
class Alert:
    """One alerting rule of the stack."""

    name: str
    role: str  # the pods it watches (ROLES)
    severity: str
    expr: str
    for_: str  # a Prometheus duration; "" fires at once (the expression holds its own window)
    summary: str
    description: str
    reads: tuple[Read, ...]

    def rule(self, namespace: str, runbook_url: str) -> dict[str, Any]:
        """The rule as Prometheus reads it (a PrometheusRule's spec.groups[].rules[])."""
        return {
            "alert": self.name,
            "expr": self.expr,
            **({"for": self.for_} if self.for_ else {}),
            "labels": {"severity": self.severity, "role": self.role, "namespace": namespace},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": runbook_link(runbook_url, self.name),
            },
        }


def runbook_link(base: str, alert: str) -> str:
    """Where an alert's runbook is: its heading in docs/operations.md (GitHub's anchor of `### <alert>`)."""
    return f"{base}#{alert.lower()}"


def pods_regex(pools: list[str]) -> str:
    """The pods of these Deployments, as a `pod=~` regex (PromQL anchors it)."""
    return "|".join(autoscaling.pool_pods(pool) for pool in pools)


def group_name(stack_name: str) -> str:
    return f"rebel100-{stack_name}"


@dataclasses.dataclass(frozen=True)
class _Site:
    """What the expressions of one stack select."""

    namespace: str
    pods: dict[str, str]  # role -> pod regex

    def of(self, role: str, **more: str) -> str:
        matchers = [f'namespace="{self.namespace}"', f'pod=~"{self.pods[role]}"']
        matchers += [f'{name}="{value}"' for name, value in more.items()]
        return "{" + ",".join(matchers) + "}"

    def ready(self, role: str) -> str:
        """The role's Ready pods (0 when none, or none exist)."""
        return f"(sum({POD_READY}{self.of(role, condition='true')}) or on() vector(0))"


def engine_queue_target(cfg: StackConfig, role: str) -> float:
    """Waiting requests per pod above which a role at its maximum alerts: `observability.alerts.engineQueuePerPod`,
    else the target of the role's engineQueue autoscaling, else that signal's default target."""
    alerts = cfg.observability.alerts
    if alerts.engine_queue_per_pod is not None:
        return alerts.engine_queue_per_pod
    scaling = autoscaling.role_scalings(cfg).get(role)
    if scaling is not None and scaling.metric == "engineQueue":
        return scaling.target
    return autoscaling.SIGNALS["engineQueue"].default_target


def role_maximum(cfg: StackConfig, role: str) -> int:
    """The most pods a role runs: its autoscaling's maxReplicas, else its replicas."""
    scaling = autoscaling.role_scalings(cfg).get(role)
    return scaling.max_replicas if scaling is not None else getattr(cfg, role).replicas


def _number(value: float) -> str:
    return f"{value:g}"


def alerts(cfg: StackConfig) -> list[Alert]:
    """The stack's alerts (whether they are rendered is `rendered`'s). The EPP's counters are the ones the pinned EPP's
    generation names (the newest generation's for a pin of none; the gate refuses that pin's alerts)."""
    settings = cfg.observability.alerts
    engines = [name for name, _ in cfg.engine_roles()]
    pools = {role: [pool for _, pool in pool_names(cfg.name, role, cfg.placement.groups)] for role in engines}
    site = _Site(
        cfg.namespace,
        {**{role: pods_regex(names) for role, names in pools.items()}, "epp": pods_regex([epp_name(cfg.name)])},
    )
    generation = router_versions.generation_for_pin(image_version(cfg.router.image))
    ns = cfg.namespace
    found = [
        Alert(
            "Rebel100EppUnavailable",
            "epp",
            CRITICAL,
            f"{site.ready('epp')} < 1",
            settings.epp_unavailable_for,
            "No EPP pod is Ready: the gateway cannot route.",
            f"No pod of the EPP ({epp_name(cfg.name)}) in {ns} is Ready: it is down, crash-looping, or (with leader "
            f"election) none holds the lease. {routing.without_epp(cfg.router.failure_mode)}",
            (Read(POD_READY, KUBE_STATE),),
        ),
        Alert(
            "Rebel100NoReadyDecode",
            "decode",
            CRITICAL,
            f"{site.ready('decode')} < 1",
            settings.no_ready_decode_for,
            "No decode pod is Ready: every request is refused.",
            f"No decode pod of {cfg.name} in {ns} is Ready: the EPP finds no decode endpoint and answers every request "
            f"with an error (429 while prefill pods remain, 503 with no pod at all).",
            (Read(POD_READY, KUBE_STATE),),
        ),
    ]
    if "prefill" in engines:
        found.append(
            Alert(
                "Rebel100NoReadyPrefill",
                "prefill",
                WARNING,
                f"{site.ready('prefill')} < 1",
                settings.no_ready_prefill_for,
                "No prefill pod is Ready: P/D has fallen back to decode-only.",
                f"No prefill pod of {cfg.name} in {ns} is Ready: the EPP serves every request decode-only, so decode "
                f"does the prefill work (longer time to first token, fewer decode slots).",
                (Read(POD_READY, KUBE_STATE),),
            )
        )
        if autoscaling.decider_feeds_prefill(cfg.router.decider, cfg.router.non_cached_tokens):
            decisions = generation.decision_metric
            window = autoscaling.RATE_WINDOW
            pd_rate = (
                f'sum(rate({decisions}{{namespace="{ns}",decision_type="{autoscaling.DECISION_TYPE}"}}[{window}]))'
            )
            all_rate = f'sum(rate({decisions}{{namespace="{ns}"}}[{window}]))'
            found.append(
                Alert(
                    "Rebel100PdDecisionsStopped",
                    "prefill",
                    WARNING,
                    f"({pd_rate} or on() vector(0)) == 0\n"
                    f"and on() {all_rate} > {_number(settings.pd_decisions_min_rate)}\n"
                    f"and on() {site.ready('prefill')} > 0",
                    settings.pd_decisions_stopped_for,
                    "The EPP decides, prefill is Ready, and no request goes through prefill: P/D is silently off.",
                    f"The EPP of {cfg.name} in {ns} takes decisions ({decisions}) but none of them "
                    f"{autoscaling.DECISION_TYPE} while prefill pods are Ready and the {cfg.router.decider} decider "
                    f"should send requests through them: every request is served decode-only.",
                    (Read(decisions, EPP), Read(POD_READY, KUBE_STATE)),
                )
            )
    waiting, kv = autoscaling.SIGNALS["engineQueue"].series, autoscaling.SIGNALS["kvCacheUsage"].series
    for role in engines:
        pods = f"count(count by (pod) ({waiting}{site.of(role)}))"
        target, maximum = engine_queue_target(cfg, role), role_maximum(cfg, role)
        found.append(
            Alert(
                "Rebel100EngineQueueAtMaximum",
                role,
                WARNING,
                f"(sum({waiting}{site.of(role)}) / {pods}) > {_number(target)}\nand on() {pods} >= {maximum}",
                settings.engine_queue_for,
                f"The {role} engines queue more than {_number(target)} requests per pod with the role at its "
                f"maximum of {maximum} pods.",
                f"{{{{ $value }}}} requests wait per {role} pod of {cfg.name} in {ns} (above {_number(target)}) and "
                f"the role runs its maximum of {maximum} pods: the load has outgrown what it may scale to.",
                (Read(waiting, ENGINE),),
            )
        )
        found.append(
            Alert(
                "Rebel100KvCacheNearFull",
                role,
                WARNING,
                f"max by (pod) ({kv}{site.of(role)}) > {_number(settings.kv_cache_usage)}",
                settings.kv_cache_usage_for,
                f"A {role} engine's KV cache stays above {_number(settings.kv_cache_usage)}.",
                f"The KV cache of {{{{ $labels.pod }}}} ({role}, {ns}) is {{{{ $value | humanizePercentage }}}} full"
                + (
                    ": decode preempts running sequences and stalls their tokens."
                    if role == "decode"
                    else ": prefill holds KV blocks decode has not pulled (slow or failing NIXL pulls)."
                ),
                (Read(kv, ENGINE),),
            )
        )
    for role in [*engines, "epp"]:
        found.append(
            Alert(
                "Rebel100PodRestarting",
                role,
                WARNING,
                f"changes({RESTARTS}{site.of(role)}[{settings.restarts_window}]) >= {settings.restarts}",
                "",
                f"A {role} container restarted {settings.restarts} times or more within {settings.restarts_window}.",
                f"Container {{{{ $labels.container }}}} of {{{{ $labels.pod }}}} ({role}, {ns}) restarted "
                f"{{{{ $value }}}} times within {settings.restarts_window}.",
                (Read(RESTARTS, KUBE_STATE),),
            )
        )
        found.append(
            Alert(
                "Rebel100ScrapeTargetDown",
                role,
                WARNING,
                f"{UP}{site.of(role)} == 0\n"
                f'and on(namespace, pod) ({POD_READY}{{namespace="{ns}",condition="true"}} == 1)',
                settings.scrape_down_for,
                f"Prometheus cannot read the metrics of a Ready {role} pod.",
                f"{{{{ $labels.pod }}}} ({role}, {ns}) is Ready but its /metrics at {{{{ $labels.instance }}}} do not "
                f"answer Prometheus: the alerts and the autoscaler are blind to it.",
                (Read(UP, PROMETHEUS), Read(POD_READY, KUBE_STATE)),
            )
        )
    requests, errors = generation.request_metric, generation.request_error_metric
    client = "|".join(generation.client_error_codes)
    failed = f'sum(rate({errors}{{namespace="{ns}",error_code!~"{client}"}}[{autoscaling.RATE_WINDOW}]))'
    served = f'(sum(rate({requests}{{namespace="{ns}"}}[{autoscaling.RATE_WINDOW}])) or on() vector(0))'
    found.append(
        Alert(
            "Rebel100EppRequestErrors",
            "epp",
            WARNING,
            f"{failed} / ({failed} + {served}) > {_number(settings.epp_error_ratio)}\n"
            f"unless on() {site.ready('decode')} < 1",
            settings.epp_error_ratio_for,
            f"More than {_number(settings.epp_error_ratio)} of the requests the EPP sees fail.",
            f"{{{{ $value | humanizePercentage }}}} of the requests the EPP of {cfg.name} in {ns} handles fail for "
            f"a reason of the stack's (errors other than the client's {', '.join(generation.client_error_codes)}).",
            (Read(errors, EPP), Read(requests, EPP), Read(POD_READY, KUBE_STATE)),
        )
    )
    return found


def rendered(cfg: StackConfig) -> bool:
    """The stack renders its alerts: they are on and the PodMonitors make the targets they read."""
    return cfg.observability.alerts.enabled and cfg.observability.pod_monitors


def rule_groups(stack_name: str, namespace: str, found: list[Alert], runbook_url: str) -> list[dict[str, Any]]:
    """The PrometheusRule's spec.groups: one group of every alert."""
    return [{"name": group_name(stack_name), "rules": [a.rule(namespace, runbook_url) for a in found]}]


def rule_name(stack_name: str) -> str:
    """The stack's PrometheusRule."""
    return f"{stack_name}-alerts"


# --- reading alerts back (the pack) and judging what they read ----------------------------------------------------


def _epp_kind(series: str) -> str | None:
    return next(
        (kind for g in router_versions.GENERATIONS for kind in EPP_COUNTERS if getattr(g, kind) == series), None
    )


def known_series() -> list[str]:
    """Every series of the stack's own programs an alert may read: the engines' listed metrics and every generation's
    EPP counters."""
    names = list(engine_versions.METRICS)
    names += [getattr(g, kind) for g in router_versions.GENERATIONS for kind in EPP_COUNTERS]
    return list(dict.fromkeys(names))


def series_in(expr: str) -> list[str]:
    """The series of `known_series` a PromQL expression reads."""
    return [n for n in known_series() if re.search(rf"(?<![A-Za-z0-9_:]){re.escape(n)}(?![A-Za-z0-9_:])", expr)]


def source_of(series: str) -> str:
    """Who serves one of `known_series`: ENGINE or EPP."""
    return EPP if _epp_kind(series) else ENGINE


def served_as(series: str, image: str) -> str | None:
    """The name under which a pinned image serves a series an alert reads (an EPP counter is named per generation);
    None when it is not known to: an EPP of no known generation, an engine older than the release the metric was read
    in. An image of another program, or whose tag is no version (left to image hygiene), is not judged (the series as
    it is)."""
    kind, version = _epp_kind(series), image_version(image)
    if version is None:
        return series
    if kind is not None:
        generation = router_versions.generation(version)
        return getattr(generation, kind) if generation else None
    feature = engine_versions.METRICS.get(series)
    if feature is None or not engine_versions.is_engine_image(image):
        return series
    return None if missing_features(version, [feature]) else series
