"""The engine pools' objects against values written out by hand (issue 25), part two: what test_shapes.py leaves out.

The KEDA ScaledObject of an autoscaled role (keda.sh/v1alpha1, crds/keda.sh_scaledobjects.yaml: scaleTargetRef,
pollingInterval, min/maxReplicaCount, advanced.horizontalPodAutoscalerConfig.behavior, one prometheus trigger with
metricType AverageValue and its metadata serverAddress, query, threshold), the Deployment's head (replicas, the
waitFor annotation, strategy), the pod's security contexts, volumes, mounts, probe timings and the wait-for-weights
init container, the disruption budget, the compile-cache claim and the download Job of the weights. Each value is a
literal from the reference design (docs/what-it-deploys.md, docs/model-weights.md, the defaults of core/config.py as
the docs state them), never the result of a call into core/ or objects/, so a builder that computes a wrong value
fails here. `mutmut` found each of these unchecked (`make mutate SCOPE=objects`).
"""

from __future__ import annotations

import re

import pytest

from core.gate import load_config
from objects.stack import stack_objects
from tests.conftest import stack_config

NS, STACK = "rebel100", "minimax-m27"
PREFILL, DECODE = f"{STACK}-prefill", f"{STACK}-decode"
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"


def children_of(stack: str, **overrides) -> dict[tuple[str, str], object]:
    """The stack's children (manifest and how Pulumi registers it) by (kind, name), the config through the gate."""
    cfg = load_config(stack_config(stack, **overrides))
    return {(child.kind, child.name): child for child in stack_objects(cfg).children()}


def objects_of(stack: str, **overrides) -> dict[tuple[str, str], dict]:
    return {key: child.manifest for key, child in children_of(stack, **overrides).items()}


def pool_labels(role: str, pool: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/component": role,
        "app.kubernetes.io/name": f"{STACK}-{role}",
        "app.kubernetes.io/part-of": STACK,
        "llm-d.ai/inference-serving": "true",
        "llm-d.ai/role": role,
        "rebel100.ai/pool": pool,
    }


def pool_pods(pool: str) -> str:
    """The pods of one Deployment, `<pool>-<replicaset hash>-<suffix>` (not those of `<pool>-g0`)."""
    return f'pod=~"{pool}-[a-z0-9]+-[a-z0-9]+"'


def engine_queue(pool: str) -> str:
    return f'sum(vllm:num_requests_waiting{{namespace="{NS}",{pool_pods(pool)}}}) or vector(0)'


def kv_cache_usage(pool: str) -> str:
    # Each DP rank reports its own share: averaged per pod first, so the target is one pod's.
    return f'sum(avg by (pod) (vllm:kv_cache_usage_perc{{namespace="{NS}",{pool_pods(pool)}}})) or vector(0)'


def scaled_object(
    role: str,
    pool: str,
    *,
    low: int,
    high: int,
    query: str,
    threshold: str,
    up: int = 0,
    down: int = 300,
    polling: int = 15,
    server: str = PROMETHEUS,
) -> dict:
    """A ScaledObject as KEDA v2.18's CRD takes it, written out in full."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {
            "name": pool,
            "namespace": NS,
            "labels": pool_labels(role, pool),
            "annotations": {"pulumi.com/patchForce": "true"},
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": pool},
            "pollingInterval": polling,
            "minReplicaCount": low,
            "maxReplicaCount": high,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleUp": {"stabilizationWindowSeconds": up},
                        "scaleDown": {"stabilizationWindowSeconds": down},
                    }
                }
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {"serverAddress": server, "query": query, "threshold": threshold},
                }
            ],
        },
    }


# --- the KEDA ScaledObject --------------------------------------------------------------------------------------------


def test_prod_autoscale_scales_prefill_on_its_queue_and_decode_on_its_kv_cache():
    """Pulumi.prod-autoscale.yaml: both roles 1 to 4 pods; prefill's default signal engineQueue (2 waiting per pod),
    decode's kvCacheUsage (0.8 per pod); the windows 0 s up, 300 s down; KEDA polls every 15 s."""
    found = objects_of("prod-autoscale")
    assert found[("ScaledObject", PREFILL)] == scaled_object(
        "prefill", PREFILL, low=1, high=4, query=engine_queue(PREFILL), threshold="2"
    )
    assert found[("ScaledObject", DECODE)] == scaled_object(
        "decode", DECODE, low=1, high=4, query=kv_cache_usage(DECODE), threshold="0.8"
    )


def test_a_stack_without_autoscaling_has_no_scaled_object():
    assert [key for key in objects_of("prod-4p4d") if key[0] == "ScaledObject"] == []


