"""Rules 4-5: memory budgets and serving arguments that only fail at boot (or never, silently).

The RDS tier keeps an index in chiplet-0 memory: `rds_max_chunks x 2 MiB x drives + staging` must fit
in what `--gpu-memory-utilization` leaves free, and lmcache-rbln older than 0.12.0 ignores
`rds_max_chunks` altogether. The figures come from `components.sizing.rds_budget`, the same function
the config gate and `python -m stacks plan` use; the inputs are read back from the engine's env and args.
"""
from __future__ import annotations

from typing import Optional

from components import sizing
from policy.facts import Facts
from policy.manifests import Engine, Finding, env_flag_on, engines, image_tag, parse_structured

EXTRA_CONFIG_ENV = "LMCACHE_EXTRA_CONFIG"
CHUNK_SIZE_ENV = "LMCACHE_CHUNK_SIZE"
SUB_BLOCK_ENV = "VLLM_RBLN_SUB_BLOCK_CACHE"
LMCACHE_VERSION_ANNOTATION = "rebel100.ai/lmcache-rbln-version"


def _rds_max_chunks(engine: Engine) -> tuple[Optional[int], Optional[str]]:
    """(rds_max_chunks, None), (None, None) when not set, (None, problem) when unreadable."""
    text = engine.env(EXTRA_CONFIG_ENV)
    if text is None:
        return None, None
    extra = parse_structured(text)
    if not isinstance(extra, dict):
        return None, f"env {EXTRA_CONFIG_ENV} {text!r} is not a JSON object, so LMCache cannot read it. Write it as JSON, e.g. {{\"rds_max_chunks\": 1000}}."
    if "rds_max_chunks" not in extra:
        return None, None
    value = extra["rds_max_chunks"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None, f"env {EXTRA_CONFIG_ENV} rds_max_chunks {value!r} is not a positive integer. Set a chunk count such as 1000."
    return value, None


def _utilization(engine: Engine) -> tuple[Optional[float], Optional[str]]:
    """(--gpu-memory-utilization, how to name it); (None, engine default) when absent, (None, None) when unreadable."""
    if engine.flags.get("--gpu-memory-utilization") is None:
        return None, f"the engine default --gpu-memory-utilization {sizing.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION:g}"
    value = engine.flags.number("--gpu-memory-utilization")
    return value, (None if value is None else f"--gpu-memory-utilization {value:g}")


def _mib(value: float) -> str:
    """MiB as a plain number with at most one decimal (7372.8, 16512)."""
    return f"{value:.1f}".removesuffix(".0")


def rds_memory_budget(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 4: the RDS chunk index and staging buffer fit in the chiplet-0 memory the engine leaves free."""
    found = []
    for engine in engines(manifests):
        chunks, problem = _rds_max_chunks(engine)
        if problem:
            found.append(Finding(engine.resource, f"container {engine.name}: {problem}"))
        utilization, utilization_text = _utilization(engine)
        if chunks is None or utilization_text is None:
            continue  # not on RDS, or an unreadable utilization (engine-args-in-range reports it)
        budget = sizing.rds_budget(
            rds_max_chunks=chunks, chunk_overhead_mib=facts.rds_chunk_overhead_mib, drives=facts.nvme_drives_per_node,
            staging_mib=facts.rds_staging_buffer_mib, hbm_per_chiplet_gib=facts.hbm_per_chiplet_gib,
            gpu_memory_utilization=utilization)
        if budget.fits:
            continue
        chunk_size = engine.env(CHUNK_SIZE_ENV)
        capacity = ""
        if chunk_size and chunk_size.isdigit():
            capacity = f" ({sizing.rds_tokens_per_rank(chunks, int(chunk_size))} tokens per rank at {CHUNK_SIZE_ENV} {chunk_size})"
        found.append(Finding(engine.resource,
            f"container {engine.name} env {EXTRA_CONFIG_ENV} rds_max_chunks {chunks}{capacity} needs "
            f"{chunks} x {_mib(budget.chunk_overhead_mib)} MiB x {budget.drives} NVMe drives + {_mib(budget.staging_mib)} MiB "
            f"staging = {_mib(budget.used_mib)} MiB of chiplet-0 memory, but {utilization_text} leaves only "
            f"{_mib(budget.chiplet0_mib)} MiB x (1 - {budget.gpu_memory_utilization:g}) = {_mib(budget.free_mib)} MiB "
            f"(rule: rds_max_chunks x chunk overhead x drives + staging <= chiplet-0 HBM x (1 - gpu-memory-utilization)); "
            f"RDS would run out of device memory at run time. Lower rds_max_chunks to at most "
            f"{budget.max_chunks_that_fit}, or --gpu-memory-utilization to at most {budget.max_utilization_that_fits:g}; "
            f"change the two together."))
    return found


def lmcache_version(engine: Engine) -> tuple[Optional[str], str]:
    """lmcache-rbln version: the pod template annotation, else the tag of an lmcache image; (None, '') if unknown."""
    annotated = engine.template.annotations.get(LMCACHE_VERSION_ANNOTATION)
    if annotated:
        return str(annotated), f"annotation {LMCACHE_VERSION_ANNOTATION} {annotated}"
    image = str(engine.container.get("image", ""))
    repository, tag, _ = image_tag(image)
    if "lmcache" in repository.lower() and tag:
        return tag, f"image {image}"
    return None, ""


def lmcache_reads_rds_max_chunks(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 4b: rds_max_chunks set for an lmcache-rbln that ignores it (older than 0.12.0)."""
    found = []
    for engine in engines(manifests):
        chunks, _ = _rds_max_chunks(engine)
        version, source = lmcache_version(engine)
        if chunks is None or sizing.lmcache_reads_rds_max_chunks(version) is not False:
            continue
        minimum = ".".join(str(part) for part in sizing.LMCACHE_RBLN_MIN_FOR_RDS_MAX_CHUNKS)
        found.append(Finding(engine.resource,
            f"container {engine.name} env {EXTRA_CONFIG_ENV} rds_max_chunks {chunks} is ignored by lmcache-rbln "
            f"{version} (from {source}): only {minimum} and later read it, so the RDS index is not bounded by the "
            f"budget this stack was checked against. Use an image with lmcache-rbln {minimum} or later."))
    return found


def engine_args_in_range(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 5: gpu-memory-utilization in (0, 1]; block size a multiple of the sub-block; max-model-len <= the model's."""
    found = []
    for engine in engines(manifests):
        flags = engine.flags
        raw = flags.get("--gpu-memory-utilization")
        utilization = flags.number("--gpu-memory-utilization")
        if raw is not None and (utilization is None or not 0 < utilization <= 1):
            found.append(Finding(engine.resource,
                f"container {engine.name} arg --gpu-memory-utilization {raw} is outside (0, 1]: it is the share of "
                f"device memory the engine may take. Use a fraction such as 0.8 (prefill with RDS) or 0.9."))
        block, batched = flags.integer("--block-size"), flags.integer("--max-num-batched-tokens")
        for flag, value in (("--block-size", block), ("--max-num-batched-tokens", batched), ("--max-model-len", flags.integer("--max-model-len"))):
            if flags.get(flag) is not None and value is None:
                found.append(Finding(engine.resource, f"container {engine.name} arg {flag} {flags.get(flag)!r} is not an integer. Set a token count."))
        if env_flag_on(engine.container, SUB_BLOCK_ENV) and block and batched:
            unit = sizing.prefix_reuse_unit(block, batched, sub_block_cache=True)
            if block % unit:
                found.append(Finding(engine.resource,
                    f"container {engine.name} arg --block-size {block} is not a multiple of the sub-block size "
                    f"--max-num-batched-tokens {batched} while env {SUB_BLOCK_ENV}=1: sub-block caching splits each KV "
                    f"block into whole sub-blocks. Choose a block size divisible by {unit}, or set {SUB_BLOCK_ENV}=0."))
        max_len = flags.integer("--max-model-len")
        if max_len is not None and max_len > facts.model_max_context:
            found.append(Finding(engine.resource,
                f"container {engine.name} arg --max-model-len {max_len} exceeds the model's context of "
                f"{facts.model_max_context} tokens (modelMaxContext): the engine refuses it, or serves positions the "
                f"model was not trained for. Set --max-model-len to at most {facts.model_max_context}."))
    return found
