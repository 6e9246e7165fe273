"""The router's objects against values written out by hand (issue 25): the EPP's Deployment, its access to the API,
its EndpointPickerConfig ConfigMap, its disruption budget and the InferencePool, and the bounds on the pool's ports.

Literals from the reference design (docs/what-it-deploys.md, the llm-d router's chart: the EPP reads pods, pools and
objectives in its namespace, answers gRPC health on 9003 for the service `inference-extension`), never the result of
a call into core/ or objects/; `make mutate SCOPE=objects` found each of them unchecked.
"""

from __future__ import annotations

import pytest

from core.gate import load_config
from objects.router import router
from objects.stack import stack_objects
from tests import defaults
from tests.conftest import stack_config

NS, STACK = "rebel100", "minimax-m27"
REFERENCE = defaults.config(STACK, NS)
EPP, POOL = f"{STACK}-epp", f"{STACK}-pool"
LABELS = {"app.kubernetes.io/part-of": STACK, "app.kubernetes.io/name": EPP, "app.kubernetes.io/component": "router"}
META = {"name": EPP, "namespace": NS, "labels": LABELS, "annotations": {"pulumi.com/patchForce": "true"}}
RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def children_of(stack: str, **overrides) -> dict[tuple[str, str], object]:
    cfg = load_config(stack_config(stack, **overrides))
    return {(child.kind, child.name): child for child in stack_objects(cfg).children()}


def test_the_epp_deployment_written_out():
    children = children_of("prod-4p4d")
    child = children[("Deployment", EPP)]
    assert (child.resource_name, child.after) == (EPP, (f"{EPP}-config", f"{EPP}-tls"))
    deployment = child.manifest
    assert (deployment["apiVersion"], deployment["metadata"]) == ("apps/v1", META)
    spec = deployment["spec"]
    assert (spec["replicas"], spec["selector"]) == (1, {"matchLabels": LABELS})
    assert spec["template"]["metadata"] == {"labels": LABELS}
    pod = spec["template"]["spec"]
    (epp,) = pod.pop("containers")
    assert pod == {
        "serviceAccountName": EPP,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "terminationGracePeriodSeconds": 40,  # the 30 s drain (test_shapes.py), then 10 s to stop
        "volumes": [
            {"name": "config", "configMap": {"name": f"{EPP}-config"}},
            {"name": "tls", "secret": {"secretName": f"{EPP}-tls"}},
        ],
    }
    epp.pop("args")  # test_shapes.py writes the args out
    assert epp == {
        "name": "epp",
        "image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
        "ports": [
            {"name": "grpc", "containerPort": 9002, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": 9003, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
        ],
        # Ready only once the ext_proc port listens (the health service says SERVING before it does).
        "startupProbe": {"tcpSocket": {"port": 9002}, "periodSeconds": 2, "failureThreshold": 60},
        "readinessProbe": {"grpc": {"port": 9003, "service": "inference-extension"}, "periodSeconds": 5},
        "livenessProbe": {"grpc": {"port": 9003, "service": "inference-extension"}, "periodSeconds": 10},
        "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/epp", "readOnly": True},
            {"name": "tls", "mountPath": "/etc/epp-tls", "readOnly": True},
        ],
        "securityContext": RESTRICTED,
    }


