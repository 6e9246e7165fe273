"""Rules of the gate on image pins: every image the version facts judge (core/versions: the vllm-rbln engine, the
llm-d EPP and P/D sidecar) names its release in its tag, so the facts are read for that release, not guessed.
"""

from __future__ import annotations

from collections.abc import Iterable

from core import rules
from core.config import StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key
from core.versions import engine as engine_versions
from core.versions import image_version
from core.versions import router as router_versions

ENGINE_GUESS = (
    "the flags, KV connectors and env vars its render uses, the vLLM metrics autoscaling reads and the lmcache-rbln "
    "that must read rds_max_chunks are not checked against it"
)
EPP_GUESS = (
    "the shape of the EndpointPickerConfig (its router generation) and the plugin types and apiVersion it may use "
    "are guessed: the newest generation's"
)
SIDECAR_GUESS = (
    "the flags it is given (its generation's engine-port flag) and whether it can run SSRF protection against the GA "
    "InferencePool are guessed: the newest release's"
)


def pinned_images(cfg: StackConfig) -> list[tuple[str, str, str, str, str]]:
    """(key, image, consumer, facts, what would be guessed) of each image of the stack the version facts judge: a
    vllm-rbln engine image (another engine image is not judged by them), the EPP, and the P/D sidecar in P/D."""
    found = []
    if engine_versions.is_engine_image(cfg.engine.image):
        found.append(
            ("engine.image", cfg.engine.image, engine_versions.VLLM_RBLN, "core/versions/engine.py", ENGINE_GUESS)
        )
    found.append(("router.image", cfg.router.image, router_versions.EPP, "core/versions/router.py", EPP_GUESS))
    if cfg.topology == "pd":
        found.append(
            (
                "decode.sidecar.image",
                cfg.decode.sidecar.image,
                router_versions.SIDECAR,
                "core/versions/router.py",
                SIDECAR_GUESS,
            )
        )
    return found


EXAMPLE_TAGS = {
    engine_versions.VLLM_RBLN: str(engine_versions.TARGET),
    router_versions.EPP: f"v{router_versions.TARGET}",
    router_versions.SIDECAR: f"v{router_versions.TARGET}",
}


def rule_images_dated(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    for name, image, consumer, facts, guessed in pinned_images(cfg):
        problem = rules.image_pin_dated(
            image,
            image_version(image),
            image_name=name,
            consumer=consumer,
            facts=facts,
            guessed=guessed,
            example_tag=EXAMPLE_TAGS[consumer],
        )
        if problem:
            yield Issue(key(name), problem, "image-pin-dated")
