"""core.serving: the LMCache environment per KV tier mode."""
import json

from core.config import KvTier
from core.serving import lmcache_env


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
