"""Availability: engines and the EPP guarded by a PodDisruptionBudget that lets drains proceed, the pods of one
engine role spread one per node, and engines and the EPP given the time to finish their requests when they stop.

A dev cluster may run a single node without either: `policy/config/dev.json` makes them advice (as their built-in
level is), `prod.json` makes them mandatory.
"""

from __future__ import annotations

import math
from typing import Any

from core import rules, sizing
from core.cmdline import go_duration_seconds, parse_flags
from core.labels import ROLE_LABEL
from core.selectors import label_selector_matches
from core.versions import image_version
from core.versions import router as router_versions
from policy.facts import Facts
from policy.read.engines import template_engines
from policy.read.flags import command_line
from policy.read.objects import Finding, name_list, namespace_of, of_kind, resource_id, show_labels
from policy.read.pods import (
    GRACE_FIELD,
    WORKLOAD_KINDS,
    PodTemplate,
    grace_period,
    pod_templates,
    pre_stop_seconds,
    replicas,
)
from policy.security import is_epp

# --- disruption-budget ---------------------------------------------------------------------


def _budget_selects(budget: dict, labels: dict) -> bool:
    """A PDB's selector: absent selects nothing; empty selects every pod (policy/v1) or none (v1beta1)."""
    selector = (budget.get("spec") or {}).get("selector")
    if selector is None or (not selector and budget.get("apiVersion") == "policy/v1beta1"):
        return False
    return label_selector_matches(selector, labels)


def _scaled(value: Any, pods: int) -> int | None:
    """An int-or-percent of `pods`, rounded up as the disruption controller does; None when unreadable."""
    text = str(value).strip()
    try:
        return math.ceil(float(text[:-1]) * pods / 100) if text.endswith("%") else int(text)
    except ValueError:
        return None


