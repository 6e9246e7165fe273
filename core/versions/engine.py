"""Facts of the engine image: the vllm-rbln release it is, the vLLM that release builds on, the lmcache-rbln it
ships with, and the first vllm-rbln release that has each flag, KV connector and env var the render relies on.

Every fact was read from the published wheels (`pip download --no-deps vllm-rbln==X vllm==Y`, then the file named
in `source`); docs/consumers-engine.md says how to read them again. The image tag is the vllm-rbln version
(`rebellions/vllm-rbln:0.12.0` is vllm-rbln 0.12.0), so a pin is judged by its tag.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from core.versions import Feature, Version, image_name

VLLM_RBLN = "vllm-rbln"
IMAGE_REPOSITORY = "rebellions/vllm-rbln"
# The release the stacks target. vllm-rbln 0.11.0 is the first with every flag, connector and env var the render uses,
# but 0.12.0 is the first that ships lmcache-rbln 0.12.0, the first lmcache-rbln that reads `rds_max_chunks`.
TARGET = Version(0, 12, 0)
DEFAULT_IMAGE = f"{IMAGE_REPOSITORY}:{TARGET}"


@dataclasses.dataclass(frozen=True)
class Release:
    """One vllm-rbln release: the vLLM it pins and the lmcache-rbln its `kv-connectors` extra pins (None: no pin)."""

    vllm_rbln: Version
    vllm: Version
    lmcache_rbln: Version | None
    source: str


def _version(text: str) -> Version:
    version = Version.parse(text)
    if version is None:
        raise ValueError(f"not a version: {text!r}")
    return version


def _release(vllm_rbln: str, vllm: str, lmcache_rbln: str | None = None, *, wheel: str | None = None) -> Release:
    pins = f"Requires-Dist vllm=={vllm}+cpu" + (
        f", lmcache-rbln>={lmcache_rbln} (extra kv-connectors)" if lmcache_rbln else ""
    )
    return Release(
        _version(vllm_rbln),
        _version(vllm),
        _version(lmcache_rbln) if lmcache_rbln else None,
        f"vllm-rbln=={wheel or vllm_rbln} METADATA: {pins}",
    )


# Every release from the one the stacks used to pin (0.10.2) to the target, read from each wheel's METADATA.
RELEASES: tuple[Release, ...] = (
    _release("0.10.2", "0.13.0"),
    _release("0.10.3", "0.18.0"),
    _release("0.10.4", "0.18.0"),
    _release("0.11.0", "0.22.0"),
    _release("0.11.1", "0.22.0"),
    _release("0.11.2", "0.24.0", wheel="0.11.2.post1"),
    _release("0.12.0", "0.30.0", "0.12.0"),
)
OLDEST_CHECKED = RELEASES[0].vllm_rbln


def is_engine_image(image: str) -> bool:
    """A vllm-rbln image (any registry or mirror): its tag is a vllm-rbln version. Other vLLM images are not judged
    against these facts (their tags are vLLM versions, or anything)."""
    return image_name(image) == VLLM_RBLN


def release(vllm_rbln: Version) -> Release | None:
    """The listed release of that version, None for one not read here (a patch or newer release)."""
    return next((r for r in RELEASES if r.vllm_rbln == vllm_rbln), None)


def target_release() -> Release:
    found = release(TARGET)
    if found is None:
        raise LookupError(
            f"the target vllm-rbln {TARGET} is not in RELEASES: add its row (vLLM and lmcache-rbln pins)."
        )
    return found


# lmcache-rbln reads `rds_max_chunks` (LMCACHE_EXTRA_CONFIG) from this version on; older ones ignore it, so the RDS
# index is not bounded (reference design section 5; lmcache-rbln is not published where it could be read here).
LMCACHE_RBLN_READS_RDS_MAX_CHUNKS = Feature(
    "lmcache-rbln",
    "extra_config key",
    "rds_max_chunks",
    Version(0, 12, 0),
    "reference design section 5 (lmcache-rbln below 0.12.0 ignores rds_max_chunks)",
)


def lmcache_rbln_version(vllm_rbln: Version | None) -> Version | None:
    """The lmcache-rbln in an image of this vllm-rbln version: one fact of the image, not a setting that can disagree
    with it. The RBLN SDK releases them together: vllm-rbln 0.12.0 pins lmcache-rbln >=0.12.0,<0.12.1. Releases whose
    wheel pins none (before 0.12.0) ship the lmcache-rbln of their own SDK release, the same version number. None when
    the image's tag is not a version (`latest`, a digest), which image hygiene refuses elsewhere."""
    if vllm_rbln is None:
        return None
    listed = release(vllm_rbln)
    if listed is not None and listed.lmcache_rbln is not None:
        return listed.lmcache_rbln
    return vllm_rbln


