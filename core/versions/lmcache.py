"""What LMCache reads from its environment, as lmcache itself defines it (data/lmcache-<version>.json, dumped from
lmcache's own config definition by scripts/consumer_facts.py; a test checks it against the installed lmcache).

lmcache's `LMCacheEngineConfig.from_env()` reads `LMCACHE_<KEY>` for each key of its config and ignores every other
name without a word, so a misspelt `LMCACHE_*` variable is a setting that silently never happens: the gates refuse it.
`LMCACHE_EXTRA_CONFIG` is a free dict lmcache hands to its backends and plugins (lmcache-rbln reads `rds_max_chunks`
there), so only a top-level key put there by mistake (`chunk_size`, which lmcache reads only as LMCACHE_CHUNK_SIZE) is
refused in it.
"""

from __future__ import annotations

import difflib
import functools
import json
import pathlib
from typing import Any

VERSION = "0.5.6"
DATA = pathlib.Path(__file__).resolve().parent / "data" / f"lmcache-{VERSION}.json"
ENV_PREFIX = "LMCACHE_"


@functools.cache
def facts() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


def known_env() -> frozenset[str]:
    data = facts()
    names = {f"{ENV_PREFIX}{key.upper()}" for key in list(data["config_keys"]) + list(data["aliases"])}
    return frozenset(names | set(data["other_env"]))


def unknown_env(name: str) -> str | None:
    """None for a name lmcache reads (or one that is not LMCACHE_*), else why it is refused and the closest name."""
    if not name.startswith(ENV_PREFIX) or name in known_env():
        return None
    if any(name.startswith(prefix) for prefix in facts()["env_family_prefixes"]):
        return None
    close = difflib.get_close_matches(name, sorted(known_env()), n=1, cutoff=0.75)
    hint = f" Did you mean {close[0]}?" if close else ""
    return (
        f"{name} is not a setting lmcache {facts()['version']} reads: from_env() reads LMCACHE_<KEY> only for the "
        f"keys of its config (lmcache/v1/config.py) and ignores any other name silently, so this setting would "
        f"never take effect.{hint} Remove it or use a name lmcache knows."
    )


def misplaced_extra_config_key(key: str) -> str | None:
    """A top-level LMCache setting put into LMCACHE_EXTRA_CONFIG, where lmcache never looks for it."""
    data = facts()
    bare = key.removeprefix(ENV_PREFIX).lower()
    if bare not in data["config_keys"] and bare not in data["aliases"]:
        return None
    return (
        f"{key} is a top-level setting of lmcache {data['version']}, read only from {ENV_PREFIX}{bare.upper()}; "
        f"inside LMCACHE_EXTRA_CONFIG (a dict for backends and plugins) lmcache ignores it. Set it through its own "
        f"variable (or the kvTier field that generates it) instead."
    )
