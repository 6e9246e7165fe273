"""The manifest readers every rule stands on (policy/read/env.py, pods.py), each read written out by hand from the
Kubernetes API's rules (issue 25: make mutate SCOPE=policy mutates the readers too)."""

import pytest

from policy.read.env import effective_env, env_flag_on, env_from_config_maps, env_value, parse_structured
from policy.read.flags import command_line, serve_argv
from policy.read.pods import pod_templates, replicas, routing_sidecars, service_account


def deployment(spec=None, **fields):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": spec or {"containers": []}}, **fields},
    }


def test_the_last_env_entry_of_a_name_wins():
    container = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "x"}, {"name": "A", "value": "2"}]}
    assert env_value(container, "A") == "2" and env_value(container, "C") is None
    later_from_a_secret = [{"name": "A", "value": "1"}, {"name": "A", "valueFrom": {"secretKeyRef": {}}}]
    assert env_value({"env": later_from_a_secret}, "A") is None
    assert env_value({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {}}}]}, "A") is None
    assert env_value({"env": [{"name": "N", "value": 3}]}, "N") == "3"


def test_env_from_config_maps_and_the_effective_env():
    """envFrom ConfigMaps in order (with their prefix), then env, which wins; ConfigMaps of other namespaces, missing
    ones and non-ConfigMap sources give nothing."""
    manifests = [
        {"kind": "ConfigMap", "metadata": {"name": "one", "namespace": "ns"}, "data": {"A": "cm", "B": "cm"}},
        {"kind": "ConfigMap", "metadata": {"name": "two", "namespace": "ns"}, "data": {"C": 3}},
        {"kind": "ConfigMap", "metadata": {"name": "one", "namespace": "other"}, "data": {"Z": "other"}},
    ]
    container = {
        "envFrom": [
            {"configMapRef": {"name": "one"}},
            {"secretRef": {"name": "s"}},
            {"configMapRef": {"name": "missing"}},
            {"configMapRef": {"name": "two"}, "prefix": "P_"},
            {"configMapRef": {}},
        ],
        "env": [{"name": "B", "value": "env"}, {"name": "D", "valueFrom": {"fieldRef": {}}}],
    }
    (template,) = pod_templates([deployment({"containers": [container]})])
    assert [c["metadata"]["name"] for c in env_from_config_maps(template, container, manifests)] == ["one", "two"]
    assert effective_env(template, container, manifests) == {"A": "cm", "B": "env", "P_C": "3"}


