"""Rule 7 (policy/hygiene.py): token from a Secret, pinned images, engine requests; dev relaxes some to advice."""

import pytest

from policy import catalog, levels
from tests.policy.conftest import STACKS
from tests.policy.fixtures import (
    DECODE,
    EPP,
    PREFILL,
    assert_verdict,
    engine,
    get,
    mutate,
    pod_spec,
    run_policy,
    set_arg,
    set_env,
    sidecar,
)

POLICIES = ("hf-token-secret-ref", "image-tag-pinned", "engine-resource-requests", "ports-distinct")
DECODE_ID, PREFILL_ID, EPP_ID = (f"Deployment/rebel100/{name}" for name in (DECODE, PREFILL, EPP))
DEV = catalog.load_config(levels.environment_config("dev"))
PROD = catalog.load_config(levels.environment_config("prod"))


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES)
def test_good_render_passes(renders, stack, policy):
    assert run_policy(policy, renders[stack]) == []


def epp_container(m):
    return pod_spec(m, EPP)["containers"][0]


def drop_requests(m):
    for section in ("requests", "limits"):
        engine(m, PREFILL)["resources"].get(section, {}).pop("memory", None)


BAD = {
    "prefill-hf-token-literal": (
        lambda m: set_env(engine(m, PREFILL), "HF_TOKEN", "hf_abc123"),
        "hf-token-secret-ref",
        PREFILL_ID,
        ("container vllm env HF_TOKEN is a literal value", "valueFrom.secretKeyRef"),
    ),
    "decode-hf-token-from-configmap": (
        lambda m: set_env(
            engine(m, DECODE), "HF_TOKEN", valueFrom={"configMapKeyRef": {"name": "tokens", "key": "hf"}}
        ),
        "hf-token-secret-ref",
        DECODE_ID,
        ("env HF_TOKEN comes from configMapKeyRef, not from a Secret",),
    ),
    "sidecar-hub-token-literal": (
        lambda m: set_env(sidecar(m), "HUGGING_FACE_HUB_TOKEN", "hf_abc123"),
        "hf-token-secret-ref",
        DECODE_ID,
        ("container routing-proxy env HUGGING_FACE_HUB_TOKEN is a literal value",),
    ),
    "epp-image-latest": (
        lambda m: epp_container(m).update(image="ghcr.io/llm-d/llm-d-inference-scheduler:latest"),
        "image-tag-pinned",
        EPP_ID,
        ("image ghcr.io/llm-d/llm-d-inference-scheduler:latest uses the latest tag", "Pin a version tag"),
    ),
    "sidecar-image-untagged-on-registry-with-port": (
        lambda m: sidecar(m).update(image="registry.example:5000/llm-d/llm-d-routing-sidecar"),
        "image-tag-pinned",
        DECODE_ID,
        ("container routing-proxy image registry.example:5000/llm-d/llm-d-routing-sidecar is untagged",),
    ),
    "prefill-engine-without-memory-request": (
        drop_requests,
        "engine-resource-requests",
        PREFILL_ID,
        ("engine container vllm sets no resources.requests.memory",),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected_in_prod(prod, case):
    edit, policy, resource, contains = BAD[case]
    assert_verdict(
        run_policy(policy, mutate(prod, edit), PROD), resource=resource, level="mandatory", contains=contains
    )


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_dev_relaxes_images_and_requests_not_the_token(prod, case):
    edit, policy, resource, contains = BAD[case]
    level = "mandatory" if policy == "hf-token-secret-ref" else "advisory"
    assert_verdict(run_policy(policy, mutate(prod, edit), DEV), resource=resource, level=level, contains=contains)


def test_digest_pinned_image_passes(prod):
    pinned = mutate(
        prod, lambda m: epp_container(m).update(image="ghcr.io/llm-d/llm-d-inference-scheduler@sha256:" + "a" * 64)
    )
    assert run_policy("image-tag-pinned", pinned) == []


def test_limits_alone_count_as_requests(prod):
    """Kubernetes copies limits into unset requests, so the applied pod does request them."""
    limits_only = mutate(prod, lambda m: engine(m, PREFILL)["resources"].pop("requests"))
    assert run_policy("engine-resource-requests", limits_only) == []


def test_policy_config_all_and_per_policy_levels():
    """`all` sets every level; a policy's own entry wins, as with `pulumi --policy-pack-config`."""
    resolved = catalog.resolve({"all": "advisory", "pp-with-dp": {"enforcementLevel": "mandatory"}})
    assert resolved["pp-with-dp"].level == "mandatory"
    assert resolved["rds-memory-budget"].level == "advisory"
    assert catalog.resolve(PROD)["router-autotune-block-unit"].level == "advisory"
    with pytest.raises(catalog.PackConfigError, match="unknown policies"):
        catalog.resolve({"pp-with-db": "mandatory"})
    with pytest.raises(catalog.PackConfigError, match="is not one of"):
        catalog.resolve({"pp-with-dp": "strict"})


def test_policy_config_errors_in_full():
    """What a user reads for a bad pack config: the entry, the value and every accepted one."""
    levels = "mandatory, advisory, remediate, disabled"
    for config, where in (({"pp-with-dp": "strict"}, "pp-with-dp"), ({"all": "strict"}, "all")):
        with pytest.raises(catalog.PackConfigError) as refused:
            catalog.resolve(config)
        assert str(refused.value) == f"policy config {where}: enforcement level 'strict' is not one of {levels}"
    with pytest.raises(catalog.PackConfigError) as refused:
        catalog.resolve({"pp-with-db": "mandatory", "pp-with-dp": "advisory"})
    unknown, known = str(refused.value).split("; known: ")
    assert unknown == "policy config names unknown policies ['pp-with-db']"
    assert set(known.split(", ")) == {spec.name for spec in catalog.POLICIES} and "pp-with-dp" in known.split(", ")


def test_a_policys_properties_are_its_entry_without_the_level():
    resolved = catalog.resolve({"pp-with-dp": {"enforcementLevel": "advisory", "note": 1}})["pp-with-dp"]
    assert (resolved.level, resolved.properties) == ("advisory", {"note": 1})


def test_disabled_policy_reports_nothing(prod):
    latest = mutate(prod, BAD["epp-image-latest"][0])
    assert run_policy("image-tag-pinned", latest, {"image-tag-pinned": "disabled"}) == []
    assert get(latest, "Deployment", EPP)  # the object is still there


NETWORK_AND_METRICS = ("engine-network-policy", "engine-metrics-scraped")


def drop(kind, *names):
    return lambda m: [m.remove(get(m, kind, name)) for name in names]


@pytest.mark.parametrize(
    "edit, policy, contains",
    [
        pytest.param(
            drop("NetworkPolicy", "minimax-m27-default-deny", "minimax-m27-decode"),
            "engine-network-policy",
            (
                "no ingress NetworkPolicy in namespace rebel100 selects this engine pod template",
                "llm-d.ai/role: decode",
            ),
            id="decode-without-network-policy",
        ),
        pytest.param(
            drop("PodMonitor", "minimax-m27-decode"),
            "engine-metrics-scraped",
            ("no PodMonitor selects this engine pod template", "llm-d.ai/role: decode"),
            id="decode-without-pod-monitor",
        ),
    ],
)
def test_engines_unprotected_or_unscraped(prod, edit, policy, contains):
    bad = mutate(prod, edit)
    assert_verdict(run_policy(policy, bad, PROD), resource=DECODE_ID, level="mandatory", contains=contains)
    assert_verdict(run_policy(policy, bad, DEV), resource=DECODE_ID, level="advisory", contains=contains)
    assert_verdict(run_policy(policy, bad), resource=DECODE_ID, level="advisory", contains=contains)  # no config file


def test_dev_stack_runs_without_network_policies_and_monitors_as_advice(renders):
    """The dev stack turns both off on purpose: advice under dev.json, mandatory under prod.json."""
    for policy in NETWORK_AND_METRICS:
        assert {v.level for v in run_policy(policy, renders["dev"], DEV)} == {"advisory"}
        assert {(v.resource, v.level) for v in run_policy(policy, renders["dev"], PROD)} == {
            (DECODE_ID, "mandatory"),
            (PREFILL_ID, "mandatory"),
        }


def test_selector_expressions_are_understood(prod):
    def by_expression(m):
        policy = get(m, "NetworkPolicy", "minimax-m27-default-deny")
        policy["spec"]["podSelector"] = {
            "matchExpressions": [{"key": "llm-d.ai/role", "operator": "In", "values": ["prefill", "decode"]}]
        }

    assert (
        run_policy(
            "engine-network-policy", mutate(prod, drop("NetworkPolicy", "minimax-m27-decode"), by_expression), PROD
        )
        == []
    )


# runtime-accepts-container: what the kubelet and the container runtime refuse though the API server stores it. The
# tables of tests/core/test_formats_consumers.py (the kubelet's parser, the runtime's capability names) decide; the
# pack must refuse there in every environment, as the gate does at the config key.
RUNTIME = "runtime-accepts-container"


def with_capabilities(add=None, drop=("ALL",)):
    def edit(m):
        engine(m, DECODE)["securityContext"]["capabilities"] = {
            "drop": list(drop),
            **({"add": list(add)} if add else {}),
        }

    return edit


@pytest.mark.parametrize(
    "edit, contains",
    [
        pytest.param(
            lambda m: engine(m, PREFILL).update(image="rebellions/VLLM-rbln:0.12.0"),
            (
                "container vllm image 'rebellions/VLLM-rbln:0.12.0' is not an image reference the kubelet can parse",
                "repository name 'rebellions/VLLM-rbln' has capital letters",
                "InvalidImageName",
            ),
            id="capital-letters",
        ),
        pytest.param(
            lambda m: engine(m, PREFILL).update(image="rebellions/vllm-rbln:0.12.0@sha256:" + "A" * 64),
            ("a sha256 digest is 64 lower-case hexadecimal digits",),
            id="upper-case-digest",
        ),
        pytest.param(
            with_capabilities(add=["CAP_IPC_LOCK"]),
            ("container vllm securityContext.capabilities.add 'CAP_IPC_LOCK': written with its CAP_ prefix",),
            id="cap-prefix",
        ),
        pytest.param(
            with_capabilities(add=["IPC_LOK"]),
            ("'IPC_LOK': not a Linux capability (did you mean 'IPC_LOCK'?)",),
            id="misspelt-capability",
        ),
        pytest.param(
            with_capabilities(drop=["ALL", "NET_RAWW"]), ("capabilities.drop 'NET_RAWW'",), id="misspelt-drop"
        ),
    ],
)
def test_what_the_node_refuses_is_refused_in_every_environment(prod, edit, contains):
    resource = DECODE_ID if "capabilit" in contains[0] else PREFILL_ID
    bad = mutate(prod, edit)
    for config in (PROD, DEV, None):
        assert_verdict(run_policy(RUNTIME, bad, config), resource=resource, level="mandatory", contains=contains)


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_containers_are_what_the_node_accepts(renders, stack):
    assert run_policy(RUNTIME, renders[stack]) == []


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            lambda m: engine(m, PREFILL).update(image="rebellions/vllm-rbln:0.12.0@sha256:" + "a" * 64),
            id="tag-and-digest",
        ),
        pytest.param(with_capabilities(add=["ipc_lock", "NET_BIND_SERVICE"]), id="lower-case-name"),
        pytest.param(with_capabilities(add=["ALL"], drop=["all"]), id="all-is-pod-security-contexts"),
    ],
)
def test_what_the_node_accepts_passes(prod, edit):
    assert run_policy(RUNTIME, mutate(prod, edit)) == []