def test_two_node_groups_split_the_bounds_and_each_pool_reads_its_own_pods():
    """Groups 2: each pool's ScaledObject targets its own Deployment with half the role's bounds; the engine signals
    read that pool's pods; the EPP's decision rate (one EPP for all groups) is split evenly between the pools."""
    found = objects_of(
        "prod-autoscale",
        placement={"groups": 2},
        prefill={"autoscaling": {"minReplicas": 2, "maxReplicas": 4, "metric": "pdDecisionRate"}},
        decode={"autoscaling": {"minReplicas": 2, "maxReplicas": 4, "target": 0.25}},
    )
    decisions = (
        '(sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100",decision_type="prefill-decode"}[2m])) / 2)'
        " or vector(0)"
    )
    children = children_of(
        "prod-autoscale",
        placement={"groups": 2},
        prefill={"autoscaling": {"minReplicas": 2, "maxReplicas": 4, "metric": "pdDecisionRate"}},
        decode={"autoscaling": {"minReplicas": 2, "maxReplicas": 4, "target": 0.25}},
    )
    for group in ("g0", "g1"):
        prefill, decode = f"{PREFILL}-{group}", f"{DECODE}-{group}"
        # One Pulumi resource of each kind per group, named after the role's component and the group.
        for pool in (prefill, decode):
            assert children[("Deployment", pool)].resource_name == pool
            assert children[("PodDisruptionBudget", pool)].resource_name == f"{pool}-pdb"
            assert children[("ScaledObject", pool)].resource_name == f"{pool}-scaledobject"
            assert children[("ScaledObject", pool)].after == (pool,)
        assert found[("ScaledObject", prefill)] == scaled_object(
            "prefill", prefill, low=1, high=2, query=decisions, threshold="1"
        )
        assert found[("ScaledObject", decode)] == scaled_object(
            "decode", decode, low=1, high=2, query=kv_cache_usage(decode), threshold="0.25"
        )
    assert ("ScaledObject", PREFILL) not in found and ("ScaledObject", DECODE) not in found


def test_one_group_reads_the_epp_decision_rate_undivided_under_the_router_generation_it_runs():
    """The v0.7 EPP (pd-router07's pin) counts its decisions under the llm_d_inference_scheduler_ name."""
    found = objects_of(
        "prod-autoscale",
        router={"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"},
        decode={"sidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"}},
        prefill={"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "pdDecisionRate"}},
    )
    query = (
        'sum(rate(llm_d_inference_scheduler_disagg_decision_total{namespace="rebel100",'
        'decision_type="prefill-decode"}[2m])) or vector(0)'
    )
    assert found[("ScaledObject", PREFILL)] == scaled_object(
        "prefill", PREFILL, low=1, high=4, query=query, threshold="1"
    )


