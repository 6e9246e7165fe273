"""Observability: the EPP's /metrics can be scraped the way the render's monitors scrape it.

The EPP checks a bearer token on /metrics unless started with `--metrics-endpoint-auth=false` (on by default in
GIE v1.4.0's runner, the EPP of llm-d-inference-scheduler v0.7.1, and in llm-d-router v0.10.0: pkg/epp/server/
options.go). controller-runtime's metrics filter (pkg/metrics/filters) answers a request without a token 401, then
creates a TokenReview of the token and a SubjectAccessReview of `get` on the non-resource URL /metrics for its user,
as the EPP's ServiceAccount: 500 when it may not create them, 403 when the token's account may not get /metrics.
A PodMonitor or ServiceMonitor that scrapes the EPP's metrics port is judged in that order, from what the manifests
say; a token Secret, or a ClusterRole, that is not among them is not judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.cmdline import parse_flags
from core.selectors import label_selector_matches, selects
from policy.facts import Facts
from policy.read.flags import command_line
from policy.read.objects import Finding, find, namespace_of, of_kind, resource_id
from policy.read.pods import PodTemplate, pod_templates, service_account
from policy.security import REVIEW_RESOURCES, cluster_grants

AUTH_FLAG, METRICS_PORT_FLAG, METRICS_PORT_DEFAULT = "--metrics-endpoint-auth", "--metrics-port", 9090
SA_TOKEN_TYPE, SA_NAME_ANNOTATION = "kubernetes.io/service-account-token", "kubernetes.io/service-account.name"
SA_TOKEN_KEYS = ("token", "ca.crt", "namespace")  # what the token controller writes into such a Secret
REVIEWS = {"tokenreviews": "authentication.k8s.io", "subjectaccessreviews": "authorization.k8s.io"}
GO_FALSE = ("0", "f", "F", "false", "FALSE", "False")  # strconv.ParseBool


def _epp_container(template: PodTemplate) -> dict | None:
    return next(
        (c for c in template.containers() if "--pool-name" in parse_flags(command_line(c), go_style=True).values), None
    )


def _checks_tokens(container: dict) -> bool:
    # A boolean flag takes its value only after `=`: Go reads `--metrics-endpoint-auth false` as on plus a positional.
    value = parse_flags(command_line(container), boolean=frozenset({AUTH_FLAG}), go_style=True).get(AUTH_FLAG)
    return not (isinstance(value, str) and value in GO_FALSE)


def _in_scope(monitor: dict, namespace: str) -> bool:
    scope = (monitor.get("spec") or {}).get("namespaceSelector") or {}
    return bool(scope.get("any")) or namespace in (scope.get("matchNames") or [namespace_of(monitor)])


def _port_is(value: Any, port: int | None, names: set[str]) -> bool:
    return value == port or (isinstance(value, str) and value in names)


def _scrapes(
    manifests: list[dict], template: PodTemplate, container: dict, port: int | None
) -> Iterator[tuple[dict, str, dict, str]]:
    """(monitor, field, endpoint, port shown) of every monitor endpoint that scrapes this container's metrics port."""
    names = {p.get("name") for p in container.get("ports") or [] if p.get("containerPort") == port}
    for monitor in of_kind(manifests, "PodMonitor"):
        spec = monitor.get("spec") or {}
        if not (
            _in_scope(monitor, template.namespace)
            and label_selector_matches(spec.get("selector") or {}, template.labels)
        ):
            continue
        for i, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
            chosen = endpoint.get("port") or endpoint.get("portNumber") or endpoint.get("targetPort")
            if _port_is(chosen, port, names):
                yield monitor, f"spec.podMetricsEndpoints[{i}]", endpoint, str(chosen)
    services = [
        s
        for s in of_kind(manifests, "Service")
        if namespace_of(s) == template.namespace
        and selects((s.get("spec") or {}).get("selector") or {}, template.labels)
    ]
    for monitor in of_kind(manifests, "ServiceMonitor"):
        spec = monitor.get("spec") or {}
        for service in services:
            if not (
                _in_scope(monitor, template.namespace)
                and label_selector_matches(
                    spec.get("selector") or {}, (service.get("metadata") or {}).get("labels") or {}
                )
            ):
                continue
            targets = {
                p.get("name"): p.get("targetPort", p.get("port"))
                for p in (service.get("spec") or {}).get("ports") or []
            }
            for i, endpoint in enumerate(spec.get("endpoints") or []):
                chosen = endpoint.get("port")
                target = targets.get(chosen) if chosen is not None else endpoint.get("targetPort")
                if _port_is(target, port, names):
                    yield monitor, f"spec.endpoints[{i}]", endpoint, str(chosen if chosen is not None else target)


def _credentials(endpoint: dict) -> dict | None:
    """The Secret key of the bearer token an endpoint sends (`authorization`, or the deprecated bearerTokenSecret)."""
    authorization = endpoint.get("authorization") or {}
    if authorization.get("credentials") and str(authorization.get("type") or "Bearer").lower() == "bearer":
        return authorization["credentials"]
    return endpoint.get("bearerTokenSecret") or None