def test_an_invalid_image_is_not_also_reported_as_unpinned(prod):
    bad = mutate(prod, lambda m: engine(m, PREFILL).update(image="rebellions/VLLM-rbln"))
    assert run_policy("image-tag-pinned", bad) == []
    assert len(run_policy(RUNTIME, bad)) == 1


# --- engine-metrics-scraped: which namespaces a PodMonitor watches (issue 25) ------------------------------------


def move_monitor(name, namespace_selector=None):
    """The PodMonitor into namespace `monitoring`, with a namespaceSelector or (None) without one."""

    def edit(m):
        monitor = get(m, "PodMonitor", name)
        monitor["metadata"]["namespace"] = "monitoring"
        if namespace_selector is not None:
            monitor["spec"]["namespaceSelector"] = namespace_selector

    return edit


DECODE_UNSCRAPED = (
    "no PodMonitor selects this engine pod template (labels {app.kubernetes.io/component: decode, "
    "app.kubernetes.io/name: minimax-m27-decode, app.kubernetes.io/part-of: minimax-m27, llm-d.ai/inference-serving: "
    "true, llm-d.ai/role: decode, rebel100.ai/pool: minimax-m27-decode}): vLLM's /metrics (KV cache usage, queue "
    "length, TTFT) are not scraped, so capacity and latency alerts are blind. Add a PodMonitor whose selector matches "
    "these labels (rebel100:observability.podMonitors true)."
)


