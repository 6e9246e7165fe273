"""Rules 4-5: memory budgets and serving arguments that only fail at boot (or never, silently).

The RDS tier keeps an index in chiplet-0 memory: `rds_max_chunks x 2 MiB x drives + staging` must fit
in what `--gpu-memory-utilization` leaves free, and lmcache-rbln older than 0.12.0 ignores
`rds_max_chunks` altogether. The figures come from `core.sizing.rds_budget` and the verdicts from
`core.rules`, the same functions the config gate uses; the inputs are read back from the engine's env
(its `envFrom` ConfigMaps included) and args, and the drives, chunk overhead, staging buffer and HBM
from the annotation `rebel100.ai/rds-budget` of that ConfigMap (RdsTier writes it), else the pack config.
"""

from __future__ import annotations

from core import rules, serving, sizing
from core.labels import RDS_BUDGET_ANNOTATION, RDS_BUDGET_KEYS
from core.serving import LMCACHE_CHUNK_SIZE_ENV, LMCACHE_EXTRA_CONFIG_ENV
from policy.facts import Facts
from policy.read.devices import is_rebel100
from policy.read.engines import Engine, engines
from policy.read.env import effective_env, env_flag_on, env_from_config_maps, parse_structured
from policy.read.lmcache import SUB_BLOCK_ENV, lmcache_version
from policy.read.objects import Finding