def _may(rules: list[dict], verb: str, *, group: str = "", resource: str = "", path: str = "") -> bool:
    def has(values, value):
        return "*" in values or value in values

    for rule in rules:
        if not has([str(v).lower() for v in rule.get("verbs") or []], verb):
            continue
        urls = [str(u) for u in rule.get("nonResourceURLs") or []]
        if path and any(u == path or (u.endswith("*") and path.startswith(u[:-1])) for u in urls):
            return True
        if resource and has(rule.get("apiGroups") or [], group) and has(rule.get("resources") or [], resource):
            return True
    return False


def _granted(manifests: list[dict], account: tuple[str, str], verb: str, **what: str) -> bool | None:
    """Whether the ClusterRoleBindings of the manifests let an account do this; None when one of them binds a
    ClusterRole that is not among the manifests (it may grant it: not judged)."""
    grants = cluster_grants(manifests, account)
    if any(_may((role or {}).get("rules") or [], verb, **what) for _, role, _ in grants):
        return True
    return None if any(role is None for _, role, _ in grants) else False


def _judge(
    manifests: list[dict], template: PodTemplate, epp_account: tuple[str, str], where: str, endpoint: dict
) -> str | None:
    """What the EPP answers this endpoint's scrape, in the filter's order, when it is not 200."""
    namespace = template.namespace
    credentials = _credentials(endpoint)
    if not credentials:
        return (
            f"{where} sends no bearer token, but {template.resource} checks one on /metrics "
            f"(--metrics-endpoint-auth, on by default): Prometheus gets 401 and the router's metrics (P/D "
            f"decisions, queues, the pool) are never scraped. Set authorization.credentials to the key token of a "
            f"kubernetes.io/service-account-token Secret whose account may get /metrics "
            f"(rebel100:observability.podMonitors renders one), or turn the check off with "
            f"--metrics-endpoint-auth=false."
        )
    name, key = str(credentials.get("name") or ""), str(credentials.get("key") or "")
    secret = find(manifests, "Secret", namespace, name)
    shown = f"Secret {namespace}/{name}"
    if secret is not None:
        token_type = secret.get("type") == SA_TOKEN_TYPE
        held = set(secret.get("data") or {}) | set(secret.get("stringData") or {})
        if not (token_type and key in SA_TOKEN_KEYS) and key not in held:
            return (
                f"{where} sends key {key} of {shown}, but {shown} is neither a {SA_TOKEN_TYPE} nor holds key "
                f"{key}: Prometheus has no token to send and gets 401. Send the key token of a {SA_TOKEN_TYPE} "
                f"Secret (annotation {SA_NAME_ANNOTATION}) of an account that may get /metrics."
            )
    missing = [
        r for r in REVIEW_RESOURCES if _granted(manifests, epp_account, "create", group=REVIEWS[r], resource=r) is False
    ]
    if missing:
        return (
            f"{where} sends a token, but ServiceAccount {epp_account[0]}/{epp_account[1]}, which runs "
            f"{template.resource}, may not create "
            f"{' and '.join(f'{r} ({REVIEWS[r]})' for r in missing)}: the EPP cannot check the token and "
            f"every scrape is answered 500. Bind a ClusterRole granting create on both to it with a "
            f"ClusterRoleBinding (the built-in system:auth-delegator grants them)."
        )
    if secret is None or secret.get("type") != SA_TOKEN_TYPE:
        return None  # a token made elsewhere, or held as data: whose it is cannot be read here
    reader = str(((secret.get("metadata") or {}).get("annotations") or {}).get(SA_NAME_ANNOTATION) or "")
    if _granted(manifests, (namespace, reader), "get", path="/metrics") is False:
        return (
            f"{where} sends the token of {shown}, but the token of {shown} is ServiceAccount "
            f"{namespace}/{reader}'s and no ClusterRoleBinding of the manifests grants it get on the "
            f"non-resource URL /metrics: the EPP answers 403. Bind it a ClusterRole with rules nonResourceURLs "
            f"[/metrics], verbs [get] (with a ClusterRoleBinding: non-resource URLs are cluster-wide)."
        )
    return None


def epp_metrics_scrapeable(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every monitor endpoint that scrapes an EPP's metrics port gets its metrics: a token when the EPP checks one,
    an EPP that may check it, and an account behind the token that may get /metrics."""
    found = []
    for template in pod_templates(manifests):
        container = _epp_container(template)
        if container is None or not _checks_tokens(container):
            continue
        port = parse_flags(command_line(container), go_style=True).integer(METRICS_PORT_FLAG, METRICS_PORT_DEFAULT)
        account = (template.namespace, service_account(template))
        for monitor, field, endpoint, shown in _scrapes(manifests, template, container, port):
            where = (
                f"{field} (port {shown}) of {monitor.get('kind')} {namespace_of(monitor)}/"
                f"{(monitor.get('metadata') or {}).get('name')}"
            )
            problem = _judge(manifests, template, account, where, endpoint)
            if problem:
                found.append(Finding(resource_id(monitor), problem))
    return found