@pytest.mark.parametrize(
    "namespace_selector",
    [None, {"matchNames": ["other"]}, {"any": False}],
    ids=["none: its own namespace", "another namespace", "any false"],
)
def test_a_pod_monitor_that_does_not_watch_the_engines_namespace_does_not_scrape_them(prod, namespace_selector):
    """A PodMonitor without namespaceSelector watches its own namespace (Prometheus Operator's API): one in
    `monitoring` does not select the decode pods of rebel100, whatever its label selector says."""
    (violation,) = run_policy("engine-metrics-scraped", mutate(prod, move_monitor(DECODE, namespace_selector)), PROD)
    assert (violation.resource, violation.level, violation.message) == (DECODE_ID, "mandatory", DECODE_UNSCRAPED)


@pytest.mark.parametrize(
    "namespace_selector",
    [{"matchNames": ["rebel100"]}, {"matchNames": ["x", "rebel100"]}, {"any": True}],
    ids=["matchNames", "among-others", "any"],
)
def test_a_pod_monitor_elsewhere_that_watches_the_engines_namespace_scrapes_them(prod, namespace_selector):
    assert run_policy("engine-metrics-scraped", mutate(prod, move_monitor(DECODE, namespace_selector)), PROD) == []


# --- each message of the hygiene rules, written out (make mutate SCOPE=policy, issue 25) ---------------------------