def disruption_budget(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Engines and the EPP selected by exactly one PDB of their namespace, and no PDB that blocks drains."""
    found = []
    budgets = of_kind(manifests, "PodDisruptionBudget")
    workloads = [t for t in pod_templates(manifests) if t.owner.get("kind") in WORKLOAD_KINDS]
    for template in workloads:
        engine = bool(template_engines(template))
        if replicas(template.owner) < 1 or not (engine or is_epp(template, manifests)):
            continue
        what = "engine" if engine else "EPP"
        matching = [b for b in budgets if namespace_of(b) == template.namespace and _budget_selects(b, template.labels)]
        if not matching:
            found.append(
                Finding(
                    template.resource,
                    f"no PodDisruptionBudget in namespace {template.namespace} selects this {what} pod template "
                    f"(labels {show_labels(template.labels)}, spec.replicas {replicas(template.owner)}): a node drain "
                    f"or upgrade may evict all its pods at once and take the {'role' if engine else 'router'} down. "
                    "Add a policy/v1 PodDisruptionBudget whose selector.matchLabels is a subset of these labels, with "
                    "maxUnavailable 1 (rebel100:rollout.maxUnavailable).",
                )
            )
        elif len(matching) > 1:
            found.append(
                Finding(
                    template.resource,
                    f"{len(matching)} PodDisruptionBudgets select this {what} pod template "
                    f"({', '.join(str(b['metadata'].get('name')) for b in matching)}): the eviction API refuses to "
                    "evict a pod more than one budget selects, so every drain of its nodes hangs. Keep one "
                    "PodDisruptionBudget per workload.",
                )
            )
    for budget in budgets:
        spec = budget.get("spec") or {}
        selected = [
            t for t in workloads if namespace_of(t.owner) == namespace_of(budget) and _budget_selects(budget, t.labels)
        ]
        pods = sum(replicas(t.owner) for t in selected)
        which = f"{name_list(t.resource for t in selected)}, {pods} pods" if selected else "no workload of the stack"
        if "maxUnavailable" in spec:
            allowed, field = _scaled(spec["maxUnavailable"], pods), f"spec.maxUnavailable {spec['maxUnavailable']}"
            blocks = allowed is not None and allowed <= 0
        elif "minAvailable" in spec and selected:
            minimum, field = _scaled(spec["minAvailable"], pods), f"spec.minAvailable {spec['minAvailable']}"
            blocks = minimum is not None and minimum >= pods
        else:
            continue
        if blocks:
            found.append(
                Finding(
                    resource_id(budget),
                    f"{field} allows no voluntary disruption of the pods it selects ({which}): `kubectl drain`, node "
                    f"upgrades and the autoscaler wait forever on their nodes. Set maxUnavailable 1 (or minAvailable "
                    f"at most {max(pods - 1, 0)}).",
                )
            )
    return found


# --- engine-spread -------------------------------------------------------------------------

HOSTNAME = "kubernetes.io/hostname"


def _term_spreads(term: dict, template: PodTemplate) -> str | None:
    """None when a required anti-affinity term keeps this pod's own kind apart per node, else why not."""
    if term.get("topologyKey") != HOSTNAME:
        return f"topologyKey {term.get('topologyKey') or 'unset'}"
    namespaces = term.get("namespaces")
    # A namespaceSelector adds namespaces whose labels are not among the resources: taken as covering.
    if namespaces and template.namespace not in namespaces and "namespaceSelector" not in term:
        return f"namespaces {', '.join(namespaces)} exclude {template.namespace}"
    selector = term.get("labelSelector")
    if not selector:
        return "no labelSelector (matches no pod)"
    if any(key in template.labels for key in term.get("mismatchLabelKeys") or []):
        return f"mismatchLabelKeys {', '.join(term['mismatchLabelKeys'])} exclude the pod's own labels"
    if not label_selector_matches(selector, template.labels):
        return (
            f"labelSelector {show_labels(selector.get('matchLabels') or {})}"
            + (" with matchExpressions" if selector.get("matchExpressions") else "")
            + " does not match the pod's own labels"
        )
    return None


def engine_spread(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Engine workloads of more than one replica: required podAntiAffinity per hostname against their own role."""
    found = []
    for template in pod_templates(manifests):
        if (
            template.owner.get("kind") not in WORKLOAD_KINDS
            or not template_engines(template)
            or replicas(template.owner) <= 1
        ):
            continue
        anti = (template.spec.get("affinity") or {}).get("podAntiAffinity") or {}
        terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        reasons = [_term_spreads(term, template) for term in terms]
        if terms and None in reasons:
            continue
        if terms:
            found_text = (
                "its required podAntiAffinity terms do not keep these pods apart per node ("
                + "; ".join(f"[{i}] {r}" for i, r in enumerate(reasons))
                + ")"
            )
        elif anti.get("preferredDuringSchedulingIgnoredDuringExecution"):
            found_text = (
                "it has only preferredDuringSchedulingIgnoredDuringExecution podAntiAffinity, which the scheduler may "
                "ignore"
            )
        else:
            found_text = "it has no required podAntiAffinity"
        wanted = {
            k: v for k, v in template.labels.items() if k in (ROLE_LABEL, "app.kubernetes.io/part-of")
        } or template.labels
        found.append(
            Finding(
                template.resource,
                f"engine workload with spec.replicas {replicas(template.owner)} (role {template.role or 'unknown'}): "
                f"{found_text}: two of its pods may land on one node, and one node failure then takes several pods of "
                "the role. Add "
                "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution "
                f"[{{labelSelector: {{matchLabels: {show_labels(wanted)}}}, topologyKey: {HOSTNAME}}}] "
                "(rebel100:placement.spreadRoles true).",
            )
        )
    return found


# --- engine-grace-covers-drain, epp-grace-covers-drain ---------------------------------------


def engine_grace_covers_drain(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Each engine's pod gives it the time it asks for after deletion: its preStop sleep plus its drain after SIGTERM
    (`--shutdown-timeout`), within the pod's terminationGracePeriodSeconds (core.rules.grace_covers_drain)."""
    found = []
    for template in pod_templates(manifests):
        grace, unset = grace_period(template)
        if grace is None:
            continue
        for engine in template_engines(template):
            drain = engine.flags.integer("--shutdown-timeout", 0)
            if drain is None:
                continue  # unreadable: vllm-args-known judges the value
            problem = rules.grace_covers_drain(
                grace,
                pre_stop_seconds(engine.container),
                drain,
                grace_name=GRACE_FIELD,
                pre_stop_name=f"container {engine.name} lifecycle.preStop sleep",
                drain_name="its --shutdown-timeout",
            )
            if problem:
                found.append(Finding(template.resource, unset + problem))
    return found


def _epp_drain(container: dict) -> float | None:
    """How long an EPP container drains after SIGTERM: its --drain-timeout, the program's default when its image has
    the flag and it is not given, None when it has no drain (or the value is unreadable)."""
    value = parse_flags(command_line(container), go_style=True).get(router_versions.DRAIN_TIMEOUT_FLAG)
    if isinstance(value, str):
        return go_duration_seconds(value)
    if router_versions.epp_drains(image_version(str(container.get("image", "")))):
        return router_versions.EPP_DRAIN_TIMEOUT_DEFAULT_S
    return None


def epp_grace_covers_drain(manifests: list[dict], facts: Facts) -> list[Finding]:
    """An EPP that drains after SIGTERM outlives its drain: its pod's grace period is longer than --drain-timeout
    (core.rules.epp_grace_covers_drain)."""
    found = []
    for template in pod_templates(manifests):
        grace, unset = grace_period(template)
        for container in template.containers():  # the EPP: the container given the pool it picks for
            if "--pool-name" not in parse_flags(command_line(container), go_style=True).values:
                continue
            drain = _epp_drain(container)
            if grace is None or drain is None:
                continue
            problem = rules.epp_grace_covers_drain(
                grace,
                drain,
                grace_name=GRACE_FIELD,
                drain_name=f"container {container.get('name', '?')} {router_versions.DRAIN_TIMEOUT_FLAG}",
                fix=sizing.epp_grace_seconds(math.ceil(drain)),
            )
            if problem:
                found.append(Finding(template.resource, unset + problem))
    return found