@pytest.mark.parametrize(
    "value, on",
    [
        ("1", True),
        ("true", True),
        (" True ", True),
        ("yes", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("", False),
        (None, False),
    ],
)
def test_a_flag_set_by_env(value, on):
    env = [] if value is None else [{"name": "F", "value": value}]
    assert env_flag_on({"env": env}, "F") is on


@pytest.mark.parametrize(
    "text, parsed",
    [('{"a": 1}', {"a": 1}), ("{a: 1}", {"a": 1}), ("[1, 2]", [1, 2]), ("a: [", None), ("plain", "plain")],
)
def test_structured_values_are_json_or_yaml(text, parsed):
    assert parse_structured(text) == parsed


def test_the_pod_template_of_every_workload_kind():
    spec = {"containers": [{"name": "c"}]}
    template = {"metadata": {"labels": {"x": "y"}}, "spec": spec}
    manifests = [
        {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec},
        {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": template}},
        {"kind": "CronJob", "metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": template}}}},
        {
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "l"},
            "spec": {"leaderWorkerTemplate": {"leaderTemplate": template, "workerTemplate": template}},
        },
        {"kind": "ConfigMap", "metadata": {"name": "m"}, "spec": spec},
        {"kind": "Deployment", "metadata": {"name": "no-spec"}, "spec": {"template": {"metadata": {}}}},
        {"kind": "Deployment", "metadata": {"name": "not-an-object"}, "spec": "template"},
        {"kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {"template": template}},
        {"kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {"template": template}},
        {"kind": "Job", "metadata": {"name": "j"}, "spec": {"template": template}},
        {"kind": "ReplicationController", "metadata": {"name": "rc"}, "spec": {"template": template}},
    ]
    assert [t.resource for t in pod_templates(manifests)] == [
        "Pod/p",
        "StatefulSet/s",
        "CronJob/c",
        "LeaderWorkerSet/l",
        "LeaderWorkerSet/l",
        "DaemonSet/d",
        "ReplicaSet/r",
        "Job/j",
        "ReplicationController/rc",
    ]
    assert [t.labels for t in pod_templates(manifests)][1:] == [{"x": "y"}] * 8


def test_a_pods_containers_then_its_init_containers():
    (template,) = pod_templates(
        [{"kind": "Pod", "spec": {"containers": [{"name": "a"}], "initContainers": [{"name": "b"}]}}]
    )
    assert [c["name"] for c in template.containers()] == ["a", "b"]
    assert [c["name"] for c in template.containers(init=False)] == ["a"]


def test_replicas_and_the_service_account_as_the_api_server_defaults_them():
    assert (
        replicas(deployment()) == 1 and replicas(deployment(replicas=0)) == 0 and replicas(deployment(replicas=3)) == 3
    )
    (named,) = pod_templates([deployment({"serviceAccountName": "a", "serviceAccount": "b", "containers": []})])
    (older,) = pod_templates([deployment({"serviceAccount": "b", "containers": []})])
    (none,) = pod_templates([deployment()])
    assert [service_account(t) for t in (named, older, none)] == ["a", "b", "default"]


@pytest.mark.parametrize(
    "container, is_sidecar",
    [
        ({"name": "proxy", "args": ["-vllm-port=8200"]}, True),
        ({"name": "proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"}, True),
        ({"name": "proxy", "image": "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"}, True),
        ({"name": "routing-proxy"}, True),
        ({"name": "proxy", "image": "envoy:v1"}, False),
        ({"name": "routing-proxy", "command": ["vllm", "serve"], "args": ["M"]}, False),  # an engine, whatever its name
    ],
    ids=["vllm-port-flag", "routing-sidecar-image", "disagg-sidecar-image", "its-name", "other", "an-engine"],
)
def test_a_routing_sidecar_is_known_by_its_flag_image_or_name(container, is_sidecar):
    (template,) = pod_templates([deployment({"containers": [container]})])
    sidecars = routing_sidecars(template)
    assert [(s.template, s.container) for s in sidecars] == ([(template, container)] if is_sidecar else [])
    assert template.role == ("decode" if is_sidecar else None)


# --- a container's `vllm serve` argv (policy/read/flags.py; the parsing of a command line: tests/core/test_cmdline.py)


@pytest.mark.parametrize(
    "container, argv",
    [
        ({"command": ["python3", "-m", "vllm.entrypoints.openai.api_server"], "args": ["M"]}, ["M"]),
        ({"command": ["vllm"], "args": ["serve"]}, []),
        ({"command": ["sh", "-c", "vllm\tserve M"]}, ["M"]),  # a tab between vllm and serve, as the shell splits it
        ({"command": ["sh", "-c", "exec vllm serve M --x 'unclosed"]}, None),  # shlex cannot split it
        ({"args": ["serve", "M"]}, None),  # the image's entrypoint: not in the manifest
        ({"command": ["vllm", "bench", "serve", "--port", "8000"]}, None),  # vLLM's benchmark client, no engine
        ({"command": ["/usr/bin/vllm", "serve", "M"]}, ["M"]),
    ],
    ids=["api-server-module", "no-args", "tab", "unclosed-quote", "entrypoint", "bench-client", "vllm-by-path"],
)
def test_the_vllm_serve_argv_of_a_container(container, argv):
    assert serve_argv(container) == argv


def test_a_shell_form_is_split_only_when_it_runs_vllm_serve():
    assert command_line({"command": ["sh", "-c", "echo a b"], "args": [1]}) == ["sh", "-c", "echo a b", "1"]
    assert command_line({"command": ["sh", "-c", "vllm serve M --port 1"]}) == [
        "sh",
        "-c",
        "vllm",
        "serve",
        "M",
        "--port",
        "1",
    ]
    # the words after the shell form stay (sh passes them to the script as $0, $1)
    words = command_line({"command": ["sh", "-c", "vllm serve M"], "args": ["sh", "x"]})
    assert words == ["sh", "-c", "vllm", "serve", "M", "sh", "x"]


def test_an_objects_id_and_namespace_as_messages_name_them():
    from policy.read.objects import namespace_of, resource_id

    assert resource_id({"kind": "Pod", "metadata": {"name": "p", "namespace": "n"}}) == "Pod/n/p"
    assert resource_id({"kind": "ClusterRole", "metadata": {"name": "r"}}) == "ClusterRole/r"
    assert resource_id({}) == "?/?"  # neither kind nor name
    assert namespace_of({"metadata": {"name": "p"}}) == "default"  # the API server's default
    assert namespace_of({"metadata": {"namespace": "n"}}) == "n"


# --- engines and their LMCache (policy/read/engines.py, lmcache.py) ------------------------------------------------


def one_engine(args, image="rebellions/vllm-rbln:0.12.0", annotations=None):
    from policy.read.engines import engines

    manifest = deployment({"containers": [{"name": "e", "image": image, "command": ["vllm", "serve"], "args": args}]})
    manifest["spec"]["template"]["metadata"]["annotations"] = annotations or {}
    (engine,) = engines([manifest])
    return engine


@pytest.mark.parametrize(
    "args, model, tp, pp, dp, dp_local, port, devices",
    [
        (["M"], "M", 1, 1, 1, 1, 8000, 1),
        (["--model", "N", "-tp", "2", "-pp", "2", "-dp", "4", "--port", "9000"], "N", 2, 2, 4, 4, 9000, 16),
        (["M", "--data-parallel-size", "4", "--data-parallel-size-local", "2"], "M", 1, 1, 4, 2, 8000, 2),
        (["--tensor-parallel-size", "two"], None, None, 1, 1, 1, 8000, None),
        (["--enforce-eager", "M", "-tp", "2"], "M", 2, 1, 1, 1, 8000, 2),  # a store_true flag takes no value
    ],
    ids=["defaults", "aliases-and-model-flag", "dp-local", "unreadable", "boolean-before-the-model"],
)
def test_an_engines_parallelism_and_port_with_vllms_defaults(args, model, tp, pp, dp, dp_local, port, devices):
    engine = one_engine(args)
    assert (engine.model, engine.tp, engine.pp, engine.dp, engine.dp_local, engine.port, engine.devices) == (
        model,
        tp,
        pp,
        dp,
        dp_local,
        port,
        devices,
    )
    assert (engine.name, engine.resource, engine.role) == ("e", "Deployment/ns/d", None)


def test_the_lmcache_rbln_version_an_engine_runs():
    from core.labels import LMCACHE_VERSION_ANNOTATION
    from policy.read.lmcache import lmcache_version

    shipped = lmcache_version(one_engine(["M"]))
    assert shipped[0] is not None and shipped[1] == (
        f"image rebellions/vllm-rbln:0.12.0, which ships lmcache-rbln {shipped[0]}"
    )
    annotated = one_engine(["M"], image="vllm/vllm-openai:v0.9.0", annotations={LMCACHE_VERSION_ANNOTATION: "0.3.1"})
    assert lmcache_version(annotated) == ("0.3.1", f"annotation {LMCACHE_VERSION_ANNOTATION} 0.3.1")
    assert lmcache_version(one_engine(["M"], image="lmcache/vllm-openai:v0.3.5")) == (
        "v0.3.5",
        "image lmcache/vllm-openai:v0.3.5",
    )
    assert lmcache_version(one_engine(["M"], image="lmcache/vllm-openai")) == (None, "")
    assert lmcache_version(one_engine(["M"], image="vllm/vllm-openai:v0.9.0")) == (None, "")


def test_an_untagged_vllm_rbln_image_ships_no_known_lmcache():
    from policy.read.lmcache import lmcache_version

    assert lmcache_version(one_engine(["M"], image="rebellions/vllm-rbln")) == (None, "")


def test_extended_resources_add_up_and_limits_come_before_requests():
    from policy.read.devices import extended_devices

    container = {
        "resources": {
            "limits": {"nvidia.com/gpu": "2", "amd.com/gpu": 1},
            "requests": {"nvidia.com/gpu": "8", "habana.ai/gaudi": "0"},
        }
    }
    got = extended_devices(container, ["nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi"])
    assert (got.count, got.sources, got.problems) == (
        3,
        ["limits nvidia.com/gpu 2", "limits amd.com/gpu 1"],
        [],
    )


# --- the ports a pod serves a pool on (policy.read.pool.front_ports), worked out from the programs' flags ---------


def pod_of(*containers: dict) -> list[dict]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {"containers": list(containers)},
        }
    ]


