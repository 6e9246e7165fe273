"""RdsTier: LMCache env per mode, the budget outputs, and its guard clauses."""
import json

import pytest

from components.rds_tier import RdsTier, RdsTierArgs, lmcache_env
from stacks.config import KvTier


def test_rds_env():
    env = lmcache_env(KvTier())
    assert env["LMCACHE_CHUNK_SIZE"] == "4096"
    assert json.loads(env["LMCACHE_EXTRA_CONFIG"]) == {"rds_max_chunks": 1000}
    assert env["LMCACHE_ENABLE_KV_EVENTS"] == "True"
    assert env["LMCACHE_PRE_CACHING_HASH_ALGORITHM"] == "sha256_cbor_64bit"


def test_cpu_env_keeps_events_and_hash():
    env = lmcache_env(KvTier(mode="cpu", cpu_size_gib=32))
    assert env["LMCACHE_LOCAL_CPU"] == "True" and env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "32"
    assert "LMCACHE_EXTRA_CONFIG" not in env
    assert env["LMCACHE_PRE_CACHING_HASH_ALGORITHM"] == lmcache_env(KvTier())["LMCACHE_PRE_CACHING_HASH_ALGORITHM"]


def test_off_has_no_env():
    assert lmcache_env(KvTier(mode="off")) == {}


def test_component_outputs(run_under_mocks):
    holder = {}
    run_under_mocks(lambda: holder.setdefault("tier", RdsTier("kv", RdsTierArgs())))
    tier = holder["tier"]
    assert tier.needs_rds_nodes and tier.tokens_per_rank == 4_096_000
    assert tier.budget.used_mib == 4512


def test_refuses_budget_over_chiplet0():
    with pytest.raises(ValueError, match="does not fit .* lower rds_max_chunks to 1715 or less"):
        RdsTier("kv", RdsTierArgs(tier=KvTier(rds_max_chunks=4000)))


def test_refuses_cpu_tier_over_memory_limit():
    with pytest.raises(ValueError, match="does not fit the prefill memory limit 64Gi"):
        RdsTier("kv", RdsTierArgs(tier=KvTier(mode="cpu", cpu_size_gib=128), prefill_memory_limit="64Gi"))
