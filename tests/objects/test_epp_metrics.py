"""The EPP's /metrics as the rendered PodMonitor scrapes it (issue 23: the EPP checks a bearer token on /metrics by
default, the PodMonitor sent none and the EPP could not check one, so Prometheus got 401 and the router's panels
stayed empty).

The EPP's side is written out here from its source, not from the pack: `--metrics-endpoint-auth` defaults to true
(pkg/epp/server/options.go of gateway-api-inference-extension v1.4.0, the runner of llm-d-inference-scheduler
v0.7.1, and of llm-d-router v0.10.0), and then controller-runtime v0.23.3's pkg/metrics/filters
WithAuthenticationAndAuthorization answers a request without a token 401, sends a TokenReview of the bearer token and
a SubjectAccessReview (verb `get`, non-resource path `/metrics`) for its user, both created with the EPP's own
ServiceAccount. The API server's RBAC then decides: ClusterRoles only, for a non-resource URL.
"""

import pytest

from core.config import StackConfig
from objects.stack import stack_objects


def render(**config) -> list[dict]:
    return stack_objects(StackConfig(name="t", namespace="ns", **config)).manifests()


def of_kind(manifests: list[dict], kind: str) -> list[dict]:
    return [m for m in manifests if m["kind"] == kind]


def named(manifests: list[dict], kind: str, name: str) -> dict | None:
    return next((m for m in of_kind(manifests, kind) if m["metadata"]["name"] == name), None)


def cluster_rules_of(manifests: list[dict], namespace: str, account: str) -> list[dict]:
    """Every rule the ClusterRoleBindings of the render grant to a ServiceAccount."""
    granted = []
    for binding in of_kind(manifests, "ClusterRoleBinding"):
        if {"kind": "ServiceAccount", "name": account, "namespace": namespace} in binding["subjects"]:
            role = named(manifests, "ClusterRole", binding["roleRef"]["name"])
            granted += role["rules"] if role else []
    return granted


def allows(rules: list[dict], verb: str, *, group: str = "", resource: str = "", path: str = "") -> bool:
    def match(values, value):
        return "*" in values or value in values

    for rule in rules:
        if not match(rule.get("verbs", []), verb):
            continue
        if path and any(
            url == path or url == "*" or (url.endswith("*") and path.startswith(url[:-1]))
            for url in rule.get("nonResourceURLs", [])
        ):
            return True
        if resource and match(rule.get("apiGroups", []), group) and match(rule.get("resources", []), resource):
            return True
    return False


def epp_scrape(manifests: list[dict]) -> int:
    """The HTTP status Prometheus gets for the EPP's /metrics, as the PodMonitor of the EPP scrapes it."""
    epp = next(d for d in of_kind(manifests, "Deployment") if d["metadata"]["name"] == "t-epp")
    spec = epp["spec"]["template"]["spec"]
    container = spec["containers"][0]
    if "--metrics-endpoint-auth=false" in container["args"]:
        return 200
    labels = epp["spec"]["template"]["metadata"]["labels"]
    monitor = next(
        m for m in of_kind(manifests, "PodMonitor") if m["spec"]["selector"]["matchLabels"].items() <= labels.items()
    )
    metrics_names = {p["name"] for p in container["ports"] if p["containerPort"] == 9090}
    endpoint = next(e for e in monitor["spec"]["podMetricsEndpoints"] if e["port"] in metrics_names)
    credentials = (endpoint.get("authorization") or {}).get("credentials")
    if not credentials:
        return 401
    secret = named(manifests, "Secret", credentials["name"])
    assert secret is not None and secret["metadata"]["namespace"] == monitor["metadata"]["namespace"]
    assert secret["type"] == "kubernetes.io/service-account-token" and credentials["key"] == "token"
    reader = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    assert named(manifests, "ServiceAccount", reader) is not None, "the token controller deletes a token of no account"
    epp_rules = cluster_rules_of(manifests, "ns", spec["serviceAccountName"])
    if not (
        allows(epp_rules, "create", group="authentication.k8s.io", resource="tokenreviews")
        and allows(epp_rules, "create", group="authorization.k8s.io", resource="subjectaccessreviews")
    ):
        return 500  # the filter's own answer when the review cannot be created
    return 200 if allows(cluster_rules_of(manifests, "ns", reader), "get", path="/metrics") else 403


def test_prometheus_gets_the_epps_metrics_as_rendered():
    assert epp_scrape(render()) == 200


def test_the_metrics_reader_may_read_metrics_and_nothing_else():
    manifests = render()
    assert cluster_rules_of(manifests, "ns", "t-metrics-reader") == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    assert named(manifests, "ServiceAccount", "t-metrics-reader")["automountServiceAccountToken"] is False


def test_the_epp_may_create_reviews_and_nothing_else_cluster_wide():
    assert cluster_rules_of(render(), "ns", "t-epp") == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]


def test_cluster_scoped_names_are_the_stacks_own():
    """Two stacks of one name in two namespaces share no ClusterRole or ClusterRoleBinding."""

    def names(namespace):
        manifests = stack_objects(StackConfig(name="t", namespace=namespace)).manifests()
        return {
            (m["kind"], m["metadata"]["name"]) for m in manifests if m["kind"] in ("ClusterRole", "ClusterRoleBinding")
        }

    assert names("a") and not names("a") & names("b")


@pytest.mark.parametrize(
    "config",
    [{"observability": {"podMonitors": False}}, {"observability": {"podMonitors": False, "grafanaDashboard": False}}],
)
def test_without_pod_monitors_no_reader_but_the_epp_still_checks_tokens(config):
    """The EPP's /metrics keeps its authentication (another Prometheus brings its own reader); nothing reads it here."""
    manifests = render(**config)
    assert not of_kind(manifests, "PodMonitor") and named(manifests, "ServiceAccount", "t-metrics-reader") is None
    assert cluster_rules_of(manifests, "ns", "t-epp")
