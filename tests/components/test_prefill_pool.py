"""PrefillPool alone under the mock runtime."""

import json

from components.prefill_pool import PrefillPool
from core.config import StackConfig
from core.derive import derive
from objects.engine_pool import claim_digest
from objects.stack import prefill_pool_args
from tests import defaults
from tests.conftest import arg_value, container, env_map


def build(run_under_mocks, cfg: StackConfig = StackConfig(name="t", namespace="ns"), **args):
    """The pool as the stack builds it from a config (the args worked out by stacks.compose)."""
    args = {"kv_tier_config_map": None, "rds_nodes": False, **args}
    return run_under_mocks(
        lambda: PrefillPool("t-prefill", prefill_pool_args(cfg, derive(cfg), defaults.engine_weights_of(cfg), **args))
    )


def test_pp4_args_env_and_claim(run_under_mocks):
    cluster = build(run_under_mocks, kv_tier_config_map="t-lmcache", rds_nodes=True)
    deployment = cluster.get("Deployment", "t-prefill")
    vllm = container(deployment, "vllm")
    args = vllm["args"]
    assert vllm["command"] == ["vllm", "serve"]
    assert args[0] == "MiniMaxAI/MiniMax-M2.7"
    assert arg_value(args, "--pipeline-parallel-size") == "4"
    assert "--data-parallel-size" not in args
    assert arg_value(args, "--port") == "8000"
    assert arg_value(args, "--max-num-seqs") == "4"
    assert arg_value(args, "--gpu-memory-utilization") == "0.8"
    transfer = json.loads(arg_value(args, "--kv-transfer-config"))
    assert transfer["kv_connector"] == "MultiConnector"
    assert [c["kv_connector"] for c in transfer["kv_connector_extra_config"]["connectors"]] == [
        "RblnNixlConnector",
        "RBLNLMCacheConnectorV1",
    ]
    env = env_map(vllm)
    assert env["RBLN_DEVICES"] == "0,1,2,3"
    assert vllm["envFrom"] == [{"configMapRef": {"name": "t-lmcache"}}]
    assert len(vllm["env"]) == len(env), "one env entry per name"
    assert env["HF_TOKEN"] == {"secretKeyRef": {"key": "token", "name": "hf-token", "optional": True}}
    assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert [p["containerPort"] for p in vllm["ports"]] == [8000, 5600]
    claim = cluster.get("ResourceClaimTemplate", f"t-prefill-npu-rdma-{claim_digest(defaults.prefill_args().claim)}")
    requests = {r["name"]: r["exactly"] for r in claim["spec"]["spec"]["devices"]["requests"]}
    assert requests["npu"]["count"] == 4 and requests["npu"]["deviceClassName"] == "npu.rebellions.ai"
    assert requests["rdma"]["count"] == 2 and requests["rdma"]["deviceClassName"] == "dranet"
    terms = deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    keys = [e["key"] for e in terms["nodeSelectorTerms"][0]["matchExpressions"]]
    assert "rebellions.ai/rds.present" in keys


def test_without_kv_tier_only_nixl(run_under_mocks):
    cluster = build(run_under_mocks)
    vllm = container(cluster.get("Deployment", "t-prefill"), "vllm")
    transfer = json.loads(arg_value(vllm["args"], "--kv-transfer-config"))
    assert transfer["kv_connector"] == "RblnNixlConnector"
    assert "LMCACHE_CHUNK_SIZE" not in env_map(vllm) and "envFrom" not in vllm


def test_pod_wiring(run_under_mocks):
    spec = build(run_under_mocks).get("Deployment", "t-prefill")["spec"]
    pod = spec["template"]["spec"]
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert pod["terminationGracePeriodSeconds"] == 120
    assert pod["resourceClaims"] == [
        {
            "name": "npu-rdma",
            "resourceClaimTemplateName": f"t-prefill-npu-rdma-{claim_digest(defaults.prefill_args().claim)}",
        }
    ]
    assert {v["name"] for v in pod["volumes"]} == {"shm", "model", "compile-cache"}
    labels = spec["template"]["metadata"]["labels"]
    assert labels["llm-d.ai/role"] == "prefill" and labels["llm-d.ai/inference-serving"] == "true"
    vllm = pod["containers"][0]
    assert vllm["startupProbe"]["failureThreshold"] == 240 and vllm["startupProbe"]["periodSeconds"] == 30
    assert vllm["readinessProbe"]["httpGet"]["path"] == "/v1/models"


def test_extra_env_cannot_duplicate_a_reference(run_under_mocks):
    """A literal HF_TOKEN in extraEnv (which the config gate refuses) still never makes a second entry."""
    args = defaults.prefill_args(engine={"env": {"HF_TOKEN": "hf_x", "MY_FLAG": "1"}})
    cluster = run_under_mocks(lambda: PrefillPool("t-prefill", args))
    vllm = container(cluster.get("Deployment", "t-prefill"), "vllm")
    names = [e["name"] for e in vllm["env"]]
    assert names.count("HF_TOKEN") == 1 and env_map(vllm)["HF_TOKEN"] == {
        "secretKeyRef": {"key": "token", "name": "hf-token", "optional": True}
    }
    assert env_map(vllm)["MY_FLAG"] == "1"


def test_children_named_from_the_component(run_under_mocks):
    """Two pools of one stack do not collide: Pulumi names come from the component's name."""

    def two():
        PrefillPool("a-prefill", defaults.prefill_args())
        PrefillPool("b-prefill", defaults.prefill_args(defaults.config("u")))

    cluster = run_under_mocks(two)
    assert cluster.get("Deployment", "t-prefill") and cluster.get("Deployment", "u-prefill")