def sidecar_with(*args: str) -> dict:
    return {"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1", "args": list(args)}


def vllm_with(*args: str) -> dict:
    return {"name": "vllm", "command": ["vllm", "serve"], "args": ["m", *args]}


@pytest.mark.parametrize(
    "container, ports",
    [
        # the sidecar: --port, then one port per rank above the first (v0.7.1 data_parallel.go: range size - 1)
        (sidecar_with("--port=8100", "--data-parallel-size=4"), [8100, 8101, 8102, 8103]),
        (sidecar_with("--data-parallel-size=2"), [8000, 8001]),  # --port's default 8000
        (sidecar_with("--port=8100", "--data-parallel-size=0"), [8100]),  # range -1: no rank above the first
        (sidecar_with("--port=8100", "--data-parallel-size=-2"), [8100]),
        (sidecar_with("--port=eight", "--data-parallel-size=4"), []),  # not a port: it never listens
        (sidecar_with("--port=8100", "--data-parallel-size=four"), []),  # flag.IntVar refuses it: exit 2
        # an engine: its --port, or one port per local rank with per-rank ports
        (vllm_with("--port", "8200"), [8200]),
        (vllm_with(), [8000]),  # vLLM's default port
        (vllm_with("--port", "8200", "--data-parallel-size-local", "4"), [8200]),  # one API server
        (
            vllm_with("--port", "8200", "--data-parallel-size-local", "2", "--data-parallel-multi-port-external-lb"),
            [8200, 8201],
        ),
        (vllm_with("--port", "8200", "--data-parallel-size-local", "0", "--data-parallel-multi-port-external-lb"), []),
        (
            vllm_with("--port", "8200", "--data-parallel-size-local", "two", "--data-parallel-multi-port-external-lb"),
            [],
        ),
        (vllm_with("--port", "eight"), []),  # argparse refuses it: vLLM never starts
    ],
    ids=[
        "sidecar-4-ranks",
        "sidecar-default-port",
        "sidecar-size-0",
        "sidecar-size-negative",
        "sidecar-port-unreadable",
        "sidecar-size-unreadable",
        "engine-port",
        "engine-default-port",
        "engine-ranks-without-per-rank-ports",
        "engine-per-rank-ports",
        "engine-no-local-rank",
        "engine-ranks-unreadable",
        "engine-port-unreadable",
    ],
)
def test_the_ports_a_pod_serves_a_pool_on(container, ports):
    from policy.read.pool import front_ports

    (template,) = pod_templates(pod_of(container))
    assert front_ports(template) == ports