def test_the_windows_the_polling_the_target_and_the_prometheus_of_the_config_reach_the_scaled_object():
    found = objects_of(
        "prod-autoscale",
        decode={
            "autoscaling": {
                "minReplicas": 1,
                "maxReplicas": 3,
                "metric": "engineQueue",
                "target": 1.5,
                "scaleUpStabilizationSeconds": 30,
                "scaleDownStabilizationSeconds": 600,
                "pollingIntervalSeconds": 5,
            }
        },
        observability={"prometheusAddress": "http://prometheus.example:9091"},
    )
    assert found[("ScaledObject", DECODE)] == scaled_object(
        "decode",
        DECODE,
        low=1,
        high=3,
        query=engine_queue(DECODE),
        threshold="1.5",
        up=30,
        down=600,
        polling=5,
        server="http://prometheus.example:9091",
    )
    # The other Prometheus is every trigger's, the defaults stay prefill's.
    prefill = found[("ScaledObject", PREFILL)]["spec"]
    assert prefill["triggers"][0]["metadata"]["serverAddress"] == "http://prometheus.example:9091"
    assert (prefill["pollingInterval"], prefill["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]) == (
        15,
        {"scaleUp": {"stabilizationWindowSeconds": 0}, "scaleDown": {"stabilizationWindowSeconds": 300}},
    )


def test_the_monitoring_namespace_names_the_default_prometheus():
    found = objects_of("prod-autoscale", security={"monitoringNamespace": "observe"})
    trigger = found[("ScaledObject", DECODE)]["spec"]["triggers"][0]
    assert trigger["metadata"]["serverAddress"] == "http://prometheus-operated.observe.svc:9090"


def test_an_autoscaled_deployment_leaves_its_count_to_keda_and_waits_for_the_rollout_reason():
    """No spec.replicas (server-side apply must not own it), and `up` waits for the controller's
    NewReplicaSetAvailable; the ScaledObject is created after its Deployment."""
    children = children_of("prod-autoscale")
    for pool in (PREFILL, DECODE):
        deployment = children[("Deployment", pool)].manifest
        assert "replicas" not in deployment["spec"]
        assert deployment["metadata"]["annotations"] == {
            "pulumi.com/patchForce": "true",
            "pulumi.com/waitFor": '["jsonpath={.status.conditions[?(@.type==\\"Progressing\\")].reason}'
            '=NewReplicaSetAvailable"]',
        }
        assert children[("ScaledObject", pool)].after == (pool,)
        assert children[("ScaledObject", pool)].resource_name == f"{pool}-scaledobject"


# --- the Deployment's head, the disruption budget, the rollout timeout ------------------------------------------------


def wait_for(count: int) -> str:
    return (
        f'["jsonpath={{.status.updatedReplicas}}={count}", "jsonpath={{.status.availableReplicas}}={count}", '
        f'"jsonpath={{.status.replicas}}={count}"]'
    )


@pytest.mark.parametrize(
    "overrides, replicas, strategy, max_unavailable, timeout",
    [
        # One pod at a time, no surge: the default.
        pytest.param(
            {},
            4,
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            1,
            "29640s",  # 4 x (120 + 7215) + 300
            id="prod",
        ),
        pytest.param(
            {"rollout": {"strategy": "Recreate", "maxUnavailable": 2}, "prefill": {"replicas": 2}},
            None,
            {"type": "Recreate"},
            2,
            "7635s",  # 120 + 7215 + 300
            id="recreate-2-unavailable",
        ),
    ],
)
def test_a_fixed_role_is_its_count_of_pods_rolled_by_its_strategy_and_budgeted(
    overrides, replicas, strategy, max_unavailable, timeout
):
    children = children_of("prod-4p4d", **overrides)
    counts = {"prefill": replicas or 2, "decode": 4}
    for role in ("prefill", "decode"):
        pool = f"{STACK}-{role}"
        child = children[("Deployment", pool)]
        deployment = child.manifest
        assert (deployment["apiVersion"], deployment["kind"]) == ("apps/v1", "Deployment")
        assert (deployment["metadata"]["name"], deployment["metadata"]["namespace"]) == (pool, NS)
        assert deployment["metadata"]["labels"] == pool_labels(role, pool)
        assert deployment["metadata"]["annotations"] == {
            "pulumi.com/patchForce": "true",
            "pulumi.com/waitFor": wait_for(counts[role]),
        }
        assert deployment["spec"]["replicas"] == counts[role]
        assert deployment["spec"]["strategy"] == strategy
        selector = {"app.kubernetes.io/part-of": STACK, "llm-d.ai/role": role, "rebel100.ai/pool": pool}
        assert deployment["spec"]["selector"] == {"matchLabels": selector}
        assert deployment["spec"]["template"]["metadata"]["labels"] == pool_labels(role, pool)
        # Per turn 120 s of grace and 15 s + 30 s x 240 startup periods, then 300 s of margin: a turn per pod rolled
        # one at a time, one turn for all with Recreate.
        assert (child.resource_name, child.timeout) == (pool, timeout)
        budget = children[("PodDisruptionBudget", pool)]
        assert budget.resource_name == f"{pool}-pdb"
        assert budget.manifest == {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": pool,
                "namespace": NS,
                "labels": pool_labels(role, pool),
                "annotations": {"pulumi.com/patchForce": "true"},
            },
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": selector}},
        }


def test_a_longer_startup_budget_is_a_longer_rollout_timeout_and_startup_probe():
    children = children_of("prod-4p4d", engine={"startupFailureThreshold": 10})
    for pool in (PREFILL, DECODE):
        assert children[("Deployment", pool)].timeout == "2040s"  # 4 pods x (120 + 15 + 30 x 10) + 300
        (vllm,) = [c for c in children[("Deployment", pool)].manifest["spec"]["template"]["spec"]["containers"]]
        assert vllm["startupProbe"]["failureThreshold"] == 10


# --- the pod: security, volumes, mounts, probes, the init container ---------------------------------------------------

RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
API_TOKEN = {
    "name": "api-token",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        ]
    },
}
WAIT_PATHS = [
    "/models/hub/models--MiniMaxAI--MiniMax-M2.7/refs/main",
    "/models/hub/models--asherszhang--MiniMax-M2.7-EAGLE3-draft-vocab200k/refs/main",
]