def epp_image_is(image):
    def edit(m):
        if image is None:
            epp_container(m).pop("image")
        else:
            epp_container(m)["image"] = image

    return edit


@pytest.mark.parametrize(
    "image, what",
    [
        (None, "has no image"),
        (
            "ghcr.io/llm-d/llm-d-router-endpoint-picker",
            "image ghcr.io/llm-d/llm-d-router-endpoint-picker is untagged (pulls latest)",
        ),
        ("localhost:5000/epp", "image localhost:5000/epp is untagged (pulls latest)"),
        (
            "ghcr.io/llm-d/llm-d-router-endpoint-picker:latest",
            "image ghcr.io/llm-d/llm-d-router-endpoint-picker:latest uses the latest tag",
        ),
    ],
    ids=["none", "untagged", "registry-port-untagged", "latest"],
)
def test_an_unpinned_image_is_named(prod, image, what):
    (violation,) = run_policy("image-tag-pinned", mutate(prod, epp_image_is(image)))
    assert violation.message == (
        f"container epp {what}: the image can change under a running stack and a rollback redeploys something else. "
        "Pin a version tag or a digest (image@sha256:...)."
    )


def test_a_pinned_image_with_a_registry_port_passes(prod):
    assert run_policy("image-tag-pinned", mutate(prod, epp_image_is("localhost:5000/epp:v1"))) == []
    assert run_policy("image-tag-pinned", mutate(prod, epp_image_is("localhost:5000/epp@sha256:" + "a" * 64))) == []


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"value": "hf_x"},
            "container vllm env HUGGING_FACE_HUB_TOKEN is a literal value: the token ends up in the stack state, the "
            "rendered YAML and anyone's `kubectl get -o yaml`. Use valueFrom.secretKeyRef to a Secret "
            "(rebel100:hfTokenSecret, key token).",
        ),
        (
            {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            "container vllm env HUGGING_FACE_HUB_TOKEN comes from fieldRef, not from a Secret: ConfigMaps and fields "
            "are not access-controlled as secrets. Use valueFrom.secretKeyRef.",
        ),
        ({}, "container vllm env HUGGING_FACE_HUB_TOKEN comes from nothing, not from a Secret:"),
    ],
    ids=["literal", "field", "nothing"],
)
def test_the_hub_token_too_only_from_a_secret(prod, entry, message):
    edit = lambda m: engine(m, PREFILL).setdefault("env", []).append({"name": "HUGGING_FACE_HUB_TOKEN", **entry})  # noqa: E731
    (violation,) = run_policy("hf-token-secret-ref", mutate(prod, edit))
    assert violation.message.startswith(message), violation.message


