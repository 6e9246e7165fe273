"""RdsTier: the LMCache ConfigMap prefill takes its environment from, and the budget it records."""

import json

from components.rds_tier import RdsTier
from core.config import StackConfig
from core.labels import RDS_BUDGET_ANNOTATION as BUDGET_ANNOTATION
from tests import defaults


def build(run_under_mocks, cfg: StackConfig):
    holder = {}
    args = defaults.rds_tier_args(cfg, stack_name="t", namespace="ns")
    cluster = run_under_mocks(lambda: holder.setdefault("tier", RdsTier("t-kv-tier", args)))
    return cluster, holder["tier"]


def test_config_map_holds_the_env_and_the_budget(run_under_mocks):
    cluster, tier = build(run_under_mocks, StackConfig())
    config_map = cluster.get("ConfigMap", "t-lmcache")
    assert tier.config_map_name == "t-lmcache" and tier.needs_rds_nodes
    assert json.loads(config_map["data"]["LMCACHE_EXTRA_CONFIG"]) == {"rds_max_chunks": 1000}
    assert config_map["data"]["LMCACHE_CHUNK_SIZE"] == "4096"
    budget = json.loads(config_map["metadata"]["annotations"][BUDGET_ANNOTATION])
    assert budget == {"nvmeDrives": 2, "chunkOverheadMib": 2.0, "stagingBufferMib": 512.0, "hbmPerChipletGib": 36.0}


def test_drives_from_the_kv_tier_reach_the_annotation(run_under_mocks):
    cfg = StackConfig.model_validate({"kvTier": {"rdsDrives": 1, "rdsMaxChunks": 3000}})
    cluster, _ = build(run_under_mocks, cfg)
    budget = json.loads(cluster.get("ConfigMap", "t-lmcache")["metadata"]["annotations"][BUDGET_ANNOTATION])
    assert budget["nvmeDrives"] == 1


def test_cpu_tier_has_no_budget(run_under_mocks):
    cluster, tier = build(run_under_mocks, StackConfig.model_validate({"kvTier": {"mode": "cpu"}}))
    config_map = cluster.get("ConfigMap", "t-lmcache")
    assert not tier.needs_rds_nodes
    assert config_map["data"]["LMCACHE_LOCAL_CPU"] == "True"
    assert BUDGET_ANNOTATION not in (config_map["metadata"].get("annotations") or {})