def engine_volumes(role: str, shm: str = "32Gi", claim: str = "model-weights") -> list[dict]:
    return [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
        {"name": "model", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
        {"name": "compile-cache", "persistentVolumeClaim": {"claimName": f"{STACK}-{role}-compile-cache"}},
    ]


def pod_spec(found: dict, pool: str) -> dict:
    return found[("Deployment", pool)]["spec"]["template"]["spec"]


def test_engine_pods_run_seccomp_default_without_an_api_token_and_are_killed_two_minutes_after_deletion():
    found = objects_of("prod-4p4d")
    for pool in (PREFILL, DECODE):
        spec = pod_spec(found, pool)
        assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        assert spec["automountServiceAccountToken"] is False
        assert spec["terminationGracePeriodSeconds"] == 120
    assert pod_spec(found, PREFILL)["volumes"] == engine_volumes("prefill")
    # The v0.10 sidecar reads the API: its token is a volume of its own, mounted by it alone.
    assert pod_spec(found, DECODE)["volumes"] == [*engine_volumes("decode"), API_TOKEN]


@pytest.mark.parametrize(
    "rollout, pre_stop, drain, grace",
    [
        # The defaults: 15 s of preStop, then up to 90 s of drain, inside 120 s.
        pytest.param({}, {"preStop": {"sleep": {"seconds": 15}}}, ["--shutdown-timeout", "90"], 120, id="default"),
        pytest.param(
            {"preStopSeconds": 30, "drainSeconds": 600, "terminationGracePeriodSeconds": 630},
            {"preStop": {"sleep": {"seconds": 30}}},
            ["--shutdown-timeout", "600"],
            630,
            id="long-requests",
        ),
        # No preStop and no drain: no lifecycle, no flag (vLLM's own 0 aborts the requests on SIGTERM).
        pytest.param(
            {"preStopSeconds": 0, "drainSeconds": 0, "terminationGracePeriodSeconds": 5}, None, [], 5, id="none"
        ),
    ],
)
def test_a_stopping_engine_serves_its_pre_stop_then_drains_within_its_grace_period(rollout, pre_stop, drain, grace):
    found = objects_of("prod-4p4d", rollout=rollout)
    for pool in (PREFILL, DECODE):
        spec = pod_spec(found, pool)
        (vllm,) = spec["containers"]
        assert vllm.get("lifecycle") == pre_stop
        assert [a for a in vllm["args"] if a == "--shutdown-timeout"] == drain[:1]
        assert vllm["args"][len(vllm["args"]) - len(drain) :] == drain  # the last generated flag
        assert spec["terminationGracePeriodSeconds"] == grace
    # The routing sidecar keeps proxying while the engine drains: Kubernetes stops a native sidecar after the main
    # containers, so it has no preStop of its own.
    assert all("lifecycle" not in c for c in pod_spec(found, DECODE)["initContainers"])


def test_the_engine_container_its_exceptions_resources_mounts_and_probe_timings():
    found = objects_of("prod-4p4d")
    for pool, rank in ((PREFILL, 8000), (DECODE, 8200)):
        (vllm,) = pod_spec(found, pool)["containers"]
        assert vllm["name"] == "vllm"
        assert vllm["image"] == "rebellions/vllm-rbln:0.12.0"
        assert vllm["command"] == ["vllm", "serve"]
        # Root and IPC_LOCK are the NPU runtime's exceptions; no escalation, everything else dropped.
        assert vllm["securityContext"] == {
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": False,
            "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
        }
        assert vllm["resources"] == {
            "requests": {"cpu": "32", "memory": "256Gi"},
            "limits": {"cpu": "32", "memory": "256Gi"},
            "claims": [{"name": "npu-rdma"}],
        }
        assert vllm["volumeMounts"] == [
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "model", "mountPath": "/models", "readOnly": True},
            {"name": "compile-cache", "mountPath": "/workspace/.cache"},
        ]
        assert vllm["startupProbe"] == {
            "httpGet": {"path": "/health", "port": rank},
            "initialDelaySeconds": 15,
            "periodSeconds": 30,
            "timeoutSeconds": 5,
            "failureThreshold": 240,
        }
        assert vllm["livenessProbe"] == {
            "httpGet": {"path": "/health", "port": rank},
            "periodSeconds": 30,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        }
    (prefill,) = pod_spec(found, PREFILL)["containers"]
    assert prefill["readinessProbe"] == {
        "httpGet": {"path": "/v1/models", "port": 8000},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }
    (decode,) = pod_spec(found, DECODE)["containers"]
    probe = decode["readinessProbe"]
    assert {key: value for key, value in probe.items() if key != "exec"} == {
        "periodSeconds": 10,
        "timeoutSeconds": 10,
        "failureThreshold": 3,
    }
    # One check over every rank, each call bounded below the probe's timeout.
    assert probe["exec"]["command"] == [
        "python3",
        "-c",
        (
            "import sys, urllib.request\n"
            "for port in sys.argv[1:]:\n"
            "    urllib.request.urlopen(f'http://127.0.0.1:{port}/v1/models', timeout=4)\n"
        ),
        "8200",
        "8201",
        "8202",
        "8203",
    ]


