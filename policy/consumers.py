"""The engine image accepts what its pod gives it: the programs that read the render, judged from their own facts.

A vllm-rbln image must be at least the first release of every flag, KV connector and env var its container uses
(core.versions.engine, the same facts and rule as the config gate's `engine.image` check).
"""
from __future__ import annotations

from core import rules
from core.versions import engine as engine_versions
from core.versions import image_version
from policy.facts import Facts
from policy.manifests import Finding, engines, kv_connectors


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