def test_a_pod_of_two_engines_serves_on_the_ports_of_both():
    from policy.read.pool import front_ports

    per_rank = ("--data-parallel-size-local", "2", "--data-parallel-multi-port-external-lb")
    second = {**vllm_with("--port", "8300", *per_rank), "name": "vllm-2"}
    (template,) = pod_templates(pod_of(vllm_with("--port", "8200"), second))
    assert front_ports(template) == [8200, 8300, 8301]


# --- which pod template is the EPP (policy.security.is_epp), from hand-written objects --------------------------------


def epp_pod(*args: str, labels: dict | None = None, namespace: str = "n") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "router", "namespace": namespace},
        "spec": {
            "template": {
                "metadata": {"labels": labels or {"app": "router"}},
                "spec": {"containers": [{"name": "epp", "image": "epp:v1", "args": list(args)}]},
            }
        },
    }


def v1_pool(epp: str | None, namespace: str = "n") -> dict:
    spec: dict = {"selector": {"matchLabels": {"app": "engine"}}, "targetPorts": [{"number": 8000}]}
    if epp is not None:
        spec["endpointPickerRef"] = {"name": epp, "port": {"number": 9002}}
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "pool", "namespace": namespace},
        "spec": spec,
    }


def service(name: str, selector: dict | None, namespace: str = "n") -> dict:
    spec = {} if selector is None else {"selector": selector}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