def test_an_engine_without_the_exceptions_runs_as_non_root_with_nothing_added():
    found = objects_of("prod-4p4d", security={"engineRunAsRoot": False, "engineCapabilities": []})
    for pool in (PREFILL, DECODE):
        (vllm,) = pod_spec(found, pool)["containers"]
        assert vllm["securityContext"] == {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": False,
            "capabilities": {"drop": ["ALL"]},
        }


def test_the_sizes_and_the_weights_claim_of_the_config_reach_the_pod():
    found = objects_of(
        "prod-4p4d",
        engine={"shmSize": "8Gi"},
        prefill={"resources": {"cpu": "16", "memory": "128Gi"}},
        weights={"pvc": "weights-b"},
    )
    assert pod_spec(found, PREFILL)["volumes"] == engine_volumes("prefill", shm="8Gi", claim="weights-b")
    (vllm,) = pod_spec(found, PREFILL)["containers"]
    assert (vllm["resources"]["requests"], vllm["resources"]["limits"]) == (
        {"cpu": "16", "memory": "128Gi"},
        {"cpu": "16", "memory": "128Gi"},
    )


def test_the_engines_wait_for_their_weights_in_a_restricted_init_container():
    found = objects_of("prod-4p4d")
    for pool in (PREFILL, DECODE):
        wait = pod_spec(found, pool)["initContainers"][0]
        command = wait.pop("command")
        assert wait == {
            "name": "wait-for-weights",
            "image": "python:3.12.11-slim",
            "volumeMounts": [{"name": "model", "mountPath": "/models", "readOnly": True}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
            "securityContext": RESTRICTED,
        }
        # sh -c SCRIPT $0 PATH...: the script waits until each path exists.
        assert command[:2] == ["sh", "-c"] and 'until [ -e "$path" ]' in command[2]
        assert command[3:] == ["wait-for-weights", *WAIT_PATHS]


def test_the_routing_sidecar_is_restricted_and_sized_for_a_proxy():
    (_, routing) = pod_spec(objects_of("prod-4p4d"), DECODE)["initContainers"]
    assert routing["name"] == "routing-proxy"
    assert routing["securityContext"] == RESTRICTED
    assert routing["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}}


# --- the compile-cache claim ------------------------------------------------------------------------------------------


def compile_cache(role: str, size: str, storage_class: str | None) -> dict:
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"{STACK}-{role}-compile-cache",
            "namespace": NS,
            "labels": {
                "app.kubernetes.io/component": role,
                "app.kubernetes.io/name": f"{STACK}-{role}",
                "app.kubernetes.io/part-of": STACK,
                "llm-d.ai/inference-serving": "true",
                "llm-d.ai/role": role,
            },
            "annotations": {"pulumi.com/patchForce": "true"},
        },
        "spec": spec,
    }


@pytest.mark.parametrize(
    "overrides, size, storage_class, retained",
    [
        pytest.param({}, "200Gi", None, True, id="default"),
        pytest.param(
            {"storage": {"compileCacheSize": "50Gi", "storageClass": "nfs-rwx", "retainOnDelete": False}},
            "50Gi",
            "nfs-rwx",
            False,
            id="sized-classed-not-retained",
        ),
    ],
)
def test_each_role_has_a_shared_compile_cache_claim(overrides, size, storage_class, retained):
    children = children_of("prod-4p4d", **overrides)
    for role in ("prefill", "decode"):
        child = children[("PersistentVolumeClaim", f"{STACK}-{role}-compile-cache")]
        assert child.manifest == compile_cache(role, size, storage_class)
        assert (child.resource_name, child.retain_on_delete) == (f"{STACK}-{role}-compile-cache", retained)


# --- the weights' download Job (weights.source download) --------------------------------------------------------------


def download_job(found: dict) -> dict:
    (job,) = [m for (kind, _), m in found.items() if kind == "Job"]
    return job