def test_the_epp_certificate_is_a_tls_secret_kept_from_its_creation():
    """`router.certificate: stack`: the Secret the EPP's `--cert-path` reads, its data set once (Pulumi keeps the
    first certificate; the program makes a new one at every run); `epp`: none, and the EPP makes its own."""
    secret = children_of("prod-4p4d")[("Secret", f"{EPP}-tls")]
    assert secret.manifest == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": META | {"name": f"{EPP}-tls"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "W3NlY3JldF0=", "tls.key": "W3NlY3JldF0="},  # base64 "[secret]": the render's
    }
    assert (secret.resource_name, secret.keep_inputs) == (f"{EPP}-tls", ("data",))
    own = children_of("prod-4p4d", router={"certificate": "epp"})
    assert ("Secret", f"{EPP}-tls") not in own
    pod = own[("Deployment", EPP)].manifest["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["config"]
    assert not [a for a in pod["containers"][0]["args"] if a.startswith("--cert-path")]


def test_the_epp_reads_pods_pools_and_objectives_in_its_namespace():
    children = children_of("prod-4p4d")
    account, role, binding = (children[(kind, EPP)] for kind in ("ServiceAccount", "Role", "RoleBinding"))
    assert account.manifest == {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": META}
    read = ["get", "list", "watch"]
    assert role.manifest == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": META,
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": read},
            {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": read},
            {"apiGroups": ["inference.networking.x-k8s.io"], "resources": ["inferenceobjectives"], "verbs": read},
        ],
    }
    assert binding.manifest == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": META,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": EPP},
        "subjects": [{"kind": "ServiceAccount", "name": EPP, "namespace": NS}],
    }
    assert [c.resource_name for c in (account, role, binding)] == [f"{EPP}-sa", f"{EPP}-role", f"{EPP}-rolebinding"]
    assert binding.after == (f"{EPP}-sa", f"{EPP}-role")


def test_the_epp_checks_scrape_tokens_through_a_cluster_role_of_the_namespace_and_stack():
    children = children_of("prod-4p4d")
    name = f"{NS}-{STACK}-epp-metrics-auth"
    cluster_meta = {"name": name, "labels": LABELS, "annotations": {"pulumi.com/patchForce": "true"}}
    role, binding = children[("ClusterRole", name)], children[("ClusterRoleBinding", name)]
    assert role.manifest["metadata"] == cluster_meta and role.resource_name == f"{EPP}-metrics-auth"
    assert (role.manifest["apiVersion"], role.manifest["kind"]) == ("rbac.authorization.k8s.io/v1", "ClusterRole")
    assert binding.manifest == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": cluster_meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": EPP, "namespace": NS}],
    }
    assert (binding.resource_name, binding.after) == (
        f"{EPP}-metrics-auth-binding",
        (f"{EPP}-sa", f"{EPP}-metrics-auth"),
    )


def test_the_endpoint_picker_config_is_one_yaml_file_in_the_order_it_is_written():
    child = children_of("prod-4p4d")[("ConfigMap", f"{EPP}-config")]
    assert child.resource_name == f"{EPP}-config"
    config_map = child.manifest
    assert (config_map["apiVersion"], config_map["metadata"]) == ("v1", {**META, "name": f"{EPP}-config"})
    (name,) = config_map["data"]
    assert name == "epp-config.yaml"
    # As built, not sorted: the header, then each plugin's type before its parameters.
    assert config_map["data"][name].startswith(
        "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n"
        "- type: approx-prefix-cache-producer\n  parameters:\n"
    )


def test_the_epp_budget_and_the_service_and_the_pool_after_it():
    children = children_of("prod-4p4d", rollout={"maxUnavailable": 2})
    budget = children[("PodDisruptionBudget", EPP)]
    assert budget.resource_name == f"{EPP}-pdb"
    assert budget.manifest == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": META,
        "spec": {"maxUnavailable": 2, "selector": {"matchLabels": LABELS}},  # rollout.maxUnavailable: every role's
    }
    service = children[("Service", EPP)]
    assert service.resource_name == f"{EPP}-svc"
    assert (service.manifest["apiVersion"], service.manifest["metadata"]) == ("v1", META)
    assert service.manifest["spec"]["type"] == "ClusterIP"
    pool = children[("InferencePool", POOL)]
    assert (pool.resource_name, pool.after) == (POOL, (f"{EPP}-svc",))
    assert pool.manifest["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool.manifest["metadata"] == {
        "name": POOL,
        "namespace": NS,
        "labels": {"app.kubernetes.io/part-of": STACK},
        "annotations": {"pulumi.com/patchForce": "true"},
    }
    # Every serving pod of the stack, whatever its role.
    assert pool.manifest["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/part-of": STACK, "llm-d.ai/inference-serving": "true"}
    }


def test_the_epp_replicas_and_failure_mode_of_the_router_args():
    children = {
        (child.kind, child.name): child.manifest
        for child in router(
            "r", defaults.router_args(REFERENCE, target_ports=[8000], replicas=2, failure_mode="FailOpen")
        )
    }
    assert children[("Deployment", EPP)]["spec"]["replicas"] == 2
    assert children[("InferencePool", POOL)]["spec"]["endpointPickerRef"]["failureMode"] == "FailOpen"


