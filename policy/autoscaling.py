"""Autoscaled engines: the KEDA ScaledObjects of any manifest that scale a prefill or decode workload, judged with the
gate's rules (core.rules, core.autoscaling).

A ScaledObject names its workload in spec.scaleTargetRef (a Deployment unless it says otherwise) in its own
namespace; the workload's pod template says the role (llm-d.ai/role, or a routing sidecar: decode). ScaledObjects of
other workloads are not judged here. Whether the workload leaves spec.replicas to the autoscaler is not judged: under
Pulumi the pack reads a Deployment as the API server's dry run returns it, with the defaulted spec.replicas 1 (the
render leaves it out, objects/pod.py; tests/cluster/test_autoscaling.py shows Pulumi owning no count). KEDA's own
defaults apply to what a ScaledObject leaves out: minReplicaCount 0, maxReplicaCount 100 (keda v2.18.1
apis/keda/v1alpha1/scaledobject_types.go: GetHPAMinReplicas, GetHPAMaxReplicas).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

from core import autoscaling, formats, rules
from core.selectors import label_selector_matches
from core.versions import engine as engine_versions
from core.versions import image_version
from core.versions import router as router_versions
from policy.facts import Facts
from policy.read.devices import claimed_npus, is_rebel100
from policy.read.engines import template_engines
from policy.read.objects import Finding, find, namespace_of, of_kind, resource_id
from policy.read.pods import PodTemplate, epp_image, pod_templates, replicas
from policy.read.pool import epp_configs
from policy.wiring import ALWAYS_DECIDERS, THRESHOLD_DECIDERS

ENGINE_ROLES = ("prefill", "decode")
KEDA_DEFAULT_MIN, KEDA_DEFAULT_MAX = 0, 100


@dataclasses.dataclass(frozen=True)
class Scaled:
    """One ScaledObject and the engine workload it scales."""

    scaled_object: dict
    workload: dict
    template: PodTemplate

    @property
    def resource(self) -> str:
        return resource_id(self.scaled_object)

    @property
    def role(self) -> str:
        return self.template.role or ""

    @property
    def spec(self) -> dict:
        return self.scaled_object.get("spec") or {}

    @property
    def min_replicas(self) -> int:
        value = self.spec.get("minReplicaCount")
        return KEDA_DEFAULT_MIN if value is None else int(value)

    @property
    def max_replicas(self) -> int:
        value = self.spec.get("maxReplicaCount")
        return KEDA_DEFAULT_MAX if value is None else int(value)

    def triggers(self) -> list[dict]:
        return [t for t in self.spec.get("triggers") or [] if isinstance(t, dict)]


def scaled_engines(manifests: list[dict]) -> Iterator[Scaled]:
    """Every ScaledObject whose target is a prefill or decode workload among the manifests."""
    for scaled_object in of_kind(manifests, "ScaledObject"):
        target = (scaled_object.get("spec") or {}).get("scaleTargetRef") or {}
        workload = find(
            manifests, str(target.get("kind") or "Deployment"), namespace_of(scaled_object), str(target.get("name", ""))
        )
        if workload is None:
            continue
        template = next(pod_templates([workload]), None)
        if template is not None and template.role in ENGINE_ROLES:
            yield Scaled(scaled_object, workload, template)


def autoscaling_bounds(manifests: list[dict], facts: Facts) -> list[Finding]:
    """At least one pod of an engine role, and bounds that are not inverted."""
    found = []
    for scaled in scaled_engines(manifests):
        problem = rules.autoscaling_bounds(
            scaled.role,
            scaled.min_replicas,
            scaled.max_replicas,
            min_name="spec.minReplicaCount",
            max_name="spec.maxReplicaCount",
        )
        if problem:
            found.append(Finding(scaled.resource, problem))
    return found


def _devices(template: PodTemplate, manifests: list[dict], facts: Facts) -> int:
    claimed = claimed_npus(template, manifests, facts.npu_device_class).count
    return max(claimed, sum(e.devices or 0 for e in template_engines(template)))


def _spread(template: PodTemplate) -> bool:
    """Required pod anti-affinity on the hostname: one pod of the role per node."""
    terms = ((template.spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    return any(term.get("topologyKey") == "kubernetes.io/hostname" for term in terms)


def autoscaling_fits_site(manifests: list[dict], facts: Facts) -> list[Finding]:
    """At every autoscaled engine's maximum (and every other Rebel100 engine at its own count or maximum), the NPUs
    fit the site's nodes x npusPerNode, one pod per node for a spread role. Skipped when the site's size is not
    given (`nodes` 0)."""
    if facts.nodes <= 0:
        return []
    scaled = list(scaled_engines(manifests))
    maxima = {resource_id(s.workload): s.max_replicas for s in scaled}
    pods = {}
    for template in pod_templates(manifests):
        if is_rebel100(template, manifests, facts.npu_device_class):
            pods[template.resource] = (
                _devices(template, manifests, facts),
                maxima.get(template.resource, replicas(template.owner)),
            )
    total = sum(devices * count for devices, count in pods.values())
    found = []
    for one in scaled:
        if one.template.resource not in pods:
            continue
        devices, count = pods[one.template.resource]
        problem = rules.autoscaling_fits_site(
            one.role,
            one.max_replicas,
            devices,
            total - devices * count,
            facts.nodes,
            facts.npus_per_node,
            _spread(one.template),
            max_name="spec.maxReplicaCount",
            nodes_name="nodes",
            spread_name="required pod anti-affinity on kubernetes.io/hostname",
        )
        if problem:
            found.append(Finding(one.resource, problem))
    return found


def autoscaling_rollout(manifests: list[dict], facts: Facts) -> list[Finding]:
    """An autoscaled engine Deployment rolls one pod at a time (RollingUpdate, the API server's default)."""
    found = []
    for scaled in scaled_engines(manifests):
        if scaled.workload.get("kind") != "Deployment":
            continue
        strategy = str(((scaled.workload.get("spec") or {}).get("strategy") or {}).get("type") or "RollingUpdate")
        problem = rules.autoscaling_rollout(scaled.role, strategy, strategy_name="spec.strategy.type")
        if problem:
            found.append(Finding(resource_id(scaled.workload), f"scaled by {scaled.resource}: {problem}"))
    return found


def _image_pods(manifests: list[dict], namespace: str, image: str | None) -> PodTemplate | None:
    """The pod template of the namespace that runs `image` (the EPP's, whose counter a P/D decision rate reads)."""
    return next(
        (
            t
            for t in pod_templates(manifests)
            if t.namespace == namespace and image and any(c.get("image") == image for c in t.containers())
        ),
        None,
    )


def _decider_feeds(manifests: list[dict], namespace: str) -> bool:
    """The P/D decider of the namespace's EndpointPickerConfigs takes prefill-decode decisions: False only when every
    decider they declare is a threshold decider that never fires (nonCachedTokens 0, core.rules.decider_fires), as the
    gate judges router.nonCachedTokens; no decider found: not judged here (router-pd-profiles names it)."""
    deciders = [
        plugin
        for config_map, _key, config in epp_configs(manifests)
        if namespace_of(config_map) == namespace
        for plugin in config.get("plugins") or []
        if isinstance(plugin, dict) and plugin.get("type") in THRESHOLD_DECIDERS + ALWAYS_DECIDERS
    ]
    return not deciders or any(
        plugin.get("type") in ALWAYS_DECIDERS
        or rules.decider_fires((plugin.get("parameters") or {}).get("nonCachedTokens", 0))
        for plugin in deciders
    )


def _scraped(manifests: list[dict], template: PodTemplate | None) -> bool:
    """A PodMonitor of the manifests selects the pods; with no PodMonitor among them they may be scraped some other
    way, which a manifest does not show (not judged)."""
    monitors = of_kind(manifests, "PodMonitor")
    if not monitors or template is None:
        return True
    return any(label_selector_matches((m.get("spec") or {}).get("selector") or {}, template.labels) for m in monitors)


def autoscaling_signal(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Each prometheus trigger that reads one of the stack's signals (core.autoscaling.SIGNALS) reads one the role
    can scale on, that the pinned image serves under that name, and that a PodMonitor scrapes. Queries on other
    series are not judged."""
    found = []
    for scaled in scaled_engines(manifests):
        for index, trigger in enumerate(scaled.triggers()):
            if trigger.get("type") != "prometheus":
                continue
            query = str((trigger.get("metadata") or {}).get("query", ""))
            read = autoscaling.signal_of_query(query)
            if read is None:
                continue
            signal, series = read
            where = f"triggers[{index}] (query {series})"
            from_epp = signal.source == "epp"
            namespace = namespace_of(scaled.scaled_object)
            engine_image = next((str(e.container.get("image", "")) for e in template_engines(scaled.template)), "")
            image = epp_image(manifests, namespace) if from_epp else engine_image
            served: str | None = series
            if from_epp and image:
                generation = router_versions.generation(image_version(image))
                served = generation.decision_metric if generation else None
            epp = _image_pods(manifests, namespace, image) if from_epp else scaled.template
            problem = rules.autoscaling_signal(
                scaled.role,
                signal.name,
                signal.roles,
                scraped=_scraped(manifests, epp),
                series=served,
                decider_feeds=not from_epp or _decider_feeds(manifests, namespace),
                image=image or "the EPP",
                metric_name=where,
                fix_scrape="Add a PodMonitor that selects those pods.",
            )
            if problem is None and served is not None and served != series:
                problem = (
                    f"{where} reads {series}, but {image} serves the P/D decision counter as {served} (its "
                    f"router generation, core/versions/router.py): the query reads nothing and the role never "
                    f"scales up. Query {served}."
                )
            # The engine image must serve the series; the EPP's counter needs no such check: its generation (above)
            # covers only versions from the generation's first, which has the counter.
            if problem is None and not from_epp and engine_versions.is_engine_image(engine_image):
                problem = rules.image_has_features(
                    engine_image,
                    image_version(engine_image),
                    [engine_versions.METRICS[signal.series]],
                    image_name="engine image",
                )
            if problem:
                found.append(Finding(scaled.resource, problem))
    return found


def _signal_triggers(scaled: Scaled) -> Iterator[tuple[int, dict, autoscaling.Signal, str]]:
    """(index, trigger, signal, series) of each prometheus trigger that reads one of the stack's signals."""
    for index, trigger in enumerate(scaled.triggers()):
        if trigger.get("type") != "prometheus":
            continue
        read = autoscaling.signal_of_query(str((trigger.get("metadata") or {}).get("query", "")))
        if read is not None:
            yield index, trigger, *read


def _number(text: object) -> float | None:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def autoscaling_target(manifests: list[dict], facts: Facts) -> list[Finding]:
    """The threshold of each prometheus trigger on one of the stack's signals lies in that signal's range (a fraction
    low enough that the pods' average can exceed it by the HPA's tolerance). A threshold that is no number is KEDA's
    to refuse."""
    found = []
    for scaled in scaled_engines(manifests):
        for index, trigger, signal, series in _signal_triggers(scaled):
            target = _number((trigger.get("metadata") or {}).get("threshold"))
            if target is None:
                continue
            problem = rules.autoscaling_target(
                scaled.role,
                target,
                signal.unit_name,
                signal.maximum,
                autoscaling.HPA_TOLERANCE,
                target_name=f"triggers[{index}].metadata.threshold",
                signal_text=f"the {signal.name} signal its query reads ({series})",
                fix_signal="query the signal the threshold is a value of",
            )
            if problem:
                found.append(Finding(scaled.resource, problem))
    return found


def _scrape_intervals(manifests: list[dict], template: PodTemplate) -> list[tuple[str, int]]:
    """(where, milliseconds) of each PodMonitor endpoint that scrapes the pods and sets its interval (one left out is
    Prometheus's global scrape_interval, which no manifest shows: not judged)."""
    found = []
    for monitor in of_kind(manifests, "PodMonitor"):
        spec = monitor.get("spec") or {}
        if namespace_of(monitor) != template.namespace or not label_selector_matches(
            spec.get("selector") or {}, template.labels
        ):
            continue
        for index, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
            interval = endpoint.get("interval") if isinstance(endpoint, dict) else None
            ms = formats.prometheus_duration_ms(str(interval)) if interval is not None else None
            if ms is not None:
                found.append((f"{resource_id(monitor)} podMetricsEndpoints[{index}].interval", ms))
    return found


def autoscaling_scrape_interval(manifests: list[dict], facts: Facts) -> list[Finding]:
    """The PodMonitors that scrape the pods a trigger's signal comes from do so at least as often as its query needs:
    one sample per lookback delta for an instant selector, two per range for a rate (core.autoscaling.query_lookback,
    read off the query). The slowest endpoint is judged, once per trigger."""
    found = []
    for scaled in scaled_engines(manifests):
        namespace = namespace_of(scaled.scaled_object)
        for index, trigger, signal, series in _signal_triggers(scaled):
            pods = (
                _image_pods(manifests, namespace, epp_image(manifests, namespace))
                if signal.source == "epp"
                else (scaled.template)
            )
            intervals = _scrape_intervals(manifests, pods) if pods is not None else []
            if not intervals:
                continue
            where, slowest = max(intervals, key=lambda item: item[1])
            lookback = autoscaling.query_lookback(str((trigger.get("metadata") or {}).get("query", "")))
            problem = rules.scraped_in_lookback(
                scaled.role,
                f"{signal.name} ({series})",
                slowest,
                lookback.window_ms,
                lookback.samples,
                interval_name=where,
                lookback_how=lookback.how,
            )
            if problem:
                found.append(Finding(scaled.resource, f"triggers[{index}]: {problem}"))
    return found