def test_dev_downloads_both_repositories_as_a_non_root_job_before_the_engines_start():
    children = children_of("dev")
    found = {key: child.manifest for key, child in children.items()}
    job = download_job(found)
    key = job["metadata"]["name"].removeprefix(f"{STACK}-weights-")  # the digest of what it downloads
    labels = {"app.kubernetes.io/component": "model-weights", "app.kubernetes.io/part-of": STACK}
    revisions = {
        "rebel100.ai/model": "MiniMaxAI/MiniMax-M2.7",
        "rebel100.ai/model-revision": "main",
        "rebel100.ai/draft-model": "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k",
        "rebel100.ai/draft-revision": "main",
    }
    assert (job["apiVersion"], job["kind"], job["metadata"]["namespace"]) == ("batch/v1", "Job", NS)
    assert job["metadata"]["labels"] == labels
    assert job["metadata"]["annotations"] == {
        "pulumi.com/patchForce": "true",
        "pulumi.com/replaceUnready": "true",
        **revisions,
    }
    spec = job["spec"]
    assert spec["backoffLimit"] == 6
    assert spec["template"]["metadata"] == {"labels": labels}
    pod = spec["template"]["spec"]
    assert {k: v for k, v in pod.items() if k != "containers"} == {
        "restartPolicy": "OnFailure",
        "automountServiceAccountToken": False,
        "securityContext": {
            "seccompProfile": {"type": "RuntimeDefault"},
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "fsGroup": 65532,
            "fsGroupChangePolicy": "OnRootMismatch",
        },
        "volumes": [
            {"name": "model", "persistentVolumeClaim": {"claimName": "model-weights"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
        ],
    }
    (download,) = pod["containers"]
    command, env = download.pop("command"), download.pop("env")
    assert download == {
        "name": "download",
        "image": "python:3.12.11-slim",
        "volumeMounts": [{"name": "model", "mountPath": "/models"}, {"name": "tmp", "mountPath": "/tmp"}],
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
        "securityContext": RESTRICTED,
    }
    # sh -c SCRIPT $0 MARKER REPO REVISION DRAFT REVISION: the script runs $DOWNLOAD with the rest.
    assert command[:2] == ["sh", "-c"] and 'exec python3 -c "$DOWNLOAD" "$@"' in command[2]
    assert command[3:] == [
        "download",
        f"/models/.rebel100/weights-{key}.complete",
        "MiniMaxAI/MiniMax-M2.7",
        "main",
        "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k",
        "main",
    ]
    by_name = {entry["name"]: entry for entry in env}
    assert [entry["name"] for entry in env] == [
        "HF_HOME",
        "HF_HUB_DISABLE_TELEMETRY",
        "HOME",
        "PYTHONPATH",
        "HUB_VERSION",
        "DOWNLOAD",
        "HF_TOKEN",
    ]
    assert [by_name[name]["value"] for name in ("HF_HOME", "HF_HUB_DISABLE_TELEMETRY", "HOME", "PYTHONPATH")] == [
        "/models",
        "1",
        "/tmp",
        "/tmp/pip",
    ]
    assert by_name["HUB_VERSION"] == {"name": "HUB_VERSION", "value": "0.34.4"}
    assert "snapshot_download(repo_id=repo, revision=revision)" in by_name["DOWNLOAD"]["value"]
    # Public repositories: the token is optional.
    assert by_name["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}},
    }
    volume = children[("PersistentVolumeClaim", "model-weights")]
    assert volume.manifest == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "model-weights",
            "namespace": NS,
            "labels": labels,
            "annotations": {"pulumi.com/patchForce": "true", **revisions},
        },
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "600Gi"}}},
    }
    assert volume.retain_on_delete is True
    (job_child,) = [child for (kind, _), child in children.items() if kind == "Job"]
    assert (job_child.after, job_child.timeout) == (("minimax-m27-weights-pvc",), "360m")
    assert job_child.resource_name == "minimax-m27-weights-download"
    assert volume.resource_name == "minimax-m27-weights-pvc"


def test_a_gated_download_of_the_configs_hub_and_sizes():
    children = children_of(
        "dev",
        weights={
            "source": "download",
            "gated": True,
            "tokenSecretExists": True,
            "huggingfaceHubVersion": "0.30.1",
            "downloaderImage": "python:3.13-slim",
            "retries": 2,
            "timeoutMinutes": 90,
            "size": "700Gi",
            "pvc": "weights-b",
        },
        hfTokenSecret="hub-token",
        storage={"storageClass": "nfs-rwx", "retainOnDelete": False},
    )
    (job_child,) = [child for (kind, _), child in children.items() if kind == "Job"]
    job = job_child.manifest
    assert job["spec"]["backoffLimit"] == 2 and job_child.timeout == "90m"
    pod = job["spec"]["template"]["spec"]
    (download,) = pod["containers"]
    by_name = {entry["name"]: entry for entry in download["env"]}
    assert by_name["HUB_VERSION"]["value"] == "0.30.1"
    assert download["image"] == "python:3.13-slim"
    # A gated repository needs the token: the pod does not start without the Secret.
    assert by_name["HF_TOKEN"]["valueFrom"] == {
        "secretKeyRef": {"name": "hub-token", "key": "token", "optional": False}
    }
    assert pod["volumes"][0] == {"name": "model", "persistentVolumeClaim": {"claimName": "weights-b"}}
    volume = children[("PersistentVolumeClaim", "weights-b")]
    assert volume.manifest["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "nfs-rwx",
        "resources": {"requests": {"storage": "700Gi"}},
    }
    assert volume.retain_on_delete is False
    # The engines wait with the downloader's image too, for the Job's marker.
    wait = pod_spec({k: c.manifest for k, c in children.items()}, PREFILL)["initContainers"][0]
    assert wait["image"] == "python:3.13-slim"
    key = job["metadata"]["name"].removeprefix(f"{STACK}-weights-")
    assert wait["command"][3:] == ["wait-for-weights", f"/models/.rebel100/weights-{key}.complete"]


