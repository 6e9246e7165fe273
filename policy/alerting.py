"""Alerts: the PrometheusRules of any manifest, judged with the gate's rules (core.rules.alert_role_runs and
alert_series_served) on what their alerts read, and the PodMonitors of the stack's pods that no alert watches.

An alert's pods are told by its `role` label (prefill, decode or epp, as the stack's own rules carry it:
core/alerts.py); an alert without one, or with another value, is not judged for its role. The series judged are those
of the stack's own programs an expression names (core.alerts `series_in`): the engines' vLLM metrics, against the
engine image of the role's pods (of any engine pod of the namespace for an alert of the EPP), and the EPP's counters,
against the EPP image of the namespace. Prometheus's own series and kube-state-metrics' are not the stack's images: not
judged.
"""

from __future__ import annotations

from collections.abc import Iterator

from core import alerts, rules
from core.versions import engine as engine_versions
from policy.facts import Facts
from policy.read.engines import template_engines
from policy.read.objects import Finding, namespace_of, of_kind, resource_id
from policy.read.pods import PodTemplate, epp_image, monitor_covers, pod_templates

ROLE_LABEL = "role"  # of an alerting rule (core/alerts.py Alert.rule)
POLICY_FIX = "observability.alerts in the stack"


def _alert_rules(rule: dict) -> Iterator[tuple[str, dict]]:
    """(field, rule) of every alerting rule of a PrometheusRule (recording rules have `record`, not `alert`)."""
    for g, group in enumerate((rule.get("spec") or {}).get("groups") or []):
        for r, item in enumerate((group or {}).get("rules") or []):
            if isinstance(item, dict) and item.get("alert"):
                yield f"spec.groups[{g}].rules[{r}]", item


def _role_of(template: PodTemplate) -> str | None:
    """The alert role of a pod template: an engine's llm-d role, or `epp` for the EPP's."""
    if template_engines(template) and template.role in alerts.ROLES:
        return template.role
    if epp_image([template.owner], template.namespace):
        return alerts.EPP_ROLE
    return None


def _engine_images(manifests: list[dict], namespace: str, role: str) -> list[str]:
    """The engine images of the role's pods in the namespace (every engine's for another role), each once."""
    images = [
        str(engine.container.get("image", ""))
        for template in pod_templates(manifests)
        if template.namespace == namespace and (role not in ("prefill", "decode") or template.role == role)
        for engine in template_engines(template)
    ]
    return list(dict.fromkeys(images))


def alerts_served(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every alert of a PrometheusRule that carries a role label watches a role whose pods run in its namespace, and
    every series of the stack's programs it reads is served, under that name, by the pinned image."""
    found = []
    for rule in of_kind(manifests, "PrometheusRule"):
        namespace = namespace_of(rule)
        roles = sorted(
            {role for t in pod_templates(manifests) if t.namespace == namespace and (role := _role_of(t)) is not None}
        )
        epp = epp_image(manifests, namespace)
        for field, item in _alert_rules(rule):
            name, role = str(item["alert"]), str((item.get("labels") or {}).get(ROLE_LABEL) or "")
            where = f"{field} (alert {name})"
            if role in alerts.ROLES and role not in roles:
                problem = rules.alert_role_runs([name], role, roles)
                found.append(Finding(resource_id(rule), f"{where}: {problem}"))
                continue
            for series in alerts.series_in(str(item.get("expr", ""))):
                if alerts.source_of(series) == alerts.EPP:
                    images = [epp] if epp else []
                    fix = (
                        "Pin an EPP of a known generation (core/versions/router.py GENERATIONS), or remove the alert "
                        f"({POLICY_FIX})."
                    )
                else:
                    images = _engine_images(manifests, namespace, role)
                    since = engine_versions.METRICS[series].since
                    fix = f"Pin the engine image {since} or later, or remove the alert ({POLICY_FIX})."
                for image in images:
                    problem = rules.alert_series_served(
                        [name],
                        series,
                        alerts.served_as(series, image),
                        image=image,
                        fix=fix,
                    )
                    if problem:
                        found.append(Finding(resource_id(rule), f"{where}: {problem}"))
                        break
    return found


def alerts_where_scraped(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every PodMonitor that scrapes the stack's pods (an engine role's, or the EPP's) has, in their namespace, a
    PrometheusRule with an alert on that role: metrics nobody is alerted on are found only after users are."""
    found = []
    watched = {
        (namespace_of(rule), str((item.get("labels") or {}).get(ROLE_LABEL) or ""))
        for rule in of_kind(manifests, "PrometheusRule")
        for _, item in _alert_rules(rule)
    }
    templates = [(t, role) for t in pod_templates(manifests) if (role := _role_of(t)) is not None]
    for monitor in of_kind(manifests, "PodMonitor"):
        missing = sorted(
            {
                (t.namespace, role)
                for t, role in templates
                if monitor_covers(monitor, t) and (t.namespace, role) not in watched
            }
        )
        for namespace, role in missing:
            found.append(
                Finding(
                    resource_id(monitor),
                    f"scrapes the {role} pods of namespace {namespace}, but no PrometheusRule there alerts on them (an "
                    f"alert labelled role: {role}): their metrics are collected and nobody is told when they go bad. "
                    f"Render the stack's alerts (rebel100:observability.alerts.enabled true), or add a PrometheusRule "
                    f"with alerts on those pods labelled role: {role}.",
                )
            )
    return found
