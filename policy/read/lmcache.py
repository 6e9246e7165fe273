"""Reading LMCache: the lmcache-rbln version of an engine (the env names it reads are core.serving's)."""

from __future__ import annotations

from core.formats import image_reference
from core.labels import LMCACHE_VERSION_ANNOTATION
from core.serving import SUB_BLOCK_CACHE_ENV
from core.versions import engine as engine_versions
from core.versions import image_version
from policy.read.engines import Engine

SUB_BLOCK_ENV = SUB_BLOCK_CACHE_ENV


def lmcache_version(engine: Engine) -> tuple[str | None, str]:
    """lmcache-rbln version: the one a vllm-rbln image ships (derived from its tag, core.versions.engine), else the
    pod template annotation of a foreign manifest whose image is not vllm-rbln, else the tag of an lmcache image;
    (None, '') if unknown."""
    image = str(engine.container.get("image", ""))
    if engine_versions.is_engine_image(image):
        shipped = engine_versions.lmcache_rbln_version(image_version(image))
        return (str(shipped), f"image {image}, which ships lmcache-rbln {shipped}") if shipped else (None, "")
    annotated = engine.template.annotations.get(LMCACHE_VERSION_ANNOTATION)
    if annotated:
        return str(annotated), f"annotation {LMCACHE_VERSION_ANNOTATION} {annotated}"
    reference = image_reference(image)
    if reference is not None and "lmcache" in reference.repository.lower() and reference.tag:
        return reference.tag, f"image {image}"
    return None, ""