def test_a_preloaded_volume_is_no_object_of_the_stack():
    found = objects_of("prod-4p4d")
    assert [key for key in found if key[0] == "Job"] == []
    assert ("PersistentVolumeClaim", "model-weights") not in found


# --- the v0.10 sidecar's access to the API ----------------------------------------------------------------------------


def test_the_sidecar_reads_pods_and_pools_as_the_decode_account_bound_to_its_role():
    """The v0.10 sidecar's SSRF allowlist lists and watches the pool and its pods: a ServiceAccount (no token
    automounted), a Role of exactly those two rules, a RoleBinding created after both; the Deployment waits for it."""
    children = children_of("prod-4p4d")
    meta = {
        "name": DECODE,
        "namespace": NS,
        "labels": {
            "app.kubernetes.io/part-of": STACK,
            "app.kubernetes.io/name": DECODE,
            "app.kubernetes.io/component": "decode",
        },
        "annotations": {"pulumi.com/patchForce": "true"},
    }
    account = children[("ServiceAccount", DECODE)]
    assert account.manifest == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta,
        "automountServiceAccountToken": False,
    }
    role = children[("Role", DECODE)]
    assert role.manifest == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
            {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": ["list", "watch"]},
        ],
    }
    binding = children[("RoleBinding", DECODE)]
    assert binding.manifest == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DECODE},
        "subjects": [{"kind": "ServiceAccount", "name": DECODE, "namespace": NS}],
    }
    resources = (account.resource_name, role.resource_name, binding.resource_name)
    assert resources == (f"{DECODE}-sa", f"{DECODE}-role", f"{DECODE}-rolebinding")
    assert binding.after == (f"{DECODE}-sa", f"{DECODE}-role")
    assert children[("Deployment", DECODE)].after == (f"{DECODE}-rolebinding",)