# --- the first vllm-rbln release that has each thing the render uses -----------------------------------------------

_VLLM_FLAG_OLDEST = (
    f"vllm==0.13.0 vllm/engine/arg_utils.py or vllm/entrypoints/openai/cli_args.py: in the vLLM of "
    f"vllm-rbln {OLDEST_CHECKED}, the oldest release checked"
)


def _flag(name: str) -> Feature:
    return Feature(VLLM_RBLN, "flag", name, OLDEST_CHECKED, _VLLM_FLAG_OLDEST)


# Every flag core.serving generates for either role (serving.FLAG_FIELDS); a test keeps the two lists equal.
FLAGS: tuple[Feature, ...] = (
    *(
        _flag(name)
        for name in (
            "--revision",
            "--served-model-name",
            "--port",
            "--block-size",
            "--max-model-len",
            "--max-num-batched-tokens",
            "--max-num-seqs",
            "--kv-cache-dtype",
            "--tensor-parallel-size",
            "--pipeline-parallel-size",
            "--data-parallel-size",
            "--data-parallel-size-local",
            "--data-parallel-rpc-port",
            "--enable-expert-parallel",
            "--enable-prefix-caching",
            "--no-enable-prefix-caching",
            "--enable-chunked-prefill",
            "--no-enable-chunked-prefill",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "--reasoning-parser",
            "--gpu-memory-utilization",
            "--speculative-config",
            "--kv-transfer-config",
        )
    ),
    # Not in vLLM 0.13.0 or 0.18.0 (argparse exits: "unrecognized arguments"); first in vLLM 0.22.0, which vllm-rbln
    # 0.11.0 is the first release to build on.
    Feature(
        VLLM_RBLN,
        "flag",
        "--data-parallel-multi-port-external-lb",
        Version(0, 11, 0),
        "vllm==0.22.0 vllm/engine/arg_utils.py (EngineArgs.data_parallel_multi_port_external_lb), pinned by "
        "vllm-rbln==0.11.0; absent from vllm==0.13.0 and 0.18.0 arg_utils.py",
    ),
    # The engines' KV events (router.prefixCache precise): read in the vLLM of the target (its `vllm serve` parser and
    # vllm/config/kv_events.py KVEventsConfig: enable_kv_cache_events, publisher zmq, endpoint, topic); older wheels
    # were not read for it, so an older pin is refused with a precise prefix cache rather than trusted.
    Feature(
        VLLM_RBLN,
        "flag",
        "--kv-events-config",
        TARGET,
        f"vllm==0.30.0 (pinned by vllm-rbln=={TARGET}) `vllm serve` parser: --kv-events-config "
        "(core/versions/data/vllm-0.30.0-serve.json) and vllm/config/kv_events.py",
    ),
    # The drain after SIGTERM (rollout.drainSeconds): added by vLLM PR #34730 (2026-02), reverted and re-added by #36666
    # (2026-03); no older wheel was read for it, so the vLLM of the target is where it is known to be. An older pin is
    # refused with a drain rather than trusted (a vLLM without the flag exits on it: the engine never starts); with
    # rollout.drainSeconds 0 the render passes no flag.
    Feature(
        VLLM_RBLN,
        "flag",
        "--shutdown-timeout",
        TARGET,
        f"vllm==0.30.0 (pinned by vllm-rbln=={TARGET}) `vllm serve` parser: --shutdown-timeout, int seconds "
        "(core/versions/data/vllm-0.30.0-serve.json)",
    ),
)

_CONNECTOR_SOURCE = "vllm-rbln==0.10.3 vllm_rbln/distributed/kv_transfer/kv_connector/factory.py (register_connector)"
# Class names of `--kv-transfer-config` (core.serving's connector JSON). MultiConnector is vLLM's own.
CONNECTORS: tuple[Feature, ...] = (
    Feature(VLLM_RBLN, "connector", "RblnNixlConnector", Version(0, 10, 3), _CONNECTOR_SOURCE + "; not in 0.10.2"),
    Feature(VLLM_RBLN, "connector", "RBLNLMCacheConnectorV1", Version(0, 10, 3), _CONNECTOR_SOURCE + "; not in 0.10.2"),
    Feature(
        VLLM_RBLN,
        "connector",
        "MultiConnector",
        OLDEST_CHECKED,
        "vllm==0.13.0 vllm/distributed/kv_transfer/kv_connector/factory.py (vLLM's own connector)",
    ),
)

