"""DecodePool alone under the mock runtime."""

import json

from components.decode_pool import DecodePool
from core.config import StackConfig
from core.derive import derive
from objects.engine_pool import claim_digest
from objects.stack import decode_pool_args
from tests import defaults
from tests.conftest import arg_value, container, env_map


def build(run_under_mocks, **config):
    """The pool as the stack builds it from a config (the args worked out by stacks.compose)."""
    cfg = StackConfig(name="t", namespace="ns", **config)
    return run_under_mocks(
        lambda: DecodePool("t-decode", decode_pool_args(cfg, derive(cfg), defaults.engine_weights_of(cfg)))
    )


def test_dp4_expert_parallel_args(run_under_mocks):
    vllm = container(build(run_under_mocks).get("Deployment", "t-decode"), "vllm")
    args = vllm["args"]
    assert arg_value(args, "--data-parallel-size") == "4"
    assert arg_value(args, "--data-parallel-size-local") == "4"
    assert arg_value(args, "--data-parallel-rpc-port") == "5555"
    assert "--data-parallel-multi-port-external-lb" in args and "--enable-expert-parallel" in args
    assert "--pipeline-parallel-size" not in args and "--gpu-memory-utilization" not in args
    assert arg_value(args, "--port") == "8200"
    assert arg_value(args, "--max-num-seqs") == "1"
    assert json.loads(arg_value(args, "--kv-transfer-config")) == {
        "kv_connector": "RblnNixlConnector",
        "kv_role": "kv_both",
        "kv_buffer_device": "rbln",
        "kv_connector_extra_config": {"name": "nixl"},
    }
    assert json.loads(arg_value(args, "--speculative-config")) == {
        "method": "eagle3",
        "model": "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k",
        "num_speculative_tokens": 3,
        "revision": "main",
    }
    ports = [p["containerPort"] for p in vllm["ports"]]
    assert ports == [8200, 8201, 8202, 8203, 5555, 5600, 5601, 5602, 5603]
    assert env_map(vllm)["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5600"
    assert "RBLN_DEVICES" not in env_map(vllm)


def test_routing_sidecar_is_native_sidecar(run_under_mocks):
    sidecar = container(build(run_under_mocks).get("Deployment", "t-decode"), "routing-proxy", init=True)
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["image"].startswith("ghcr.io/llm-d/")
    assert sidecar["args"] == [
        "--port",
        "8000",
        "--vllm-port",
        "8200",
        "--data-parallel-size",
        "4",
        "--kv-connector",
        "nixlv2",
        "--secure-proxy=false",
        "--enable-ssrf-protection=true",
        "--inference-pool",
        "ns/t-pool",
    ]
    assert [p["containerPort"] for p in sidecar["ports"]] == [8000, 8001, 8002, 8003]


def test_only_the_sidecar_gets_an_api_token_of_the_decode_account(run_under_mocks):
    """SSRF protection lists the pool and its pods: the sidecar mounts a token of the decode pods' ServiceAccount, which
    may list and watch pods and InferencePools of the namespace; the pod automounts none (the engine has no token)."""
    objects = build(run_under_mocks)
    spec = objects.get("Deployment", "t-decode")["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "t-decode" and spec["automountServiceAccountToken"] is False
    [volume] = [v for v in spec["volumes"] if v["name"] == "api-token"]
    sources = volume["projected"]["sources"]
    assert sources[0]["serviceAccountToken"] == {"path": "token", "expirationSeconds": 3600}
    assert sources[1]["configMap"] == {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert container(objects.get("Deployment", "t-decode"), "routing-proxy", init=True)["volumeMounts"] == [
        {"name": "api-token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
    ]
    assert "api-token" not in {
        m["name"] for m in container(objects.get("Deployment", "t-decode"), "vllm").get("volumeMounts") or []
    }
    assert objects.get("ServiceAccount", "t-decode")["automountServiceAccountToken"] is False
    assert objects.get("Role", "t-decode")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": ["list", "watch"]},
    ]
    binding = objects.get("RoleBinding", "t-decode")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "t-decode"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "t-decode", "namespace": "ns"}]


def test_a_sidecar_that_cannot_be_protected_gets_no_account(run_under_mocks):
    """A v0.7.x sidecar runs without SSRF protection (its allowlist cannot read the GA pool): no API access at all."""
    objects = build(run_under_mocks, decode={"sidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"}})
    spec = objects.get("Deployment", "t-decode")["spec"]["template"]["spec"]
    assert "serviceAccountName" not in spec and "api-token" not in {v["name"] for v in spec["volumes"]}
    assert "volumeMounts" not in container(objects.get("Deployment", "t-decode"), "routing-proxy", init=True)
    assert (
        "--enable-ssrf-protection=true"
        not in container(objects.get("Deployment", "t-decode"), "routing-proxy", init=True)["args"]
    )
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        assert objects.of_kind(kind) == []


def test_readiness_checks_every_rank(run_under_mocks):
    probe = container(build(run_under_mocks).get("Deployment", "t-decode"), "vllm")["readinessProbe"]
    assert probe["exec"]["command"][-4:] == ["8200", "8201", "8202", "8203"]


def test_agg_has_no_sidecar_and_no_connector(run_under_mocks):
    deployment = build(run_under_mocks, topology="agg").get("Deployment", "t-decode")
    assert [c["name"] for c in deployment["spec"]["template"]["spec"]["initContainers"]] == ["wait-for-weights"]
    assert "--kv-transfer-config" not in container(deployment, "vllm")["args"]


def test_claim_counts_dp_local(run_under_mocks):
    claim = build(run_under_mocks).get(
        "ResourceClaimTemplate", f"t-decode-npu-rdma-{claim_digest(defaults.decode_args().claim)}"
    )
    npu = claim["spec"]["spec"]["devices"]["requests"][0]
    assert npu["exactly"]["count"] == 4