def test_a_pool_of_no_port_is_refused():
    with pytest.raises(ValueError) as error:
        router("r", defaults.router_args(REFERENCE, target_ports=[]))
    assert str(error.value) == "Router r: the pool needs at least one target port."


def test_a_pool_of_more_than_eight_ports_is_rendered_for_the_gates_to_refuse():
    """At most 8 target ports is a rule of the config gate and the pack (core.rules.pool_target_ports_fit), judged
    on the render as a hand edit would leave it."""
    children = {
        (c.manifest["kind"], c.manifest["metadata"]["name"]): c.manifest
        for c in router("r", defaults.router_args(REFERENCE, target_ports=list(range(8000, 8009))))
    }
    assert [p["number"] for p in children[("InferencePool", POOL)]["spec"]["targetPorts"]] == list(range(8000, 8009))


def test_eight_target_ports_are_the_most_a_pool_takes():
    ports = list(range(8000, 8008))
    (pool,) = [c for c in router("r", defaults.router_args(REFERENCE, target_ports=ports)) if c.kind == "InferencePool"]
    assert pool.manifest["spec"]["targetPorts"] == [{"number": port} for port in range(8000, 8008)]


PRECISE = load_config(stack_config("prod-4p4d", router={"prefixCache": "precise", "blockSizeTokens": 512}))


def test_a_precise_epp_pod_tokenizes_beside_the_epp_from_the_engines_weights():
    """`vllm launch render` of the served model at its revision, offline from the weights volume the engines read
    (read-only, after the same wait), listening on router.tokenizerPort; the EPP's own container is unchanged."""
    children = {(c.kind, c.name): c.manifest for c in router("r", defaults.router_args(PRECISE))}
    spec = children[("Deployment", EPP)]["spec"]["template"]["spec"]
    plain = {(c.kind, c.name): c.manifest for c in router("r", defaults.router_args(REFERENCE))}
    epp, tokenizer = spec["containers"]
    assert epp == plain[("Deployment", EPP)]["spec"]["template"]["spec"]["containers"][0]
    assert tokenizer["name"] == "tokenizer"
    assert tokenizer["image"] == "vllm/vllm-openai-cpu:v0.30.0"
    assert tokenizer["command"] == ["vllm", "launch", "render"]
    assert tokenizer["args"] == [
        "MiniMaxAI/MiniMax-M2.7",
        "--revision",
        "main",
        "--max-model-len",
        "204800",
        "--port",
        "8000",
    ]
    assert {e["name"]: e["value"] for e in tokenizer["env"]} == {
        "HF_HOME": "/models",
        "HF_HUB_OFFLINE": "1",
        "HOME": "/tmp",
        "VLLM_CACHE_ROOT": "/tmp/vllm",
    }
    assert tokenizer["readinessProbe"] == {"tcpSocket": {"port": 8000}, "periodSeconds": 5}
    assert {"name": "model", "mountPath": "/models", "readOnly": True} in tokenizer["volumeMounts"]
    assert tokenizer["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "model-weights", "readOnly": True}} in spec[
        "volumes"
    ]
    assert [c["name"] for c in spec["initContainers"]] == ["wait-for-weights"]
    assert "initContainers" not in plain[("Deployment", EPP)]["spec"]["template"]["spec"]


def test_a_precise_stack_lets_the_epp_and_nothing_else_reach_each_engine_ranks_kv_events():
    policies = {c.name: c.manifest for c in stack_objects(PRECISE).network.children if c.kind == "NetworkPolicy"}
    epp = {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/component": "router",
                "app.kubernetes.io/name": "minimax-m27-epp",
                "app.kubernetes.io/part-of": "minimax-m27",
            }
        }
    }
    for name, ports in (("minimax-m27-decode", [5557, 5558, 5559, 5560]), ("minimax-m27-prefill", [5557])):
        rules = [r for r in policies[name]["spec"]["ingress"] if {p["port"] for p in r["ports"]} & {5557}]
        assert rules == [{"from": [epp], "ports": [{"port": p, "protocol": "TCP"} for p in ports]}], name
