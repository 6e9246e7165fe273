"""policy/observability.py: the EPP's /metrics can be scraped the way the render's monitors scrape it.

Good fixtures: the real renders (prod-4p4d and the other P/D stacks scrape the EPP with a metrics reader's token;
dev renders no PodMonitor). Bad fixtures: named hand edits of a deep copy of prod-4p4d.
"""

import pytest

from tests.policy.conftest import STACKS
from tests.policy.fixtures import EPP, assert_verdict, get, mutate, pod_spec, run_policy

POLICY = "epp-metrics-scrapeable"
MONITOR_ID = f"PodMonitor/rebel100/{EPP}"
READER, TOKEN = "minimax-m27-metrics-reader", "minimax-m27-metrics-reader-token"
READER_ROLE, EPP_AUTH = "rebel100-minimax-m27-metrics-reader", "rebel100-minimax-m27-epp-metrics-auth"


@pytest.mark.parametrize("stack", STACKS)
def test_good_render_passes(renders, stack):
    assert run_policy(POLICY, renders[stack]) == []


def endpoint(m):
    return get(m, "PodMonitor", EPP)["spec"]["podMetricsEndpoints"][0]


def epp_args(m):
    return pod_spec(m, EPP)["containers"][0]["args"]


def drop(kind, name):
    return lambda m: m.remove(get(m, kind, name))


