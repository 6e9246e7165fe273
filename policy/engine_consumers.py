"""The engine image accepts what its pod gives it: the programs that read the render, judged from their own facts.

A vllm-rbln image must be at least the first release of every flag, KV connector and env var its container uses
(core.versions.engine, the same facts and rule as the config gate's `engine.image` check), and every LMCACHE_* name an
engine gets must be one lmcache reads (core.versions.lmcache, dumped from lmcache's own config definition), and every
`vllm serve` argument one vLLM's own parser accepts (core.versions.vllm_args).
"""

from __future__ import annotations

from core import rules, serving
from core.serving import LMCACHE_EXTRA_CONFIG_ENV
from core.versions import engine as engine_versions
from core.versions import image_version, vllm_args
from core.versions import lmcache as lmcache_facts
from policy.facts import Facts
from policy.read.engines import engines, kv_connectors
from policy.read.env import effective_env
from policy.read.flags import serve_argv
from policy.read.objects import Finding


def engine_image_has_features(manifests: list[dict], facts: Facts) -> list[Finding]:
    """A vllm-rbln image older than a feature its container uses: the engine exits at start and the pod crash-loops."""
    found = []
    for engine in engines(manifests):
        image = str(engine.container.get("image") or "")
        if not engine_versions.is_engine_image(image):
            continue
        env_names = [str(e.get("name")) for e in engine.container.get("env") or [] if isinstance(e, dict)]
        used = engine_versions.features_used(engine.flags.values, kv_connectors(engine.flags), env_names)
        verdict = rules.image_has_features(image, image_version(image), used, image_name=engine_versions.VLLM_RBLN)
        if verdict:
            found.append(Finding(engine.resource, f"container {engine.name} image: {verdict}"))
    return found


def vllm_args_known(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every `vllm serve` argument of a vllm-rbln engine of the target release parses with vLLM's own options (the
    same data and check as the config gate's extraArgs rule), else vLLM exits with status 2 at start."""
    found = []
    for engine in engines(manifests):
        image = str(engine.container.get("image") or "")
        argv = serve_argv(engine.container)
        if argv is None or not vllm_args.judges(image):
            continue
        verdict = vllm_args.judge(argv)
        if verdict:
            found.append(Finding(engine.resource, f"container {engine.name} args: {vllm_args.refusal(verdict)}"))
    return found


def lmcache_env_known(manifests: list[dict], facts: Facts) -> list[Finding]:
    """LMCACHE_* names an engine gets (its env and its envFrom ConfigMaps) that lmcache reads, and no top-level LMCache
    key inside LMCACHE_EXTRA_CONFIG (core.versions.lmcache, the same facts as the config gate)."""
    found = []
    for engine in engines(manifests):
        env = effective_env(engine.template, engine.container, manifests)
        for name in sorted(env):
            problem = lmcache_facts.unknown_env(name)
            if problem:
                found.append(Finding(engine.resource, f"container {engine.name} env {name}: {problem}"))
        # An extra config LMCache cannot read is rds-memory-budget's finding; it has no keys to judge here.
        extra, _ = serving.lmcache_extra_config(env.get(LMCACHE_EXTRA_CONFIG_ENV) or "")
        for extra_key in sorted(extra):
            problem = lmcache_facts.misplaced_extra_config_key(str(extra_key))
            if problem:
                found.append(
                    Finding(
                        engine.resource, f"container {engine.name} env LMCACHE_EXTRA_CONFIG key {extra_key}: {problem}"
                    )
                )
    return found