ROUTER = {"app": "router"}


@pytest.mark.parametrize(
    "others, args, expected",
    [
        ([], ["--pool-name", "pool"], True),
        ([], ["--pool-name=pool"], True),
        ([], ["-pool-name=pool"], True),  # Go's flag package takes one dash too
        ([], ["--pool-namespace", "n"], False),
        ([v1_pool("epp"), service("epp", ROUTER)], [], True),  # the pool's endpoint picker Service selects it
        ([v1_pool("epp"), service("epp", {"app": "router", "tier": "x"})], [], False),  # a label it lacks
        ([v1_pool("epp"), service("other", ROUTER)], [], False),  # another Service
        ([v1_pool("epp"), service("epp", ROUTER, namespace="m")], [], False),  # the Service of another namespace
        ([v1_pool("epp", namespace="m"), service("epp", ROUTER)], [], False),  # a pool of another namespace
        ([v1_pool(None), service("epp", ROUTER)], [], False),  # a pool that names no endpoint picker
        ([v1_pool("epp"), service("epp", None)], [], False),  # a Service without a selector selects nothing
        ([v1_pool("epp"), service("other", ROUTER), service("epp", ROUTER)], [], True),  # past another Service
        ([v1_pool("x", namespace="m"), v1_pool("epp"), service("epp", ROUTER)], [], True),  # past another pool
        ([v1_pool("x"), v1_pool("epp"), service("epp", ROUTER)], [], True),  # past a pool naming another Service
        ([], [], False),
    ],
    ids=[
        "pool-name-flag",
        "pool-name-equals",
        "pool-name-single-dash",
        "another-flag",
        "selected-by-the-pools-service",
        "service-selects-a-label-it-lacks",
        "another-service",
        "service-of-another-namespace",
        "pool-of-another-namespace",
        "pool-without-endpoint-picker",
        "service-without-selector",
        "past-another-service",
        "past-a-pool-of-another-namespace",
        "past-a-pool-naming-another-service",
        "nothing",
    ],
)
def test_which_pod_template_is_the_epp(others, args, expected):
    from policy.security import is_epp

    manifests = [*others, epp_pod(*args)]
    (template,) = pod_templates(manifests)
    assert is_epp(template, manifests) is expected


# --- name lists (policy/read/objects.py) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "names, limit, shown",
    [
        (["c", "a", "b", "a"], None, "a, b, c"),  # sorted, each once
        (["d", "c", "b", "a"], None, "a, b, c and 1 more"),  # 3 by default
        (["c", "b", "a"], 2, "a, b and 1 more"),
        (["e", "d", "c", "b", "a"], 2, "a, b and 3 more"),
        (["b", "a"], 2, "a, b"),  # as many as the limit: no "more"
        ([], None, ""),
    ],
)
def test_a_name_list_shows_the_first_names_and_counts_the_rest(names, limit, shown):
    from policy.read.objects import name_list

    assert (name_list(names) if limit is None else name_list(names, limit)) == shown