def test_a_literal_twin_of_a_secret_reference_is_reported(prod):
    def twin(m):
        engine(m, PREFILL).setdefault("env", []).extend(
            [
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
                {"name": "HF_TOKEN", "value": "hf_x"},
            ]
        )

    found = run_policy("hf-token-secret-ref", mutate(prod, twin))
    assert [v.message.split(":")[0] for v in found] == ["container vllm env HF_TOKEN is a literal value"], found


def test_every_name_given_twice_is_listed_once(prod):
    def twice(m):
        engine(m, DECODE)["env"] += [{"name": "B_TWICE", "value": "1"}, {"name": "A_TWICE", "value": "1"}] * 2

    (violation,) = run_policy("env-names-unique", mutate(prod, twice))
    assert violation.message.startswith("container vllm has more than one env entry named A_TWICE, B_TWICE: ")


@pytest.mark.parametrize(
    "drop, missing",
    [(("cpu",), ("cpu",)), (("cpu", "memory"), ("cpu", "memory"))],
    ids=["cpu", "cpu-and-memory"],
)
def test_the_requests_an_engine_lacks_are_named(prod, drop, missing):
    def edit(m):
        for section in ("requests", "limits"):
            for name in drop:
                engine(m, PREFILL)["resources"].get(section, {}).pop(name, None)

    (violation,) = run_policy("engine-resource-requests", mutate(prod, edit))
    assert violation.message == (
        f"engine container vllm sets no resources.requests.{' or '.join(missing)}: the scheduler may pack it next to "
        "other pods on a node whose CPU and memory the NPU runtime, tokenizer and KV offload need, and it is evicted "
        f"first under pressure. Set resources.requests (and limits) {' and '.join(missing)}."
    )


def test_all_is_the_runtimes_word_for_every_capability(prod):
    assert run_policy(RUNTIME, mutate(prod, with_capabilities(add=["all"], drop=["ALL"]))) == []
    (violation,) = run_policy(RUNTIME, mutate(prod, with_capabilities(drop=["ALL", "CAP_NET_RAW"])))
    assert violation.message.startswith(
        "container vllm securityContext.capabilities.drop 'CAP_NET_RAW': written with its CAP_ prefix"
    ), violation.message


def test_only_an_ingress_policy_protects_the_engines(prod):
    """policyTypes lists what a NetworkPolicy governs; without it, Ingress (and Egress when it has egress rules)."""

    def only(types):
        def edit(m):
            m.remove(get(m, "NetworkPolicy", "minimax-m27-default-deny"))
            spec = get(m, "NetworkPolicy", DECODE)["spec"]
            if types is None:
                spec.pop("policyTypes", None)
            else:
                spec["policyTypes"] = types

        return edit

    (violation,) = run_policy("engine-network-policy", mutate(prod, only(["Egress"])), PROD)
    assert violation.resource == DECODE_ID
    assert run_policy("engine-network-policy", mutate(prod, only(None)), PROD) == []
    assert run_policy("engine-network-policy", mutate(prod, only(["Egress", "Ingress"])), PROD) == []


def test_requests_alone_count_as_requests(prod):
    assert (
        run_policy("engine-resource-requests", mutate(prod, lambda m: engine(m, PREFILL)["resources"].pop("limits")))
        == []
    )


def test_a_token_from_two_sources_names_both(prod):
    two = {"configMapKeyRef": {"name": "t", "key": "k"}, "fieldRef": {"fieldPath": "metadata.name"}}
    edit = lambda m: set_env(engine(m, DECODE), "HF_TOKEN", valueFrom=two)  # noqa: E731
    (violation,) = run_policy("hf-token-secret-ref", mutate(prod, edit))
    assert "env HF_TOKEN comes from configMapKeyRef, fieldRef, not from a Secret" in violation.message