# VLLM_RBLN_* variables the render sets; vllm-rbln reads them in vllm_rbln/rbln_envs.py (envs.py from 0.11.1).
ENV: tuple[Feature, ...] = (
    Feature(
        VLLM_RBLN, "env var", "VLLM_RBLN_USE_VLLM_MODEL", OLDEST_CHECKED, "vllm-rbln==0.10.2 vllm_rbln/rbln_envs.py"
    ),
    Feature(VLLM_RBLN, "env var", "VLLM_RBLN_AUTO_PORT", OLDEST_CHECKED, "vllm-rbln==0.10.2 vllm_rbln/rbln_envs.py"),
    Feature(
        VLLM_RBLN,
        "env var",
        "VLLM_RBLN_SUB_BLOCK_CACHE",
        Version(0, 10, 3),
        "vllm-rbln==0.10.3 vllm_rbln/rbln_envs.py; not in 0.10.2",
    ),
    Feature(
        VLLM_RBLN,
        "env var",
        "VLLM_RBLN_USE_DEVICE_TENSOR",
        Version(0, 10, 4),
        "vllm-rbln==0.10.4 vllm_rbln/rbln_envs.py; not in 0.10.2/0.10.3",
    ),
)

FEATURES: tuple[Feature, ...] = FLAGS + CONNECTORS + ENV
_BY_KIND = {kind: {f.name: f for f in FEATURES if f.kind == kind} for kind in ("flag", "connector", "env var")}


def features_used(flags: Iterable[str], connectors: Iterable[str], env_names: Iterable[str]) -> list[Feature]:
    """The listed features among what one engine container is given: its flag names (long form), the connector
    classes of its `--kv-transfer-config` and its env names. What is not listed is not judged here (an extraArgs
    flag is judged against vLLM's own parser, core.versions.vllm_args)."""
    used = [_BY_KIND["flag"].get(name) for name in flags]
    used += [_BY_KIND["connector"].get(name) for name in connectors]
    used += [_BY_KIND["env var"].get(name) for name in env_names]
    return sorted({f for f in used if f is not None}, key=lambda f: (f.kind, f.name))


def flag_names(argv: Iterable[str]) -> list[str]:
    """The long option names of a `vllm serve` argv (`--x=1` -> `--x`; vLLM reads `--x_y` as `--x-y`)."""
    names = []
    for token in argv:
        if token.startswith("--"):
            names.append("--" + token[2:].split("=", 1)[0].replace("_", "-"))
    return names


def env_names_read() -> frozenset[str]:
    """VLLM_RBLN_* names the render sets that vllm-rbln must read (checked against the target wheel by a test)."""
    return frozenset(f.name for f in ENV)


# Prometheus series the engines serve on /metrics that an autoscaler may scale a role on (core/autoscaling.py). Read
# in the vLLM that the target vllm-rbln pins; no older release was read for them, so 0.12.0 is where they are known to
# be (an older pin is refused for autoscaling on them rather than trusted).
_METRICS_SOURCE = (
    f"vllm==0.30.0 vllm/v1/metrics/loggers.py (PrometheusStatLogger: {{}}), the vLLM vllm-rbln "
    f"{TARGET} pins; the oldest release read for it"
)
METRICS: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature(VLLM_RBLN, "metric", "vllm:num_requests_waiting", TARGET, _METRICS_SOURCE.format("line 509")),
        Feature(VLLM_RBLN, "metric", "vllm:kv_cache_usage_perc", TARGET, _METRICS_SOURCE.format("line 567")),
    )
}

# The EPP's tokenizer (router.prefixCache precise) is `vllm launch render` of the vLLM the target vllm-rbln builds on
# (its wheel requires vllm==X+cpu): that release's CPU image, so a prompt becomes the same tokens in the router as in
# the engines. `launch render` is in vllm 0.30.0 (vllm/entrypoints/cli/launch.py, RenderSubcommand: a GPU-less server
# of /v1/completions/render and /v1/chat/completions/render, the routes llm-d-router v0.10.0's token-producer calls).
TOKENIZER_REPOSITORY = "vllm/vllm-openai-cpu"
TOKENIZER_IMAGE = f"{TOKENIZER_REPOSITORY}:v{target_release().vllm}"
TOKENIZER_COMMAND = ("vllm", "launch", "render")


def is_tokenizer_image(image: str) -> bool:
    """The vLLM CPU image the EPP's tokenizer container runs (any registry, any tag)."""
    return image_name(image) == image_name(TOKENIZER_REPOSITORY)