def _budget_inputs(engine: Engine, manifests: list[dict], facts: Facts) -> tuple[dict, str]:
    """(drives, chunk overhead, staging, HBM) the budget is judged with, and where they came from:
    the annotation of the engine's LMCache ConfigMap (what the stack was checked against), else the pack config."""
    inputs = dict(
        zip(
            RDS_BUDGET_KEYS,
            (
                facts.nvme_drives_per_node,
                facts.rds_chunk_overhead_mib,
                facts.rds_staging_buffer_mib,
                facts.hbm_per_chiplet_gib,
            ),
            strict=True,
        )
    )
    for config_map in env_from_config_maps(engine.template, engine.container, manifests):
        text = ((config_map.get("metadata") or {}).get("annotations") or {}).get(RDS_BUDGET_ANNOTATION)
        annotated = parse_structured(text) if text else None
        if isinstance(annotated, dict):
            numbers = {
                k: v
                for k, v in annotated.items()
                if k in inputs and isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            name = (config_map.get("metadata") or {}).get("name")
            return {**inputs, **numbers}, f"ConfigMap {name} annotation {RDS_BUDGET_ANNOTATION}"
    return inputs, "the policy config"


def _rds_max_chunks(engine: Engine, manifests: list[dict]) -> tuple[int | None, str | None]:
    """(rds_max_chunks, None), (None, None) when not set, (None, problem) when LMCache would not read it."""
    text = effective_env(engine.template, engine.container, manifests).get(LMCACHE_EXTRA_CONFIG_ENV)
    extra, problem = serving.lmcache_extra_config(text or "")
    if problem:
        return None, f"env {problem}"
    chunks, problem = serving.rds_max_chunks(extra)
    if problem:
        return None, f"env {problem}"
    return chunks, None


def _utilization(engine: Engine) -> tuple[float | None, str | None]:
    """(--gpu-memory-utilization, how to name it); (None, engine default) when absent, (None, None) when unreadable."""
    if engine.flags.get("--gpu-memory-utilization") is None:
        return None, f"the engine default --gpu-memory-utilization {sizing.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION:g}"
    value = engine.flags.number("--gpu-memory-utilization")
    return value, (None if value is None else f"--gpu-memory-utilization {value:g}")


def rds_memory_budget(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 4: the RDS chunk index and staging buffer fit in the chiplet-0 memory the engine leaves free."""
    found = []
    for engine in engines(manifests):
        if not is_rebel100(engine.template, manifests, facts.npu_device_class):
            continue  # the budget is of a Rebel100 chiplet
        chunks, problem = _rds_max_chunks(engine, manifests)
        if problem:
            found.append(Finding(engine.resource, f"container {engine.name}: {problem}"))
        utilization, utilization_text = _utilization(engine)
        if chunks is None or utilization_text is None:
            continue  # not on RDS, or an unreadable utilization (engine-args-in-range reports it)
        inputs, source = _budget_inputs(engine, manifests, facts)
        budget = sizing.rds_budget(
            rds_max_chunks=chunks,
            chunk_overhead_mib=inputs["chunkOverheadMib"],
            drives=int(inputs["nvmeDrives"]),
            staging_mib=inputs["stagingBufferMib"],
            hbm_per_chiplet_gib=inputs["hbmPerChipletGib"],
            gpu_memory_utilization=utilization,
        )
        utilization_name = (
            "--gpu-memory-utilization" if utilization is not None else "the engine default --gpu-memory-utilization"
        )
        verdict = rules.rds_budget_fits(budget, chunks_name="rds_max_chunks", utilization_name=utilization_name)
        if verdict:
            chunk_size = effective_env(engine.template, engine.container, manifests).get(LMCACHE_CHUNK_SIZE_ENV)
            capacity = ""
            if chunk_size and chunk_size.isdigit():
                capacity = (
                    f", {sizing.rds_tokens_per_rank(chunks, int(chunk_size))} tokens per rank at "
                    f"{LMCACHE_CHUNK_SIZE_ENV} {chunk_size}"
                )
            found.append(
                Finding(
                    engine.resource,
                    f"container {engine.name} env {LMCACHE_EXTRA_CONFIG_ENV} (drives, overhead, staging and HBM from "
                    f"{source}{capacity}): {verdict}",
                )
            )
    return found


def lmcache_reads_rds_max_chunks(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 4b: rds_max_chunks set for an lmcache-rbln that ignores it (older than 0.12.0)."""
    found = []
    for engine in engines(manifests):
        chunks, _ = _rds_max_chunks(engine, manifests)
        version, source = lmcache_version(engine)
        verdict = rules.lmcache_reads_rds_max_chunks(version, chunks) if chunks is not None else None
        if verdict:
            found.append(
                Finding(
                    engine.resource,
                    f"container {engine.name} env {LMCACHE_EXTRA_CONFIG_ENV} (version from {source}): {verdict}",
                )
            )
    return found


def engine_args_in_range(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 5: gpu-memory-utilization in (0, 1]; block size a multiple of the sub-block; max-model-len <= the
    model's."""
    found = []
    for engine in engines(manifests):
        flags = engine.flags
        raw = flags.get("--gpu-memory-utilization")
        utilization = flags.number("--gpu-memory-utilization")
        if raw is not None:
            verdict = f"{raw!r} is not a number." if utilization is None else rules.utilization_in_range(utilization)
            if verdict:
                found.append(
                    Finding(engine.resource, f"container {engine.name} arg --gpu-memory-utilization: {verdict}")
                )
        block, batched = flags.integer("--block-size"), flags.integer("--max-num-batched-tokens")
        for flag, value in (
            ("--block-size", block),
            ("--max-num-batched-tokens", batched),
            ("--max-model-len", flags.integer("--max-model-len")),
        ):
            if flags.get(flag) is not None and value is None:
                found.append(
                    Finding(
                        engine.resource,
                        f"container {engine.name} arg {flag} {flags.get(flag)!r} is not an integer. Set a token count.",
                    )
                )
        if env_flag_on(engine.container, SUB_BLOCK_ENV) and block and batched:
            verdict = rules.block_holds_sub_blocks(
                block, batched, sub_block_name=f"--max-num-batched-tokens, with {SUB_BLOCK_ENV}=1"
            )
            if verdict:
                found.append(Finding(engine.resource, f"container {engine.name} arg --block-size: {verdict}"))
        max_len = flags.integer("--max-model-len")
        if max_len is not None:
            verdict = rules.max_model_len_fits(max_len, facts.model_max_context, context_name="modelMaxContext")
            if verdict:
                found.append(Finding(engine.resource, f"container {engine.name} arg --max-model-len: {verdict}"))
    return found