@pytest.mark.parametrize(
    "first", ["rebellions/VLLM-rbln", "ghcr.io/x/y@sha256:" + "a" * 64], ids=["not-a-reference", "digest"]
)
def test_every_container_is_judged_past_one_that_is_not_or_is_pinned(prod, first):
    def two(m):
        containers = pod_spec(m, EPP)["containers"]
        containers.insert(0, {"name": "first", "image": first})
        containers.append({"name": "last", "image": "busybox:latest"})

    (violation,) = run_policy("image-tag-pinned", mutate(prod, two))
    assert violation.message.startswith("container last image busybox:latest uses the latest tag")


def test_a_container_without_an_image_is_image_tag_pinneds_not_the_runtimes(prod):
    bare = mutate(prod, lambda m: epp_container(m).pop("image"))
    assert run_policy(RUNTIME, bare) == []
    assert [v.message.split(":")[0] for v in run_policy("image-tag-pinned", bare)] == ["container epp has no image"]


# --- ports-distinct (issue 38): one port per Service entry and per listener of a pod --------------------------------

POD_CLASH = (
    "the containers of a pod share one network namespace, so the second listener cannot bind the port and its "
    "container crash-loops. Give each listener a port of its own."
)


def epp_service_port(name: str, port: int):
    def edit(m):
        entry = next(p for p in get(m, "Service", EPP)["spec"]["ports"] if p["name"] == name)
        entry.update(port=port, targetPort=port)

    return edit


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_ports_are_distinct(renders, stack):
    assert run_policy("ports-distinct", renders[stack]) == []


def test_a_service_listing_a_port_twice_is_refused(prod):
    (violation,) = run_policy("ports-distinct", mutate(prod, epp_service_port("metrics", 9002)))
    assert (violation.resource, violation.level) == (f"Service/rebel100/{EPP}", "mandatory")
    assert violation.message == (
        "spec.ports[0] (grpc-ext-proc) 9002 and spec.ports[2] (metrics) 9002 both take port 9002 in the Service: a "
        "Service lists each port once: the API server refuses a second entry of one port (spec.ports: Duplicate "
        "value), and the program behind it cannot listen twice on one port either. Give each entry a port of its own."
    )


def test_two_container_ports_of_one_number_are_refused(prod):
    def edit(m):
        epp_container(m)["ports"][1]["containerPort"] = 9090

    (violation,) = run_policy("ports-distinct", mutate(prod, edit))
    assert (violation.resource, violation.message) == (
        EPP_ID,
        f"container epp ports[1] (grpc-health) 9090 and container epp ports[2] (metrics) 9090 both take port 9090 in "
        f"the pod: {POD_CLASH}",
    )


def test_an_engines_ranks_on_the_sidecars_ports_are_refused(prod):
    """The engine's ranks are read from its --port and DP size, the sidecar's from its flags."""
    (violation,) = run_policy("ports-distinct", mutate(prod, lambda m: set_arg(engine(m, DECODE), "--port", "8002")))
    assert (violation.resource, violation.message) == (
        DECODE_ID,
        "container vllm --port 8002-8005 and container routing-proxy --port 8000-8003 both take ports 8002-8003 in the "
        f"pod: {POD_CLASH}",
    )


def test_nixl_side_channels_on_the_rpc_port_are_refused(prod):
    (violation,) = run_policy(
        "ports-distinct", mutate(prod, lambda m: set_env(engine(m, DECODE), "VLLM_NIXL_SIDE_CHANNEL_PORT", "5553"))
    )
    assert (violation.resource, violation.message) == (
        DECODE_ID,
        "container vllm --data-parallel-rpc-port 5555 and container vllm VLLM_NIXL_SIDE_CHANNEL_PORT 5553-5556 both "
        f"take port 5555 in the pod: {POD_CLASH}",
    )


def test_ports_of_other_protocols_and_other_pods_pass(prod):
    """UDP has port numbers of its own; two pods (prefill and decode) have a network namespace each."""

    def edit(m):
        get(m, "Service", EPP)["spec"]["ports"].append({"name": "dns", "port": 9002, "protocol": "UDP"})
        epp_container(m)["ports"].append({"name": "dns", "containerPort": 9002, "protocol": "UDP"})
        set_arg(engine(m, PREFILL), "--port", "8200")

    assert run_policy("ports-distinct", mutate(prod, edit)) == []