# --- devices a container claims through DRA (policy/read/devices.py), by hand from the resource.k8s.io/v1 rules -------


def claim_template(name: str, *requests: tuple[str, str, int]) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "n"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": r, "exactly": {"deviceClassName": cls, "count": count}} for r, cls, count in requests
                    ]
                }
            }
        },
    }


def claiming_pod(*claims: dict) -> dict:
    """A pod whose one container claims `claims`; it declares `npus` (template rct) and `gone` (template absent)."""
    container = {"name": "engine", "image": "e:1", "resources": {"claims": list(claims)}}
    pod_claims = [
        {"name": "npus", "resourceClaimTemplateName": "rct"},
        {"name": "gone", "resourceClaimTemplateName": "absent"},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {"containers": [container], "resourceClaims": pod_claims},
    }


RCT = claim_template("rct", ("first", "npu", 4), ("second", "npu", 2), ("nic", "rdma", 1))


@pytest.mark.parametrize(
    "claims, count, requests, problems, unresolved",
    [
        ([{"name": "npus"}], 6, ["first", "second"], 0, 0),  # every request of the claim
        ([{"name": "npus", "request": "second"}], 2, ["second"], 0, 0),  # the one request named
        ([{"name": "npus", "request": "first"}], 4, ["first"], 0, 0),
        ([{"name": "npus", "request": "nic"}], 0, [], 0, 0),  # a request of another class
        ([{"name": "missing"}, {"name": "npus"}], 6, ["first", "second"], 1, 0),  # past a claim the pod lacks
        ([{"name": "gone"}, {"name": "npus"}], 6, ["first", "second"], 0, 1),  # past a template not among them
    ],
    ids=["whole-claim", "one-request", "first-request", "other-class", "past-missing", "past-unresolved"],
)
def test_the_devices_a_container_claims(claims, count, requests, problems, unresolved):
    from policy.read.devices import claimed_devices, claimed_npus

    pod = claiming_pod(*claims)
    (template,) = pod_templates([pod])
    container = pod["spec"]["containers"][0]
    found = claimed_devices(template, [RCT, pod], ("npu",), container)
    assert found.count == count
    assert [s.split("requests[")[1].split("]")[0] for s in found.sources] == requests
    assert (len(found.problems), len(found.unresolved)) == (problems, unresolved)
    assert claimed_npus(template, [RCT, pod], "npu", container).count == count


def test_the_devices_a_pod_claims_add_up_over_its_claims():
    from policy.read.devices import claimed_devices

    pod = claiming_pod()
    pod["spec"]["resourceClaims"][1] = {"name": "more", "resourceClaimTemplateName": "other"}
    other = claim_template("other", ("third", "npu", 8))
    (template,) = pod_templates([pod])
    found = claimed_devices(template, [RCT, other, pod], ("npu",))
    assert found.count == 14
    assert found.sources == [
        "ResourceClaimTemplate rct spec.spec.devices.requests[first].exactly.count 4 (deviceClassName npu)",
        "ResourceClaimTemplate rct spec.spec.devices.requests[second].exactly.count 2 (deviceClassName npu)",
        "ResourceClaimTemplate other spec.spec.devices.requests[third].exactly.count 8 (deviceClassName npu)",
    ]


def test_the_epp_configs_of_config_maps_past_other_data():
    from policy.read.pool import epp_configs

    config = "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins: []\n"
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n"},
        # a number (the API server would refuse it, the pack sees it first), other YAML, the word in a comment
        "data": {"n": 1, "other": "kind: Other\n", "note": "# EndpointPickerConfig\nkind: Other\n", "epp.yaml": config},
    }
    parsed = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "EndpointPickerConfig", "plugins": []}
    assert epp_configs([config_map]) == [(config_map, "epp.yaml", parsed)]