def test_the_configs_image_device_class_group_label_and_token_secret_reach_both_roles():
    found = objects_of(
        "prod-4p4d",
        engine={"image": "rebellions/vllm-rbln:0.12.1"},
        hardware={"npuDeviceClass": "npu.example.com"},
        placement={"groups": 2, "groupLabel": "example.com/rack"},
        hfTokenSecret="hub-token",
    )
    claim_classes = {
        m["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
        for (kind, _), m in found.items()
        if kind == "ResourceClaimTemplate"
    }
    assert claim_classes == {"npu.example.com"}
    for pool in (f"{PREFILL}-g1", f"{DECODE}-g1"):
        spec = pod_spec(found, pool)
        (vllm,) = spec["containers"]
        assert vllm["image"] == "rebellions/vllm-rbln:0.12.1"
        assert vllm["env"][-1] == {
            "name": "HF_TOKEN",
            # Optional: the stack's weights are not gated (core.weights.token_required).
            "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "token", "optional": True}},
        }
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term["matchExpressions"][-1] == {"key": "example.com/rack", "operator": "In", "values": ["g1"]}


# --- the engines' command lines: the KV connectors per KV mode, the revisions -----------------------------------------

NIXL = (
    '{"kv_connector":"RblnNixlConnector","kv_role":"kv_both","kv_buffer_device":"rbln",'
    '"kv_connector_extra_config":{"name":"nixl"}}'
)
# Prefill with a KV tier stores and looks up KV in LMCache besides pulling over NIXL: both under a MultiConnector.
NIXL_AND_LMCACHE = (
    '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":['
    f'{NIXL},{{"kv_connector":"RBLNLMCacheConnectorV1","kv_role":"kv_both"}}]}}}}'
)
SHA_MODEL, SHA_DRAFT = "0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef"


def prefill_args(revision: str, draft_revision: str, kv_transfer: str) -> list[str]:
    """prefill of the Target Configuration: PP4 on one rank at 8000, 4 sequences, EAGLE-3 with 3 tokens."""
    return [
        "MiniMaxAI/MiniMax-M2.7",
        "--revision",
        revision,
        "--served-model-name",
        "MiniMaxAI/MiniMax-M2.7",
        "--port",
        "8000",
        "--block-size",
        "4096",
        "--max-model-len",
        "204800",
        "--max-num-batched-tokens",
        "512",
        "--max-num-seqs",
        "4",
        "--kv-cache-dtype",
        "fp8",
        "--pipeline-parallel-size",
        "4",
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "minimax_m2",
        "--reasoning-parser",
        "minimax_m2",
        "--gpu-memory-utilization",
        "0.8",
        "--speculative-config",
        '{"method":"eagle3","model":"asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k","num_speculative_tokens":3,'
        f'"revision":"{draft_revision}"}}',
        "--kv-transfer-config",
        kv_transfer,
        "--shutdown-timeout",
        "90",
    ]


@pytest.mark.parametrize(
    "overrides, kv_transfer",
    [
        pytest.param({}, NIXL_AND_LMCACHE, id="rds"),
        pytest.param({"kvTier": {"mode": "cpu"}}, NIXL_AND_LMCACHE, id="cpu"),
        pytest.param({"kvTier": {"mode": "off"}}, NIXL, id="off"),
    ],
)
def test_prefill_runs_the_kv_tiers_connector_beside_nixl(overrides, kv_transfer):
    (vllm,) = pod_spec(objects_of("prod-4p4d", **overrides), PREFILL)["containers"]
    assert vllm["args"] == prefill_args("main", "main", kv_transfer)
    (decode,) = pod_spec(objects_of("prod-4p4d", **overrides), DECODE)["containers"]
    assert decode["args"][-4:-2] == ["--kv-transfer-config", NIXL]  # decode pulls over NIXL only


def test_both_roles_serve_the_pinned_revisions_of_model_and_draft():
    found = objects_of("prod-4p4d", weights={"revision": SHA_MODEL, "draftRevision": SHA_DRAFT})
    (prefill,) = pod_spec(found, PREFILL)["containers"]
    assert prefill["args"] == prefill_args(SHA_MODEL, SHA_DRAFT, NIXL_AND_LMCACHE)
    (decode,) = pod_spec(found, DECODE)["containers"]
    assert decode["args"][1:3] == ["--revision", SHA_MODEL]
    assert f'"revision":"{SHA_DRAFT}"' in decode["args"][decode["args"].index("--speculative-config") + 1]
    for pool in (PREFILL, DECODE):
        template = found[("Deployment", pool)]["spec"]["template"]["metadata"]
        assert template["annotations"]["rebel100.ai/model-revision"] == SHA_MODEL  # a new revision rolls the pods


def test_every_added_capability_is_named_in_the_exceptions():
    found = objects_of("prod-4p4d", security={"engineCapabilities": ["IPC_LOCK", "SYS_RESOURCE"]})
    template = found[("Deployment", PREFILL)]["spec"]["template"]
    assert template["metadata"]["annotations"]["rebel100.ai/security-exceptions"].endswith(
        "; capabilities IPC_LOCK,SYS_RESOURCE: pin RDMA buffers for NIXL"
    )
    (vllm,) = template["spec"]["containers"]
    assert vllm["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK", "SYS_RESOURCE"]}


def test_a_claim_template_is_named_after_its_role_and_eight_hex_digits_of_its_ask():
    found = objects_of("prod-4p4d")
    for pool in (PREFILL, DECODE):
        (claim,) = pod_spec(found, pool)["resourceClaims"]
        assert re.fullmatch(f"{pool}-npu-rdma-[0-9a-f]{{8}}", claim["resourceClaimTemplateName"])


@pytest.mark.parametrize(
    "stack, overrides, names, timeout",
    [
        # Two node groups: 2 pods per Deployment, 2 x (120 + 7215) + 300.
        ("prod-4p4d", {"placement": {"groups": 2}}, ("g0", "g1"), "14970s"),
        # Autoscaled up to 4 (prod-autoscale): as many turns as the autoscaler may run pods.
        ("prod-autoscale", {}, ("",), "29640s"),
        ("prod-autoscale", {"decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 2}}}, ("",), "14970s"),
        # A longer stop per pod: 4 x (300 + 7215) + 300.
        ("prod-4p4d", {"rollout": {"drainSeconds": 285, "terminationGracePeriodSeconds": 300}}, ("",), "30360s"),
    ],
)
def test_up_waits_for_a_stop_and_a_start_per_pod_of_each_deployment(stack, overrides, names, timeout):
    children = children_of(stack, **overrides)
    for name in names:
        pool = f"{DECODE}-{name}" if name else DECODE
        assert children[("Deployment", pool)].timeout == timeout