BAD = {
    "monitor-sends-no-token": (
        lambda m: endpoint(m).pop("authorization"),
        (
            "podMetricsEndpoints[0] (port metrics) of PodMonitor rebel100/minimax-m27-epp sends no bearer token",
            f"Deployment/rebel100/{EPP} checks one on /metrics (--metrics-endpoint-auth, on by default)",
            "Prometheus gets 401",
            "authorization.credentials",
            "or turn the check off with --metrics-endpoint-auth=false",
        ),
    ),
    "epp-may-not-review-tokens": (
        drop("ClusterRoleBinding", EPP_AUTH),
        (
            f"ServiceAccount rebel100/{EPP}, which runs Deployment/rebel100/{EPP}, may not create tokenreviews "
            f"(authentication.k8s.io) and subjectaccessreviews (authorization.k8s.io)",
            "every scrape is answered 500",
            "Bind a ClusterRole granting create on both to it with a ClusterRoleBinding",
        ),
    ),
    "reader-may-not-get-metrics": (
        lambda m: get(m, "ClusterRole", READER_ROLE)["rules"][0].update(nonResourceURLs=["/healthz"]),
        (
            f"the token of Secret rebel100/{TOKEN} is ServiceAccount rebel100/{READER}'s",
            "no ClusterRoleBinding of the manifests grants it get on the non-resource URL /metrics",
            "the EPP answers 403",
            "nonResourceURLs [/metrics], verbs [get]",
        ),
    ),
    "token-of-an-account-not-rendered": (
        lambda m: get(m, "Secret", TOKEN)["metadata"]["annotations"].update(
            {"kubernetes.io/service-account.name": "prometheus"}
        ),
        ("ServiceAccount rebel100/prometheus's", "get on the non-resource URL /metrics", "403"),
    ),
    "token-secret-without-a-token": (
        lambda m: get(m, "Secret", TOKEN).update(type="Opaque"),
        (
            f"Secret rebel100/{TOKEN} is neither a kubernetes.io/service-account-token nor holds key token",
            "Prometheus has no token to send and gets 401",
        ),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(prod, case):
    edit, contains = BAD[case]
    assert_verdict(run_policy(POLICY, mutate(prod, edit)), resource=MONITOR_ID, level="mandatory", contains=contains)


def test_epp_without_metrics_auth_needs_no_token(prod):
    no_auth = mutate(
        prod,
        lambda m: epp_args(m).append("--metrics-endpoint-auth=false"),
        lambda m: endpoint(m).pop("authorization"),
        drop("ClusterRoleBinding", EPP_AUTH),
    )
    assert run_policy(POLICY, no_auth) == []
    # Go's flag package reads a bare `false` after a boolean flag as a positional argument: the check stays on.
    spaced = mutate(
        prod,
        lambda m: epp_args(m).extend(["--metrics-endpoint-auth", "false"]),
        lambda m: endpoint(m).pop("authorization"),
    )
    assert len(run_policy(POLICY, spaced)) == 1


def test_a_token_secret_made_elsewhere_is_not_judged(prod):
    """A Secret that is not among the manifests (made by hand or by another tool) cannot be read here."""
    elsewhere = mutate(prod, lambda m: endpoint(m)["authorization"]["credentials"].update(name="made-by-hand"))
    assert run_policy(POLICY, elsewhere) == []


def test_deprecated_bearer_token_secret_is_read_too(prod):
    older = mutate(
        prod, lambda m: endpoint(m).update(bearerTokenSecret=endpoint(m).pop("authorization")["credentials"])
    )
    assert run_policy(POLICY, older) == []
    bad = mutate(older, drop("ClusterRoleBinding", READER_ROLE))
    assert "403" in run_policy(POLICY, bad)[0].message


def test_a_service_monitor_of_the_epp_service_is_judged_like_a_pod_monitor(prod):
    def to_service_monitor(m):
        monitor = get(m, "PodMonitor", EPP)
        monitor["kind"] = "ServiceMonitor"
        monitor["spec"]["selector"] = {"matchLabels": get(m, "Service", EPP)["metadata"]["labels"]}
        monitor["spec"]["endpoints"] = monitor["spec"].pop("podMetricsEndpoints")

    as_service = mutate(prod, to_service_monitor)
    assert run_policy(POLICY, as_service) == []
    (finding,) = run_policy(
        POLICY, mutate(as_service, lambda m: get(m, "ServiceMonitor", EPP)["spec"]["endpoints"][0].pop("authorization"))
    )
    assert finding.resource == f"ServiceMonitor/rebel100/{EPP}" and "endpoints[0] (port metrics)" in finding.message


# --- which PodMonitors scrape the EPP: their namespaces (issue 25) -------------------------------------------------


def tokenless_monitor_in(namespace_selector):
    """The EPP's PodMonitor moved to namespace `monitoring` without its token, with a namespaceSelector or (None)
    without one."""

    def edit(m):
        monitor = get(m, "PodMonitor", EPP)
        monitor["metadata"]["namespace"] = "monitoring"
        endpoint(m).pop("authorization")
        if namespace_selector is not None:
            monitor["spec"]["namespaceSelector"] = namespace_selector

    return edit


@pytest.mark.parametrize(
    "namespace_selector", [None, {"matchNames": ["other"]}], ids=["none: its own namespace", "another namespace"]
)
def test_a_monitor_that_does_not_watch_the_epps_namespace_is_not_judged_as_scraping_it(prod, namespace_selector):
    """Without namespaceSelector a PodMonitor watches its own namespace: in `monitoring` it scrapes no EPP of
    rebel100, so its missing token makes no 401 there."""
    assert run_policy(POLICY, mutate(prod, tokenless_monitor_in(namespace_selector))) == []


@pytest.mark.parametrize("namespace_selector", [{"matchNames": ["rebel100"]}, {"any": True}], ids=["matchNames", "any"])
def test_a_monitor_elsewhere_that_watches_the_epps_namespace_is_judged(prod, namespace_selector):
    (violation,) = run_policy(POLICY, mutate(prod, tokenless_monitor_in(namespace_selector)))
    assert violation.resource == f"PodMonitor/monitoring/{EPP}"
    assert violation.message.startswith(
        f"spec.podMetricsEndpoints[0] (port metrics) of PodMonitor monitoring/{EPP} sends no bearer token, but "
        f"Deployment/rebel100/{EPP} checks one on /metrics (--metrics-endpoint-auth, on by default): Prometheus gets "
        f"401"
    ), violation.message


# --- what a scrape needs, read rule by rule (survivors of make mutate SCOPE=policy, issue 25) ------------------------


def opaque_token(**held):
    """The token Secret made an Opaque Secret that holds `held` (data=... or stringData=...)."""

    def edit(m):
        secret = get(m, "Secret", TOKEN)
        secret["type"] = "Opaque"
        secret.pop("data", None)
        secret.pop("stringData", None)
        secret.update(held)

    return edit


@pytest.mark.parametrize("field", ["data", "stringData"])
def test_an_opaque_secret_that_holds_the_key_sends_a_token(prod, field):
    """Held as data or stringData, the key is a token to send; whose it is cannot be read, so it is not judged."""
    assert run_policy(POLICY, mutate(prod, opaque_token(**{field: {"token": "dG9rZW4="}}))) == []
    (violation,) = run_policy(POLICY, mutate(prod, opaque_token(**{field: {"other": "dG9rZW4="}})))
    assert "is neither a kubernetes.io/service-account-token nor holds key token" in violation.message


def test_credentials_without_a_key_name_the_empty_key(prod):
    bad = mutate(prod, lambda m: endpoint(m)["authorization"]["credentials"].pop("key"))
    (violation,) = run_policy(POLICY, bad)
    assert violation.message.startswith(
        f"spec.podMetricsEndpoints[0] (port metrics) of PodMonitor rebel100/{EPP} sends key  of Secret "
        f"rebel100/{TOKEN}, but Secret rebel100/{TOKEN} is neither a kubernetes.io/service-account-token nor holds "
        "key :"
    ), violation.message


def test_a_token_secret_without_its_account_annotation_names_no_account(prod):
    bad = mutate(
        prod,
        lambda m: get(m, "Secret", TOKEN)["metadata"]["annotations"].pop("kubernetes.io/service-account.name"),
    )
    (violation,) = run_policy(POLICY, bad)
    assert f"the token of Secret rebel100/{TOKEN} is ServiceAccount rebel100/'s and no ClusterRoleBinding" in (
        violation.message
    ), violation.message


def test_a_basic_authorization_sends_no_bearer_token(prod):
    """Only a Bearer authorization (the type Prometheus Operator defaults to) sends the token the EPP checks."""
    basic = mutate(prod, lambda m: endpoint(m)["authorization"].update(type="Basic"))
    (violation,) = run_policy(POLICY, basic)
    assert "sends no bearer token" in violation.message
    lower = mutate(prod, lambda m: endpoint(m)["authorization"].update(type="bearer"))
    assert run_policy(POLICY, lower) == []


def test_a_binding_to_a_cluster_role_not_among_the_manifests_is_not_judged(prod):
    """The reader bound to a ClusterRole the manifests do not hold: it may grant /metrics, so nothing is reported."""
    bad = mutate(
        prod,
        lambda m: get(m, "ClusterRole", READER_ROLE)["rules"][0].update(nonResourceURLs=["/healthz"]),
        lambda m: get(m, "ClusterRoleBinding", READER_ROLE)["roleRef"].update(name="made-elsewhere"),
    )
    assert run_policy(POLICY, bad) == []


def test_a_monitor_port_named_otherwise_scrapes_something_else(prod):
    other = mutate(prod, lambda m: endpoint(m).update(port="grpc"))
    assert run_policy(POLICY, mutate(other, lambda m: endpoint(m).pop("authorization"))) == []


@pytest.mark.parametrize(
    "rules, verb, what, may",
    [
        ([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}], "get", {"path": "/metrics"}, True),
        ([{"verbs": ["*"], "nonResourceURLs": ["/metrics"]}], "get", {"path": "/metrics"}, True),
        ([{"verbs": ["list"], "nonResourceURLs": ["/metrics"]}], "get", {"path": "/metrics"}, False),
        (
            [{"verbs": ["list"], "nonResourceURLs": ["/metrics"]}, {"verbs": ["GET"], "nonResourceURLs": ["/metrics"]}],
            "get",
            {"path": "/metrics"},
            True,
        ),
        ([{"verbs": ["get"], "nonResourceURLs": ["/met*"]}], "get", {"path": "/metrics"}, True),
        ([{"verbs": ["get"], "nonResourceURLs": ["/mx*"]}], "get", {"path": "/metrics"}, False),
        ([{"verbs": ["get"], "nonResourceURLs": ["/metric"]}], "get", {"path": "/metrics"}, False),
        ([{"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]}], "get", {"path": "/metrics"}, False),
        (
            [{"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"]}],
            "create",
            {"group": "authentication.k8s.io", "resource": "tokenreviews"},
            True,
        ),
        (
            [{"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"]}],
            "create",
            {"group": "authorization.k8s.io", "resource": "tokenreviews"},
            False,
        ),
        (
            [{"verbs": ["create"], "apiGroups": ["*"], "resources": ["*"]}],
            "create",
            {"group": "g", "resource": "r"},
            True,
        ),
        ([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}], "get", {"resource": "pods"}, True),
        ([{"verbs": ["create"], "nonResourceURLs": ["*"]}], "create", {"group": "g", "resource": "r"}, False),
    ],
    ids=[
        "url",
        "any-verb",
        "other-verb",
        "second-rule",
        "url-prefix",
        "other-prefix",
        "no-star-no-prefix",
        "resource-rule-no-url",
        "resource",
        "other-group",
        "any-resource",
        "core-group-by-default",
        "url-rule-no-resource",
    ],
)
def test_what_a_cluster_role_rule_lets_its_holder_do(rules, verb, what, may):
    """RBAC's matching as the API server's authorizer does it (k8s.io/apiserver rbac: VerbMatches,
    NonResourceURLMatches with a trailing `*`, APIGroupMatches, ResourceMatches), written out here."""
    from policy.observability import _may

    assert _may(rules, verb, **what) is may


def tokenless(**fields):
    """The EPP's PodMonitor endpoint without its token, its port given by `fields` instead of `port: metrics`."""

    def edit(m):
        endpoint(m).pop("authorization")
        endpoint(m).pop("port")
        endpoint(m).update(fields)

    return edit


@pytest.mark.parametrize(
    "fields, shown",
    [({"portNumber": 9090}, "9090"), ({"targetPort": 9090}, "9090"), ({"targetPort": "metrics"}, "metrics")],
    ids=["portNumber", "targetPort-number", "targetPort-name"],
)
def test_a_pod_monitor_endpoint_chooses_its_port_by_any_field(prod, fields, shown):
    (violation,) = run_policy(POLICY, mutate(prod, tokenless(**fields)))
    assert violation.message.startswith(
        f"spec.podMetricsEndpoints[0] (port {shown}) of PodMonitor rebel100/{EPP} sends no bearer token"
    ), violation.message


def test_a_pod_monitor_of_other_pods_does_not_scrape_the_epp(prod):
    other = mutate(
        prod,
        lambda m: endpoint(m).pop("authorization"),
        lambda m: get(m, "PodMonitor", EPP)["spec"].update(selector={"matchLabels": {"llm-d.ai/role": "decode"}}),
    )
    assert run_policy(POLICY, other) == []


@pytest.mark.parametrize(
    "args, judged",
    [
        (["--metrics-endpoint-auth=true"], True),
        (["-metrics-endpoint-auth=false"], False),
        (["--metrics-endpoint-auth=0"], False),
        (["--metrics-endpoint-auth"], True),
    ],
    ids=["true", "go-single-dash-false", "zero", "bare"],
)
def test_the_auth_flag_as_go_reads_it(prod, args, judged):
    def edit(m):
        epp_args(m).extend(args)
        endpoint(m).pop("authorization")

    assert len(run_policy(POLICY, mutate(prod, edit))) == (1 if judged else 0)


def service_monitor(*, target=None, port_name="metrics", selector=None, namespace=None):
    """The EPP's PodMonitor made a tokenless ServiceMonitor of the EPP Service (or of `selector`); the Service's metrics
    port renamed `port_name`, with its targetPort replaced by `target` (a value) or removed (`"-"`)."""

    def edit(m):
        service = get(m, "Service", EPP)
        monitor = get(m, "PodMonitor", EPP)
        monitor["kind"] = "ServiceMonitor"
        monitor["spec"]["selector"] = selector or {"matchLabels": service["metadata"]["labels"]}
        monitor["spec"]["endpoints"] = monitor["spec"].pop("podMetricsEndpoints")
        monitor["spec"]["endpoints"][0].pop("authorization")
        monitor["spec"]["endpoints"][0]["port"] = port_name
        metrics = next(p for p in service["spec"]["ports"] if p["name"] == "metrics")
        metrics["name"] = port_name
        if target == "-":
            metrics.pop("targetPort")
        elif target is not None:
            metrics["targetPort"] = target
        if namespace is not None:
            service["metadata"]["namespace"] = namespace

    return edit


def test_a_service_monitor_reaches_the_epp_through_the_services_target_port(prod):
    """A Service port leads to its targetPort (to the same number without one): the monitor scrapes the EPP's
    metrics port only when that is where it leads."""
    for edit in (service_monitor(), service_monitor(target="-"), service_monitor(target="metrics")):
        (violation,) = run_policy(POLICY, mutate(prod, edit))
        assert violation.resource == f"ServiceMonitor/rebel100/{EPP}", violation
    assert run_policy(POLICY, mutate(prod, service_monitor(target=9003))) == []


def test_a_service_monitor_of_another_service_or_namespace_does_not_scrape_the_epp(prod):
    assert run_policy(POLICY, mutate(prod, service_monitor(selector={"matchLabels": {"app": "other"}}))) == []
    assert run_policy(POLICY, mutate(prod, service_monitor(namespace="elsewhere"))) == []


def test_a_service_monitor_is_judged_through_each_service_that_selects_the_epp(prod):
    """A second Service of the EPP's pods listed first, which the monitor does not select, is passed over."""

    def second_service(m):
        service = get(m, "Service", EPP)
        m.insert(0, {**service, "metadata": {**service["metadata"], "name": "epp-other", "labels": {"app": "other"}}})

    (violation,) = run_policy(POLICY, mutate(prod, service_monitor(), second_service))
    assert violation.resource == f"ServiceMonitor/rebel100/{EPP}"


def test_a_service_monitor_outside_the_namespaces_it_watches_is_not_judged(prod):
    def elsewhere(m):
        get(m, "ServiceMonitor", EPP)["metadata"]["namespace"] = "monitoring"

    assert run_policy(POLICY, mutate(prod, service_monitor(), elsewhere)) == []


@pytest.mark.parametrize("target", [9090, "metrics"], ids=["number", "name"])
def test_a_service_monitor_endpoint_may_name_the_target_port_itself(prod, target):
    def by_target(m):
        endpoint = get(m, "ServiceMonitor", EPP)["spec"]["endpoints"][0]
        endpoint.pop("port")
        endpoint["targetPort"] = target

    (violation,) = run_policy(POLICY, mutate(prod, service_monitor(), by_target))
    assert violation.message.startswith(
        f"spec.endpoints[0] (port {target}) of ServiceMonitor rebel100/{EPP} sends no bearer token"
    ), violation.message


@pytest.mark.parametrize("form", ["--metrics-port", "-metrics-port"], ids=["two-dashes", "go-single-dash"])
def test_the_epps_metrics_port_is_read_from_its_flag(prod, form):
    """The EPP serving metrics on 9100 (its port named metrics there): the monitor of port `metrics` scrapes it."""

    def port_9100(m):
        container = pod_spec(m, EPP)["containers"][0]
        args = container["args"]
        del args[args.index("--metrics-port") : args.index("--metrics-port") + 2]
        args.append(f"{form}=9100")
        next(p for p in container["ports"] if p["name"] == "metrics")["containerPort"] = 9100
        endpoint(m).pop("authorization")

    (violation,) = run_policy(POLICY, mutate(prod, port_9100))
    assert "sends no bearer token" in violation.message


def test_the_epp_is_found_by_its_pool_flag_in_gos_single_dash_form(prod):
    def single_dash(m):
        args = pod_spec(m, EPP)["containers"][0]["args"]
        args[args.index("--pool-name")] = "-pool-name"
        endpoint(m).pop("authorization")

    (violation,) = run_policy(POLICY, mutate(prod, single_dash))
    assert "sends no bearer token" in violation.message


def test_without_its_flag_the_epp_serves_metrics_on_9090(prod):
    """No --metrics-port: the EPP's default, 9090, is its metrics port, so a monitor scraping portNumber 9090 without a
    token is judged."""

    def default_port(m):
        args = pod_spec(m, EPP)["containers"][0]["args"]
        del args[args.index("--metrics-port") : args.index("--metrics-port") + 2]

    (violation,) = run_policy(POLICY, mutate(prod, default_port, tokenless(portNumber=9090)))
    assert violation.message.startswith(
        f"spec.podMetricsEndpoints[0] (port 9090) of PodMonitor rebel100/{EPP} sends no bearer token"
    ), violation.message
