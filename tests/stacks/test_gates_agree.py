"""Property tests: the config gate and the policy pack judge the same stack, and judge it right.

For generated configs within the schema, the gate's verdict (core.gate) and the pack's verdict on the
render of the same config (stacks.render.render_unchecked, which skips the gate as a hand edit past it
would) both equal the verdict of an oracle of their own: `reference_verdict` below, the reference
design's rules written out again here with no call into core.rules or core.sizing. Both gates call
one function per rule, so their agreement alone would not notice a wrong rule; the oracle does.
The verdicts are findings, not policy names: the oracle says for each broken rule which role it is about (the pack's
resource: that role's Deployment, or its ScaledObject) and at which key path the gate reports it, so a finding on the
wrong resource or key, or a rule that fires for the wrong role, fails as surely as a missing one. The fixed
boundaries are also checked message by message (`test_the_boundaries_in_full`). Hypothesis runs derandomized and
without its example database, so CI tries the same configs on every run (REBEL100_PROPERTY_RANDOM=1 explores).
Random and malformed stack files always end in one clear error line, never a traceback. Every key of the schema has a
row in FIELDS (its kind, by hand, and a strategy of values a user might write): a stack file with some of them, of
their kind or another, written as YAML text, is refused at each mistyped key naming its type, and a new key without a
row fails `test_every_field_has_a_strategy`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from core import gate, stackfile
from core.config import StackConfig, unwrap_optional
from policy import catalog, facts, levels
from stacks.render import render_unchecked

# The rules the gate and the pack both apply (the gate tags its issues with the policy's name).
SHARED = (
    "pp-with-dp",
    "npu-devices-fit-node",
    "parallelism-fits-model",
    "engine-args-in-range",
    "rds-memory-budget",
    "lmcache-reads-rds-max-chunks",
    "no-literal-secrets",
    "engine-image-has-features",
    "image-pin-dated",
    "vllm-args-known",
    "pool-endpoints-serve",
    "ports-distinct",
    "sidecar-ssrf-protection",
    "sidecar-ssrf-capable",
    "autoscaling-bounds",
    "autoscaling-fits-site",
    "autoscaling-rollout",
    "autoscaling-signal",
    "autoscaling-target",
    "autoscaling-scrape-interval",
    "engine-grace-covers-drain",
    "pd-roles-agree",
    "inference-pool-wiring",
    "router-pd-profiles",
    "router-block-size",
    "router-precise-prefix-cache",
    "router-autotune-block-unit",
    "alerts-served",
)
# Policies of the pack that judge more than the shared rule: only their findings of that rule count, told by its words.
SHARED_IN_PART = {"inference-pool-wiring": "but an InferencePool allows at most"}
# The pack's resources of the router's rules: the EPP's config and the pool (the stack is named minimax-m27).
EPP_CONFIG = "ConfigMap/rebel100/minimax-m27-epp-config"
POOL = "InferencePool/rebel100/minimax-m27-pool"
ALERTS = "PrometheusRule/rebel100/minimax-m27-alerts"  # the pack's resource of the alerts' rule
# Routing sidecar pins: the target, one whose allowlist still reads the flat v1alpha2 selector, the v0.7 generation's.
SIDECAR_IMAGES = (
    "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
    "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0",
    "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1",
)
DIGEST = "sha256:" + "0123456789abcdef" * 4
# Pins the version facts cannot date (a digest alone, a tag that is no version) beside one they can (a tag with it).
UNDATED_SIDECAR = f"ghcr.io/llm-d/llm-d-router-disagg-sidecar@{DIGEST}"
EPP_IMAGES = (
    "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
    f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST}",
    f"ghcr.io/llm-d/llm-d-router-endpoint-picker@{DIGEST}",
    "ghcr.io/llm-d/llm-d-router-endpoint-picker:latest",
)
# Extra env names and what they are, by hand: a literal under a secret name is refused, a pointer is not.
SECRET_ENV = ("OPENAI_API_KEY", "REDIS_PASSWORD")
NOT_SECRET_ENV = ("OPENAI_API_KEY_FILE", "TOKENIZERS_PARALLELISM")
# Extra args vLLM 0.30.0's `vllm serve` does not know, by hand (it reads `--foo_bar` as `--foo-bar`).
UNKNOWN_TO_VLLM = ("--foo", "--foo_bar")
PROD = catalog.load_config(levels.environment_config("prod"))
# The same examples on every run (CI has no example database); REBEL100_PROPERTY_RANDOM=1 draws new ones.
DETERMINISTIC = dict(derandomize=os.environ.get("REBEL100_PROPERTY_RANDOM") != "1", database=None)

ROLE = {
    "replicas": st.integers(1, 4),
    "tensorParallelSize": st.sampled_from([1, 2, 4]),
    "pipelineParallelSize": st.sampled_from([1, 2, 4, 8, 64]),
    "dataParallelSize": st.sampled_from([1, 2, 3, 4, 8, 9]),  # 9: one rank more than a pool has target ports
    "enableExpertParallel": st.booleans(),
    "gpuMemoryUtilization": st.sampled_from([None, 0.0, 0.5, 0.75, 0.8, 0.9, 1.0, 1.2]),
    # A role's own block size and KV dtype, the engine's or not: prefill and decode must agree.
    "blockSize": st.sampled_from([4096, 8192]),
    "kvCacheDtype": st.sampled_from(["fp8", "auto"]),
    "extraArgs": st.sampled_from([[], ["--enforce-eager"], ["--foo"], ["--max-logprobs", "5", "--foo_bar=1"]]),
    "extraEnv": st.dictionaries(
        st.sampled_from(SECRET_ENV + NOT_SECRET_ENV), st.sampled_from(["", "x", "sk-123"]), max_size=2
    ),
}
# KEDA bounds around the edges (0 pods, inverted, beyond 4 nodes) and each signal, on either role.
ROLE["autoscaling"] = st.fixed_dictionaries(
    {"minReplicas": st.integers(0, 3), "maxReplicas": st.integers(1, 6)},
    optional={
        "metric": st.sampled_from(["engineQueue", "kvCacheUsage", "pdDecisionRate"]),
        # Around the fraction's edge (1 / 1.1 = 0.909...) and values in other units (80: a percentage).
        "target": st.sampled_from([0.5, 0.8, 0.909, 0.91, 1.0, 2.0, 80.0]),
    },
)
role = st.fixed_dictionaries({}, optional=ROLE)
# Decode's ports against each other in its pod: the sidecar's ranks (8000 up), the engine's (8200 up), the DP RPC port
# and the NIXL side channels (5600 up); each drawn on its default or onto another's.
decode_role = st.fixed_dictionaries(
    {},
    optional={
        **ROLE,
        "port": st.sampled_from([8200, 8002, 5600]),
        "dataParallelRpcPort": st.sampled_from([5555, 8201, 5601]),
        "sidecar": st.fixed_dictionaries(
            {},
            optional={
                "image": st.sampled_from((*SIDECAR_IMAGES, UNDATED_SIDECAR)),
                "port": st.sampled_from([8000, 5555]),
            },
        ),
    },
)
# The prefill port against the pool's targetPorts, the decode sidecar's 8000 + DP-local ranks, and below the NIXL side
# channels (5599: its second rank on 5600).
prefill_role = st.fixed_dictionaries({}, optional={**ROLE, "port": st.sampled_from([8000, 8003, 8100, 5599])})
stack_config = st.fixed_dictionaries(
    {},
    optional={
        "hardware": st.fixed_dictionaries(
            {},
            optional={
                "nodes": st.integers(1, 6),
                "npusPerNode": st.sampled_from([4, 8, 16]),
                "nvmeDrivesPerNode": st.integers(1, 4),
                "hbmPerChipletGib": st.sampled_from([24.0, 36.0, 64.0]),
            },
        ),
        "model": st.fixed_dictionaries(
            {},
            optional={
                "layers": st.sampled_from([3, 62]),
                "experts": st.sampled_from([0, 6, 8, 256]),
                "maxContext": st.sampled_from([100000, 204800]),
            },
        ),
        "engine": st.fixed_dictionaries(
            {},
            optional={
                "blockSize": st.sampled_from([1024, 4000, 4096]),
                "maxNumBatchedTokens": st.sampled_from([512, 1000]),
                "maxModelLen": st.sampled_from([8192, 204800, 300000]),
                "subBlockCache": st.booleans(),
                # The lmcache-rbln version is the image's; 0.10.x also lacks features the render uses.
                "image": st.sampled_from(
                    [f"rebellions/vllm-rbln:{tag}" for tag in ("0.10.2", "0.10.4", "0.11.2", "0.12.0", "v0.13")]
                    + [f"rebellions/vllm-rbln@{DIGEST}", "rebellions/vllm-rbln:latest"]
                ),
                "nixlSideChannelPort": st.sampled_from([5600, 5553, 8200]),
            },
        ),
        "prefill": prefill_role,
        "decode": decode_role,
        # The grace period around preStop + drain (15 + 90 = 105 by default): at it, one second short, none.
        "rollout": st.fixed_dictionaries(
            {},
            optional={
                "strategy": st.sampled_from(["Recreate", "RollingUpdate"]),
                "preStopSeconds": st.sampled_from([0, 15, 16]),
                "drainSeconds": st.sampled_from([0, 89, 90, 105]),
                "terminationGracePeriodSeconds": st.sampled_from([0, 30, 104, 105, 120]),
            },
        ),
        # Around the lookbacks: an instant query's 5m, and half the P/D decision rate's 2m range.
        "observability": st.fixed_dictionaries(
            {}, optional={"scrapeInterval": st.sampled_from(["30s", "1m", "61s", "5m", "5m1s", "10m"])}
        ),
        "router": st.fixed_dictionaries(
            {},
            optional={
                "decider": st.sampled_from(["prefix-based", "always-disagg"]),
                "nonCachedTokens": st.sampled_from([0, 16]),
                "autoTune": st.booleans(),
                "prefixCache": st.sampled_from(["approximate", "precise", "none"]),
                "blockSizeTokens": st.sampled_from([128, 512, 1000, 4096, 8192]),
                "image": st.sampled_from(EPP_IMAGES),
                # The EPP's three ports, each on its default or on another's.
                "grpcPort": st.sampled_from([9002, 9003, 9090]),
                "healthPort": st.sampled_from([9003, 9090]),
                "metricsPort": st.sampled_from([9090, 9002]),
            },
        ),
        "kvTier": st.fixed_dictionaries(
            {},
            optional={
                "mode": st.sampled_from(["rds", "cpu", "off"]),
                "rdsMaxChunks": st.one_of(st.integers(1, 5000), st.sampled_from([2176, 2177])),
                "rdsDrives": st.one_of(st.none(), st.integers(1, 4)),
                "stagingBufferMib": st.sampled_from([0.0, 512.0, 4096.0]),
                "rdsChunkOverheadMib": st.sampled_from([1.0, 2.0]),
            },
        ),
    },
)


def gate_findings(cfg: StackConfig) -> list[gate.Issue]:
    """What the gate refuses and what it advises (the pack's advisory policies), of the shared rules."""
    return [
        issue
        for issue in gate.validate(cfg) + gate.warnings_for(cfg)
        if issue.policy in SHARED and SHARED_IN_PART.get(issue.policy, "") in issue.message
    ]


def pack_findings(cfg: StackConfig) -> list[catalog.Violation]:
    config = catalog.with_facts(PROD, facts.stack_values(cfg))
    return [
        v
        for v in catalog.evaluate(render_unchecked(cfg), config)
        if v.policy in SHARED and SHARED_IN_PART.get(v.policy, "") in v.message
    ]


# The pack's resource of a role: rebel100's Deployment or ScaledObject of the role (the stack is named minimax-m27).
ROLE_RESOURCE = re.compile(r"^(Deployment|ScaledObject)/rebel100/minimax-m27-(?P<role>prefill|decode)$")


def gate_verdict(cfg: StackConfig) -> set[tuple[str, str]]:
    """(policy, key path) of every gate finding."""
    return {(issue.policy, issue.path) for issue in gate_findings(cfg)}


def pack_verdict(cfg: StackConfig) -> set[tuple[str, str]]:
    """(policy, role) of every pack finding; a resource that is no engine role's is kept whole (and fails)."""
    found = set()
    for violation in pack_findings(cfg):
        match = ROLE_RESOURCE.match(violation.resource)
        found.add((violation.policy, match["role"] if match else violation.resource))
    return found


def policies(verdict: set[tuple[str, str, str]]) -> set[str]:
    return {policy for policy, _, _ in verdict}


def tag_of(image: str) -> str | None:
    """The tag of the references the strategy draws (`repo:tag`, `repo:tag@sha256:...`, `repo@sha256:...`), or None."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def version_before(version: str | None, first: tuple[int, int, int]) -> bool:
    """ "0.11.2" < (0, 12, 0); a leading v is allowed. A tag that is no version (None, `latest`) names no release: the
    facts judge nothing of it (the pin itself is refused as undated)."""
    if version is None or not re.fullmatch(r"v?\d+(\.\d+){1,2}", version):
        return False
    parts = tuple(int(part) for part in version.lstrip("v").split("."))
    return parts + (0,) * (3 - len(parts)) < first


def reference_verdict(cfg: StackConfig) -> set[tuple[str, str, str]]:
    """The oracle: (policy, role, gate key path) of every shared rule this config breaks, by the reference design,
    computed here. The role is the engine role the pack reports it on; the key path is where the gate puts it.

    Sections 3-5 and 8: vLLM refuses PP > 1 with DP > 1; a pod's TP x PP x DP-local NPUs fit one node; pipeline
    stages <= layers; expert parallel needs experts that divide over DP x TP devices (and some experts);
    no PP on decode; gpu-memory-utilization in (0, 1]; a block holds whole sub-blocks; max-model-len <= context;
    RDS chunks x 2 MiB x drives + staging <= chiplet-0 HBM x (1 - utilization), utilization 0.9 when unset;
    lmcache-rbln reads rds_max_chunks from 0.12.0; no literal under a secret name; the router's EPP makes an
    endpoint of every target port a pod lists as active, and a prefill pod listing none gets no endpoint; an engine's
    grace period holds its preStop sleep and its drain (Kubernetes counts it from deletion). The strategy keeps
    topology pd with prefill pods, so both roles run."""
    found: set[tuple[str, str, str]] = set()
    engine, model, hardware, tier = cfg.engine, cfg.model, cfg.hardware, cfg.kv_tier
    for name, role in (("prefill", cfg.prefill), ("decode", cfg.decode)):

        def add(policy: str, path: str, name: str = name) -> None:  # this role's name, bound now
            found.add((policy, name, f"rebel100:{path}"))

        tp, pp, dp = role.tensor_parallel_size, role.pipeline_parallel_size, role.data_parallel_size
        if pp > 1 and dp > 1:
            add("pp-with-dp", f"{name}.pipelineParallelSize")
        if tp * pp * (role.data_parallel_size_local or dp) > hardware.npus_per_node:
            add("npu-devices-fit-node", name)
        if pp > model.layers:
            add("parallelism-fits-model", f"{name}.pipelineParallelSize")
        if role.enable_expert_parallel and (model.experts == 0 or model.experts % (dp * tp) != 0):
            add("parallelism-fits-model", f"{name}.enableExpertParallel")
        utilization = role.gpu_memory_utilization
        if utilization is not None and not (0 < utilization <= 1):
            add("engine-args-in-range", f"{name}.gpuMemoryUtilization")
        if engine.sub_block_cache and (role.block_size or engine.block_size) % engine.max_num_batched_tokens != 0:
            add("engine-args-in-range", f"{name}.blockSize" if role.block_size else "engine.blockSize")
        # Every engine gets --max-model-len; the gate reports the one setting once.
        if engine.max_model_len > model.max_context:
            add("engine-args-in-range", "engine.maxModelLen")
        for env_name, value in role.extra_env.items():
            if value and env_name in SECRET_ENV:
                add("no-literal-secrets", f"{name}.extraEnv.{env_name}")
        # Only the target image's vLLM (0.30.0 in vllm-rbln 0.12.0) has its flags on file to judge by.
        for i, arg in enumerate(role.extra_args):
            if tag_of(engine.image) == "0.12.0" and arg.split("=", 1)[0] in UNKNOWN_TO_VLLM:
                add("vllm-args-known", f"{name}.extraArgs[{i}]")
    if cfg.decode.pipeline_parallel_size > 1:
        found.add(("parallelism-fits-model", "decode", "rebel100:decode.pipelineParallelSize"))
    # NIXL hands decode the KV blocks prefill wrote as they are: same block size and dtype (reported at decode's key).
    for field, label in (("block_size", "blockSize"), ("kv_cache_dtype", "kvCacheDtype")):
        if (getattr(cfg.prefill, field) or getattr(engine, field)) != (
            getattr(cfg.decode, field) or getattr(engine, field)
        ):
            found.add(("pd-roles-agree", "decode", f"rebel100:decode.{label}"))
    # The EPP's prefix index: each engine reuses prefixes in max-num-batched-tokens sub-blocks with sub-block caching,
    # else in its blocks. autoTune reads the block (advice where that is not the unit); without it blockSizeTokens must
    # be a whole number of units.
    # The precise prefix cache indexes the token ids of each KV event in blockSizeTokens blocks: they must divide the
    # engines' blocks (an event is whole engine blocks); the approximate index then only feeds the decider (no advice,
    # no whole-unit rule).
    router = cfg.router
    precise = router.prefix_cache == "precise"
    for role in (cfg.prefill, cfg.decode):
        block = role.block_size or engine.block_size
        unit = engine.max_num_batched_tokens if engine.sub_block_cache else block
        if router.auto_tune and unit != block and not precise:
            found.add(("router-autotune-block-unit", EPP_CONFIG, "rebel100:router.autoTune"))
        if not router.auto_tune and router.block_size_tokens % unit and not precise:
            found.add(("router-block-size", EPP_CONFIG, "rebel100:router.blockSizeTokens"))
        if precise and block % router.block_size_tokens:
            found.add(("router-precise-prefix-cache", EPP_CONFIG, "rebel100:router.blockSizeTokens"))
    # The prefix-based decider sends a request to prefill when more than nonCachedTokens tokens are not cached: never
    # at 0, and P/D is decode-only.
    if router.decider == "prefix-based" and router.non_cached_tokens == 0:
        found.add(("router-pd-profiles", EPP_CONFIG, "rebel100:router.nonCachedTokens"))
    # The pool targets the sidecar's port of each decode rank; prefill serves on its port and, with DP, one per rank.
    decode_ranks = cfg.decode.data_parallel_size_local or cfg.decode.data_parallel_size
    targets = set(range(cfg.decode.sidecar.port, cfg.decode.sidecar.port + decode_ranks))
    prefill = cfg.prefill
    prefill_ranks = prefill.data_parallel_size_local or prefill.data_parallel_size
    prefill_ports = set(range(prefill.port, prefill.port + prefill_ranks))
    if not prefill_ports & targets:
        found.add(("pool-endpoints-serve", "prefill", "rebel100:prefill.port"))
    # An InferencePool holds at most 8 targetPorts (the CRD's maxItems).
    if len(targets) > 8:
        found.add(("inference-pool-wiring", POOL, "rebel100:decode.dataParallelSizeLocal"))
    found |= port_clashes(cfg)
    # The version facts read a release off the tag (core/versions): a vllm-rbln engine, the EPP and the P/D sidecar
    # without one (a digest alone, `latest`) cannot be dated. The pack finds each on the Deployment that runs it.
    for image, resources, path in (
        (engine.image, ("prefill", "decode"), "engine.image"),
        (cfg.router.image, (EPP_DEPLOYMENT,), "router.image"),
        (cfg.decode.sidecar.image, ("decode",), "decode.sidecar.image"),
    ):
        tag = tag_of(image)
        if tag is None or not re.fullmatch(r"v?\d+\.\d+(\.\d+)?", tag):
            found |= {("image-pin-dated", resource, f"rebel100:{path}") for resource in resources}
    if tier.mode == "rds":
        drives = tier.rds_drives or hardware.nvme_drives_per_node
        utilization = 0.9 if cfg.prefill.gpu_memory_utilization is None else cfg.prefill.gpu_memory_utilization
        used_mib = tier.rds_max_chunks * tier.rds_chunk_overhead_mib * drives + tier.staging_buffer_mib
        if used_mib > hardware.hbm_per_chiplet_gib * 1024 * (1 - utilization):
            found.add(("rds-memory-budget", "prefill", "rebel100:kvTier.rdsMaxChunks"))
        if version_before(tag_of(engine.image), (0, 12, 0)):  # lmcache-rbln: the image's version
            found.add(("lmcache-reads-rds-max-chunks", "prefill", "rebel100:engine.image"))
    # vllm-rbln: every render names the NIXL connector (0.10.3) and sets VLLM_RBLN_USE_DEVICE_TENSOR (0.10.4);
    # a role with DP > 1 passes --data-parallel-multi-port-external-lb (vLLM 0.22.0, in vllm-rbln 0.11.0); a drain
    # passes --shutdown-timeout, and a precise prefix cache --kv-events-config, both known in the vLLM of vllm-rbln
    # 0.12.0 (0.30.0) and read in no older one.
    tag = tag_of(engine.image)
    drains = cfg.rollout.drain_seconds > 0
    for name, role in (("prefill", cfg.prefill), ("decode", cfg.decode)):
        if (
            version_before(tag, (0, 10, 4))
            or (role.data_parallel_size > 1 and version_before(tag, (0, 11, 0)))
            or (drains and version_before(tag, (0, 12, 0)))
            or (cfg.router.prefix_cache == "precise" and version_before(tag, (0, 12, 0)))
        ):
            found.add(("engine-image-has-features", name, "rebel100:engine.image"))
    # Kubernetes kills a pod terminationGracePeriodSeconds after its deletion, preStop included: each engine's preStop
    # sleep and then its drain after SIGTERM must fit in it (the gate says it once, the pack on each role's Deployment).
    rollout = cfg.rollout
    if rollout.termination_grace_period_seconds < rollout.pre_stop_seconds + rollout.drain_seconds:
        for name in ("prefill", "decode"):
            found.add(("engine-grace-covers-drain", name, "rebel100:rollout.terminationGracePeriodSeconds"))
    # The P/D sidecar's SSRF allowlist reads the GA InferencePool's spec.selector.matchLabels from llm-d-router 0.10.0
    # (allowlist.go; 0.9.0 and older read a flat map and refuse every prefill): older pins run unprotected, advice. The
    # render protects every sidecar that can be, so the mandatory rule never fires on a config.
    if version_before(tag_of(cfg.decode.sidecar.image), (0, 10, 0)):
        found.add(("sidecar-ssrf-capable", "decode", "rebel100:decode.sidecar.image"))
    # Autoscaling (KEDA): at least one pod and min <= max; at every role's maximum (fixed roles at their replicas) the
    # NPUs within nodes x NPUs per node, and with one pod of a role per node (the default) at most `nodes` pods; a
    # RollingUpdate rollout; the P/D decision rate only for prefill, and the vLLM metrics, read in the vLLM of
    # vllm-rbln 0.12.0, not trusted of an older engine pin. Node groups stay 1 and PodMonitors on in this strategy.
    scaled = {
        name: role.autoscaling
        for name, role in (("prefill", cfg.prefill), ("decode", cfg.decode))
        if role.autoscaling is not None
    }
    pods = {
        name: (scaled[name].max_replicas if name in scaled else role.replicas, devices(role))
        for name, role in (("prefill", cfg.prefill), ("decode", cfg.decode))
    }
    at_maxima = sum(count * each for count, each in pods.values())
    for name, scaling in scaled.items():
        base = f"rebel100:{name}.autoscaling"
        if scaling.min_replicas < 1 or scaling.min_replicas > scaling.max_replicas:
            found.add(("autoscaling-bounds", name, f"{base}.minReplicas"))
        if hardware.nodes is not None and (
            at_maxima > hardware.nodes * hardware.npus_per_node or scaling.max_replicas > hardware.nodes
        ):
            found.add(("autoscaling-fits-site", name, f"{base}.maxReplicas"))
        if cfg.rollout.strategy == "Recreate":
            found.add(("autoscaling-rollout", name, "rebel100:rollout.strategy"))
        metric = scaling.metric or {"prefill": "engineQueue", "decode": "kvCacheUsage"}[name]
        # Prometheus finds an instant selector's sample within its 5m lookback delta; the decision rate is a rate()
        # over 2m, which needs two samples in it: a scrape at least every 5m, or every 1m.
        interval_s = sum(
            int(n) * {"m": 60, "s": 1}[u] for n, u in re.findall(r"(\d+)([ms])", cfg.observability.scrape_interval)
        )
        if interval_s > (60 if metric == "pdDecisionRate" else 300):
            found.add(("autoscaling-scrape-interval", name, "rebel100:observability.scrapeInterval"))
        # The KV-cache usage is a fraction per pod: the HPA adds a pod only when the pods' average exceeds the target
        # by its 10% tolerance, so a target from 1 / 1.1 up never scales up. The other signals have no maximum.
        if metric == "kvCacheUsage" and scaling.target is not None and scaling.target * 11 >= 10:
            found.add(("autoscaling-target", name, f"{base}.target"))
        if metric == "pdDecisionRate" and name == "decode":
            found.add(("autoscaling-signal", name, f"{base}.metric"))
        elif metric == "pdDecisionRate" and router.decider == "prefix-based" and router.non_cached_tokens == 0:
            # The prefix-based decider at 0 never sends a request through prefill: the P/D decision rate stays 0.
            found.add(("autoscaling-signal", name, f"{base}.metric"))
        elif metric != "pdDecisionRate" and version_before(tag_of(engine.image), (0, 12, 0)):
            found.add(("autoscaling-signal", name, "rebel100:engine.image"))
    # The alerts (on, with the PodMonitors, in this strategy) read the engines' queue and KV-cache usage, which only
    # vllm-rbln 0.12.0 is known to serve: an older pin leaves them silent.
    if version_before(engine.image.rsplit(":", 1)[-1], (0, 12, 0)):
        found.add(("alerts-served", ALERTS, "rebel100:engine.image"))
    return found


EPP_SERVICE, EPP_DEPLOYMENT = "Service/rebel100/minimax-m27-epp", "Deployment/rebel100/minimax-m27-epp"


def port_clashes(cfg: StackConfig) -> set[tuple[str, str, str]]:
    """Ports two listeners of one pod, or two entries of one Service, both take: the EPP's Service and container (its
    three ports), the decode pod (the sidecar's ranks, the engine's ranks, the RPC port with DP > 1, one NIXL side
    channel per rank), the prefill pod (its ranks and side channels). Each pair that shares a port is reported by the
    gate at the key the stack file sets, of two it sets (or two defaults) at the later one in the order listed here."""
    found: set[tuple[str, str, str]] = set()
    precise = cfg.router.prefix_cache == "precise"

    def span(start: int, count: int) -> set[int]:
        return set(range(start, start + count))

    def judge(resources: tuple[str, ...], groups: list[tuple[str, object, str, set[int]]]) -> None:
        for i, (first, first_section, first_field, first_ports) in enumerate(groups):
            for second, second_section, second_field, second_ports in groups[i + 1 :]:
                if first_ports & second_ports:
                    first_set = first_field in first_section.model_fields_set
                    second_set = second_field in second_section.model_fields_set
                    blamed = first if first_set and not second_set else second
                    for resource in resources:
                        found.add(("ports-distinct", resource, f"rebel100:{blamed}"))

    router, decode, prefill, engine = cfg.router, cfg.decode, cfg.prefill, cfg.engine
    judge(
        (EPP_SERVICE, EPP_DEPLOYMENT),
        [
            ("router.grpcPort", router, "grpc_port", {router.grpc_port}),
            ("router.healthPort", router, "health_port", {router.health_port}),
            ("router.metricsPort", router, "metrics_port", {router.metrics_port}),
            *([("router.tokenizerPort", router, "tokenizer_port", {router.tokenizer_port})] if precise else []),
        ],
    )
    ranks = decode.data_parallel_size_local or decode.data_parallel_size
    pod = [
        ("decode.sidecar.port", decode.sidecar, "port", span(decode.sidecar.port, ranks)),
        ("decode.port", decode, "port", span(decode.port, ranks)),
    ]
    if decode.data_parallel_size > 1:
        pod.append(("decode.dataParallelRpcPort", decode, "data_parallel_rpc_port", {decode.data_parallel_rpc_port}))
    pod.append(
        ("engine.nixlSideChannelPort", engine, "nixl_side_channel_port", span(engine.nixl_side_channel_port, ranks))
    )
    if precise:  # each rank's KV-event socket
        pod.append(("router.kvEventsPort", router, "kv_events_port", span(router.kv_events_port, ranks)))
    judge(("decode",), pod)
    ranks = prefill.data_parallel_size_local or prefill.data_parallel_size
    judge(
        ("prefill",),
        [
            ("prefill.port", prefill, "port", span(prefill.port, ranks)),
            (
                "engine.nixlSideChannelPort",
                engine,
                "nixl_side_channel_port",
                span(engine.nixl_side_channel_port, ranks),
            ),
            *(
                [("router.kvEventsPort", router, "kv_events_port", span(router.kv_events_port, ranks))]
                if precise
                else []
            ),
        ],
    )
    return found


def devices(role) -> int:
    return (
        role.tensor_parallel_size
        * role.pipeline_parallel_size
        * (role.data_parallel_size_local or role.data_parallel_size)
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], **DETERMINISTIC)
@given(stack_config)
# The boundaries, always tried: the RDS budget at exact equality (2176 x 2 x 2 + 512 = 9216 = 36864 x 0.25) and
# one chunk over; experts over DP 2 x TP 2 (6 do not divide, 8 do); 0 experts; a literal secret in extraEnv.
@example({"prefill": {"gpuMemoryUtilization": 0.75}, "kvTier": {"rdsMaxChunks": 2176}})
@example({"prefill": {"gpuMemoryUtilization": 0.75}, "kvTier": {"rdsMaxChunks": 2177}})
@example({"model": {"experts": 6}, "decode": {"tensorParallelSize": 2, "dataParallelSize": 2}})
@example({"model": {"experts": 8}, "decode": {"tensorParallelSize": 2, "dataParallelSize": 2}})
@example({"model": {"experts": 0}})
@example({"decode": {"extraEnv": {"OPENAI_API_KEY": "sk-123"}}})
# The prefill port: on the last sidecar port, past it, and past it with the decode ranks that would reach it.
@example({"prefill": {"port": 8003}})
@example({"prefill": {"port": 8003}, "decode": {"dataParallelSize": 2}})
@example({"prefill": {"port": 8100}})
# A sidecar pinned before its SSRF allowlist reads the GA pool, and the first that does not.
@example({"decode": {"sidecar": {"image": SIDECAR_IMAGES[1]}}})
@example({"decode": {"sidecar": {"image": SIDECAR_IMAGES[0]}}})
# Autoscaling: both roles at 4 on 4 nodes of 8 (32 of 32 NPUs), one more decode pod, inverted, no pod, Recreate.
@example(
    {
        "hardware": {"nodes": 4},
        "rollout": {"strategy": "RollingUpdate"},
        "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
    }
)
@example(
    {
        "hardware": {"nodes": 4},
        "rollout": {"strategy": "RollingUpdate"},
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 5}},
    }
)
@example({"rollout": {"strategy": "RollingUpdate"}, "decode": {"autoscaling": {"minReplicas": 3, "maxReplicas": 2}}})
@example({"prefill": {"autoscaling": {"minReplicas": 0, "maxReplicas": 2, "metric": "pdDecisionRate"}}})
@example(
    {
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 2, "metric": "pdDecisionRate"}},
        "engine": {"image": "rebellions/vllm-rbln:0.11.2"},
    }
)
# A target outside its signal's range (80 on the KV-cache fraction) and at the fraction's edge (0.909 passes, 0.91 not).
@example(
    {
        "rollout": {"strategy": "RollingUpdate"},
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "kvCacheUsage", "target": 80.0}},
        "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "target": 80.0}},
    }
)
@example(
    {
        "rollout": {"strategy": "RollingUpdate"},
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "target": 0.909}},
        "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "kvCacheUsage", "target": 0.91}},
    }
)
# Scrapes at the lookbacks' edges: 5m for the engine signals, 1m for the decision rate, and one second over each.
@example(
    {
        "rollout": {"strategy": "RollingUpdate"},
        "observability": {"scrapeInterval": "5m1s"},
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
    }
)
@example(
    {
        "rollout": {"strategy": "RollingUpdate"},
        "observability": {"scrapeInterval": "5m"},
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
    }
)
@example(
    {
        "rollout": {"strategy": "RollingUpdate"},
        "observability": {"scrapeInterval": "61s"},
        "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "pdDecisionRate"}},
    }
)
@example(
    {
        "rollout": {"strategy": "RollingUpdate"},
        "observability": {"scrapeInterval": "1m"},
        "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "pdDecisionRate"}},
    }
)
# Pins the facts cannot date: the issue's EPP by digest alone, an engine at `latest`, a sidecar by digest; and dated
# with a digest beside the tag.
@example({"router": {"image": EPP_IMAGES[2]}})
@example({"router": {"image": EPP_IMAGES[1]}})
@example({"engine": {"image": "rebellions/vllm-rbln:latest"}, "decode": {"sidecar": {"image": UNDATED_SIDECAR}}})
# Ports: the EPP's gRPC port on its metrics port (the issue's example) and on its health port; decode's ranks on the
# sidecar's; the RPC port on a rank; the side channels on decode's ranks; prefill's second rank on a side channel.
@example({"router": {"grpcPort": 9090}})
@example({"router": {"grpcPort": 9003, "metricsPort": 9002}})
@example({"decode": {"port": 8002}})
@example({"decode": {"dataParallelRpcPort": 8201}})
@example({"engine": {"nixlSideChannelPort": 8200}})
@example({"decode": {"port": 5600, "sidecar": {"port": 5555}}, "engine": {"nixlSideChannelPort": 5553}})
@example({"prefill": {"port": 5599, "dataParallelSize": 2, "pipelineParallelSize": 1}})
# The router and the P/D pair: blockSizeTokens the block without sub-block caching, the decider at 0 (and always),
# 9 and 8 decode ranks against the pool's 8 target ports, a role's own block size and KV dtype.
@example({"router": {"autoTune": False, "blockSizeTokens": 4096}, "engine": {"subBlockCache": False}})
@example({"router": {"autoTune": False, "blockSizeTokens": 512}, "engine": {"subBlockCache": False}})
@example({"router": {"autoTune": True}, "engine": {"subBlockCache": False}})
@example({"router": {"nonCachedTokens": 0}})
@example({"router": {"nonCachedTokens": 0, "decider": "always-disagg"}})
@example({"decode": {"dataParallelSize": 9}, "hardware": {"npusPerNode": 16}})
@example({"decode": {"dataParallelSize": 8}})
@example({"prefill": {"blockSize": 8192}, "router": {"autoTune": False}})
@example({"decode": {"kvCacheDtype": "auto"}})
# The P/D decision rate from a decider that never fires (nonCachedTokens 0): both gates refuse the signal.
@example(
    {
        "rollout": {"strategy": "RollingUpdate"},
        "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 1, "metric": "pdDecisionRate"}},
        "router": {"nonCachedTokens": 0},
    }
)
# The engines' grace period at preStop + drain (15 + 90), one second short, and with neither; an old engine that drains.
@example({"rollout": {"terminationGracePeriodSeconds": 105}})
@example({"rollout": {"terminationGracePeriodSeconds": 104}})
@example({"rollout": {"terminationGracePeriodSeconds": 0, "preStopSeconds": 0, "drainSeconds": 0}})
@example({"engine": {"image": "rebellions/vllm-rbln:0.11.2"}, "kvTier": {"mode": "cpu"}})
def test_gate_and_pack_agree_with_the_reference(values):
    cfg = StackConfig.model_validate(values)
    expected = reference_verdict(cfg)
    assert gate_verdict(cfg) == {(policy, path) for policy, _, path in expected}, ("gate", values)
    assert pack_verdict(cfg) == {(policy, role) for policy, role, _ in expected}, ("pack", values)


RDS_2177 = (
    "RDS needs {chunks} 2177 x 2 MiB x 2 NVMe drives + 512 MiB staging = 9,220 MiB of chiplet-0 memory, but "
    "{utilization} 0.75 leaves 36,864 MiB x (1 - 0.75) = 9,216 MiB (rule: chunks x chunk overhead x drives + "
    "staging <= chiplet-0 HBM x (1 - gpu-memory-utilization)). Lower {chunks_name} to at most 2176 or "
    "{utilization} to at most 0.74 (change the two together)."
)


@pytest.mark.parametrize(
    "values, gate_expected, pack_expected",
    [
        # A decode pod that fills its node: DP 8 on the 8 NPUs of a node, and so 8 target ports, the most a pool takes.
        pytest.param({"decode": {"dataParallelSize": 8}}, [], [], id="a-pod-fills-a-node-8-target-ports"),
        pytest.param(
            {"decode": {"dataParallelSize": 8}, "hardware": {"npusPerNode": 4}},
            [
                (
                    "rebel100:decode",
                    "TP 1 x PP 1 x DP-local 8 = 8 NPUs per pod, more than the 4 NPUs of a node "
                    "(hardware.npusPerNode): the pod stays Pending forever. Lower the parallelism or the DP "
                    "ranks per pod to at most 4 NPUs.",
                    "npu-devices-fit-node",
                )
            ],
            [
                (
                    "npu-devices-fit-node",
                    "Deployment/rebel100/minimax-m27-decode",
                    "the pod template claims 8 NPUs (spec.resourceClaims) and its engines need 8 (TP x PP x "
                    "DP-local), but a node has npusPerNode 4: a pod cannot span nodes, so it stays Pending. Lower the "
                    "parallelism (or --data-parallel-size-local) to at most 4 NPUs per pod, or set npusPerNode in the "
                    "policy config if the nodes really have more.",
                )
            ],
            id="a-pod-one-node-too-big",
        ),
        pytest.param({"hardware": {"rdmaNicsPerPod": 0}}, [], [], id="no-rdma-nics"),
        # The RDS budget at exact equality, 2176 x 2 x 2 + 512 = 9216 = 36864 x 0.25, and one chunk over.
        pytest.param(
            {"prefill": {"gpuMemoryUtilization": 0.75}, "kvTier": {"rdsMaxChunks": 2176}},
            [],
            [],
            id="rds-budget-exactly-full",
        ),
        pytest.param(
            {"prefill": {"gpuMemoryUtilization": 0.75}, "kvTier": {"rdsMaxChunks": 2177}},
            [
                (
                    "rebel100:kvTier.rdsMaxChunks",
                    RDS_2177.format(
                        chunks="kvTier.rdsMaxChunks",
                        chunks_name="kvTier.rdsMaxChunks",
                        utilization="prefill.gpuMemoryUtilization",
                    ),
                    "rds-memory-budget",
                )
            ],
            [
                (
                    "rds-memory-budget",
                    "Deployment/rebel100/minimax-m27-prefill",
                    "container vllm env LMCACHE_EXTRA_CONFIG (drives, overhead, staging and HBM from ConfigMap "
                    "minimax-m27-lmcache annotation rebel100.ai/rds-budget, 8916992 tokens per rank at "
                    "LMCACHE_CHUNK_SIZE 4096): "
                    + RDS_2177.format(
                        chunks="rds_max_chunks", chunks_name="rds_max_chunks", utilization="--gpu-memory-utilization"
                    ),
                )
            ],
            id="rds-budget-one-chunk-over",
        ),
        pytest.param({"kvTier": {"mode": "cpu"}}, [], [], id="kv-tier-cpu"),
        pytest.param({"kvTier": {"mode": "off"}}, [], [], id="kv-tier-off"),
    ],
)
def test_the_boundaries_in_full(values, gate_expected, pack_expected):
    """Each boundary's findings (key path or resource, message, policy) written out by hand; where none is due, the
    gate refuses nothing and the pack reports nothing mandatory (not only of the shared rules)."""
    cfg = StackConfig.model_validate(values)
    assert [(i.path, i.message, i.policy) for i in gate.validate(cfg)] == gate_expected
    config = catalog.with_facts(PROD, facts.stack_values(cfg))
    mandatory = [v for v in catalog.evaluate(render_unchecked(cfg), config) if v.level == "mandatory"]
    assert [(v.policy, v.resource, v.message) for v in mandatory] == pack_expected


# The advice of autoTune on while the engines reuse 512-token sub-blocks (the default router has autoTune off).
AUTOTUNE_ADVICE = ("router-autotune-block-unit", EPP_CONFIG, "rebel100:router.autoTune")


def advised_and_more(cfg: StackConfig) -> set[tuple[str, str, str]]:
    """The oracle's verdict, autoTune's advice set aside."""
    return reference_verdict(cfg) - {AUTOTUNE_ADVICE}


def test_the_oracle_on_the_target_configuration():
    """The oracle itself, on values whose verdicts the reference design states (and autoTune's advice where the
    engines reuse 512-token sub-blocks of 4096-token blocks)."""
    assert reference_verdict(StackConfig.model_validate({})) == set()
    assert reference_verdict(StackConfig.model_validate({"router": {"autoTune": True}})) == {AUTOTUNE_ADVICE}
    assert reference_verdict(StackConfig.model_validate({"router": {"blockSizeTokens": 1000}})) == {
        ("router-block-size", EPP_CONFIG, "rebel100:router.blockSizeTokens")
    }
    assert reference_verdict(StackConfig.model_validate({"router": {"nonCachedTokens": 0}})) == {
        ("router-pd-profiles", EPP_CONFIG, "rebel100:router.nonCachedTokens"),
    }
    assert reference_verdict(StackConfig.model_validate({"decode": {"dataParallelSize": 9}})) == {
        ("inference-pool-wiring", POOL, "rebel100:decode.dataParallelSizeLocal"),
        ("npu-devices-fit-node", "decode", "rebel100:decode"),
        ("parallelism-fits-model", "decode", "rebel100:decode.enableExpertParallel"),  # 256 experts over 9
    }
    assert advised_and_more(StackConfig.model_validate({"kvTier": {"rdsMaxChunks": 4000}})) == {
        ("rds-memory-budget", "prefill", "rebel100:kvTier.rdsMaxChunks")
    }
    # 256 experts do not divide over DP 3 x TP 1.
    assert advised_and_more(StackConfig.model_validate({"decode": {"dataParallelSize": 3}})) == {
        ("parallelism-fits-model", "decode", "rebel100:decode.enableExpertParallel")
    }
    assert advised_and_more(StackConfig.model_validate({"prefill": {"port": 8004}})) == {
        ("pool-endpoints-serve", "prefill", "rebel100:prefill.port")
    }
    assert advised_and_more(StackConfig.model_validate({"decode": {"sidecar": {"image": SIDECAR_IMAGES[2]}}})) == {
        ("sidecar-ssrf-capable", "decode", "rebel100:decode.sidecar.image")
    }
    scaled = {
        "hardware": {"nodes": 4},
        "rollout": {"strategy": "RollingUpdate"},
        "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
        "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
    }
    assert advised_and_more(StackConfig.model_validate(scaled)) == set()
    assert advised_and_more(
        StackConfig.model_validate({**scaled, "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 5}}})
    ) == {
        ("autoscaling-fits-site", "decode", "rebel100:decode.autoscaling.maxReplicas"),
        ("autoscaling-fits-site", "prefill", "rebel100:prefill.autoscaling.maxReplicas"),
    }
    assert advised_and_more(StackConfig.model_validate({**scaled, "rollout": {"strategy": "Recreate"}})) == {
        ("autoscaling-rollout", "prefill", "rebel100:rollout.strategy"),
        ("autoscaling-rollout", "decode", "rebel100:rollout.strategy"),
    }


def test_drives_reach_the_pack():
    """One drive and 3000 chunks: 3000 x 2 MiB x 1 + 512 = 6512 MiB fits 7372.8 MiB in both gates."""
    cfg = StackConfig.model_validate({"kvTier": {"rdsDrives": 1, "rdsMaxChunks": 3000}})
    assert gate.validate(cfg) == []
    assert pack_verdict(cfg) == set()
    two_drives = StackConfig.model_validate({"kvTier": {"rdsMaxChunks": 3000}})
    assert gate_verdict(two_drives) == {("rds-memory-budget", "rebel100:kvTier.rdsMaxChunks")}
    assert pack_verdict(two_drives) == {("rds-memory-budget", "prefill")}


# --- stack files: any content gets one clear line ---------------------------------------------


def read(tmp_path: pathlib.Path, content: bytes):
    path = tmp_path / "Pulumi.fuzz.yaml"
    path.write_bytes(content)
    return stackfile.load_stack(path, "fuzz")


def expect_clear_error(tmp_path: pathlib.Path, content: bytes) -> Exception:
    with pytest.raises((stackfile.StackFileError, gate.ConfigError)) as caught:
        read(tmp_path, content)
    return caught.value


@pytest.mark.parametrize(
    "content, says",
    [
        (b"config:\n  - rebel100:name: x\n", "`config:` must be a mapping"),
        (b"config: {rebel100:prefill: [1, 2\n", "YAML syntax error"),
        (b"- a\n- b\n", "expected a mapping with a `config:` key, got a YAML list"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a UTF-8 text file"),
        (b"config:\n  rebel100:prefill: just-a-string\n", "rebel100:prefill"),
        (b"config:\n  rebel100:prefill:\n    replicas: many\n", "rebel100:prefill.replicas"),
    ],
)
def test_malformed_stack_file_is_one_clear_error(tmp_path, content, says):
    error = expect_clear_error(tmp_path, content)
    message = str(error)
    assert says in message
    if isinstance(error, stackfile.StackFileError):  # a file that is no stack file: one line naming it
        assert "\n" not in message and str(tmp_path) in message
    else:  # a stack file with bad values: every problem listed under one heading
        assert message.splitlines()[0].endswith("is invalid (1 problem):"), message


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3),
    max_leaves=12,
)
# --- every field of the schema, written as a user writes it (issue 38) ------------------------------------------------
# One row per key of the schema: the kind of value it takes, written by hand (the oracle), and a strategy of values of
# that kind a user might write there (in range or not: a range is not a kind). `test_every_field_has_a_strategy` fails
# for a field of the schema without a row, so a new key is drawn from the day it exists.

TEXT = st.text(max_size=12)


def whole(low: int, high: int):
    return "int", st.integers(low, high)


def number(low: float, high: float):
    # A whole number is a float too (`hbmPerChipletGib: 36`; the CLI writes 36.0 as 36).
    return "float", st.floats(low, high, allow_nan=False) | st.integers(int(low), int(high))


FLAG = ("bool", st.booleans())


def text(*examples: str):
    return "str", st.sampled_from(examples) | TEXT


def choice(*values: str):
    return "enum", st.sampled_from(values)


def maybe(row):
    kind, values = row
    return f"{kind}?", st.none() | values


def mapping(keys: list[str], values):
    return "map", st.dictionaries(st.sampled_from(keys), values, max_size=2) if keys else st.just({})


def items(*examples: str):
    return "list", st.lists(st.sampled_from(examples), max_size=2)


def top(*examples: str):
    """A top-level key: the CLI hands its value to the program as text whatever YAML made of it (config.Value)."""
    return "top", st.sampled_from(examples)


def engine_role_fields(role: str, replicas):
    """The rows every engine role has (prefill's and decode's, written once), with its `replicas` strategy."""
    return {
        f"{role}.replicas": replicas,
        f"{role}.tensorParallelSize": whole(0, 65),
        f"{role}.pipelineParallelSize": whole(0, 65),
        f"{role}.dataParallelSize": whole(0, 1025),
        f"{role}.dataParallelSizeLocal": maybe(whole(0, 65)),
        f"{role}.enableExpertParallel": FLAG,
        f"{role}.maxNumSeqs": whole(0, 1025),
        f"{role}.gpuMemoryUtilization": maybe(number(0, 1.2)),
        f"{role}.port": whole(1023, 65001),
        f"{role}.blockSize": maybe(whole(-1, 100001)),
        f"{role}.kvCacheDtype": maybe(text("fp8", "auto")),
        f"{role}.speculative.method": choice("eagle3", "suffix", "ngram"),
        f"{role}.speculative.model": maybe(text("asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k")),
        f"{role}.speculative.numSpeculativeTokens": whole(0, 17),
        f"{role}.resources.cpu": text("32"),
        f"{role}.resources.memory": text("256Gi"),
        f"{role}.extraArgs": items("--enforce-eager", "--max-logprobs=5"),
        f"{role}.extraEnv": mapping(["FOO", "OPENAI_API_KEY_FILE"], TEXT),
        f"{role}.autoscaling.minReplicas": whole(-1, 1025),
        f"{role}.autoscaling.maxReplicas": whole(0, 1025),
        f"{role}.autoscaling.metric": maybe(choice("engineQueue", "kvCacheUsage", "pdDecisionRate")),
        f"{role}.autoscaling.target": maybe(number(0, 100)),
        f"{role}.autoscaling.scaleUpStabilizationSeconds": whole(-1, 3601),
        f"{role}.autoscaling.scaleDownStabilizationSeconds": whole(-1, 3601),
        f"{role}.autoscaling.pollingIntervalSeconds": whole(0, 3601),
    }


FIELDS = {
    "name": top("minimax-m27", "serving-a"),
    "namespace": top("rebel100", "serving"),
    "environment": top("prod", "dev"),
    "topology": top("pd", "agg"),
    "renderDirectory": top("build/x", ""),
    "kubeContext": top("kind-local"),
    "hfTokenSecret": top("hf-token"),
    "hardware.npusPerNode": whole(0, 65),
    "hardware.nodes": maybe(whole(0, 100001)),
    "hardware.chipletsPerNpu": whole(0, 100001),
    "hardware.hbmPerChipletGib": number(0, 64),
    "hardware.nvmeDrivesPerNode": whole(-1, 100001),
    "hardware.rdmaNicsPerPod": whole(-1, 9),
    "hardware.npuProduct": text("RBLN-CR13"),
    "hardware.npuDeviceClass": text("npu.rebellions.ai"),
    "hardware.nicDeviceClass": text("dranet"),
    "hardware.numaAttribute": text("resource.kubernetes.io/numaNode"),
    "model.name": text("MiniMaxAI/MiniMax-M2.7"),
    "model.servedName": maybe(text("minimax")),
    "model.layers": whole(0, 100001),
    "model.experts": whole(-1, 100001),
    "model.kvHeads": whole(0, 100001),
    "model.headDim": whole(0, 100001),
    "model.maxContext": whole(0, 100001),
    "engine.image": text("rebellions/vllm-rbln:0.12.0"),
    "engine.blockSize": whole(15, 100001),
    "engine.maxModelLen": whole(0, 100001),
    "engine.maxNumBatchedTokens": whole(0, 100001),
    "engine.kvCacheDtype": choice("fp8", "auto", "bfloat16"),
    "engine.subBlockCache": FLAG,
    "engine.enablePrefixCaching": FLAG,
    "engine.enableChunkedPrefill": FLAG,
    "engine.toolCallParser": maybe(text("minimax_m2")),
    "engine.reasoningParser": maybe(text("minimax_m2")),
    "engine.speculative.method": choice("eagle3", "suffix", "ngram"),
    "engine.speculative.model": maybe(text("asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k")),
    "engine.speculative.numSpeculativeTokens": whole(0, 17),
    "engine.nixlSideChannelPort": whole(1023, 65001),
    "engine.engineReadyTimeoutS": whole(59, 100001),
    "engine.rpcTimeoutMs": whole(999, 100001),
    "engine.shmSize": text("32Gi"),
    "engine.startupFailureThreshold": whole(0, 100001),
    "engine.podAnnotations": mapping(["rebel100.local/ready-delay", "a"], TEXT),
    **engine_role_fields("prefill", whole(-1, 1025)),
    **engine_role_fields("decode", whole(0, 1025)),
    "decode.dataParallelRpcPort": whole(1023, 65001),
    "decode.sidecar.image": text("ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"),
    "decode.sidecar.port": whole(1023, 65001),
    "decode.sidecar.kvConnector": choice("nixlv2"),
    "decode.kvCapacityTokens": maybe(whole(0, 100001)),
    "kvTier.mode": choice("rds", "cpu", "off"),
    "kvTier.chunkSize": whole(255, 100001),
    "kvTier.rdsMaxChunks": whole(0, 100001),
    "kvTier.rdsChunkOverheadMib": number(0, 4),
    "kvTier.rdsDrives": maybe(whole(0, 100001)),
    "kvTier.stagingBufferMib": number(0, 4096),
    "kvTier.cpuSizeGib": number(0, 512),
    "kvTier.enableKvEvents": FLAG,
    "kvTier.hashAlgorithm": text("sha256_cbor_64bit"),
    "kvTier.extraConfig": mapping(["save_unfull_chunk", "x"], st.integers(0, 9) | TEXT),
    "router.image": text("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"),
    "router.replicas": whole(0, 2),
    "router.configApiVersion": maybe(choice("llm-d.ai/v1alpha1", "inference.networking.x-k8s.io/v1alpha1")),
    "router.decider": choice("prefix-based", "always-disagg"),
    "router.nonCachedTokens": whole(-1, 100001),
    "router.blockSizeTokens": whole(0, 100001),
    "router.lruCapacityPerServer": whole(0, 100001),
    "router.autoTune": FLAG,
    "router.prefixCache": choice("approximate", "precise", "none"),
    "router.kvEventsPort": whole(1023, 65001),
    "router.tokenizerImage": text("vllm/vllm-openai-cpu:v0.30.0"),
    "router.tokenizerPort": whole(1023, 65001),
    "router.prefixScorerWeight": whole(-1, 100001),
    "router.queueScorerWeight": whole(-1, 100001),
    "router.activeRequestScorerWeight": whole(-1, 100001),
    "router.prefillActiveRequestScorerWeight": whole(-1, 100001),
    "router.prefillTokenLoadScorerWeight": whole(-1, 100001),
    "router.noHitLruScorerWeight": whole(-1, 100001),
    "router.sessionAffinityWeight": whole(-1, 100001),
    "router.sessionHeaders": items("x-session-id", "x-my-agent", "session_id", "a b", "", "x:y"),
    "router.peakPrefillThroughput": whole(0, 100001),
    "router.grpcPort": whole(1023, 65001),
    "router.healthPort": whole(1023, 65001),
    "router.metricsPort": whole(1023, 65001),
    "router.refreshMetricsIntervalMs": whole(49, 60001),
    "router.failureMode": choice("FailClose", "FailOpen"),
    "router.certificate": choice("stack", "epp"),
    "router.drainSeconds": whole(-1, 3601),
    "router.pluginParameters": mapping([], TEXT),
    "gateway.className": text("istio"),
    "gateway.port": whole(0, 65536),
    "gateway.hostname": maybe(text("api.example.com")),
    "weights.source": choice("pvc", "download"),
    "weights.pvc": text("model-weights"),
    "weights.revision": text("main", "0123456789abcdef0123456789abcdef01234567"),
    "weights.draftRevision": text("main"),
    "weights.size": text("600Gi"),
    "weights.gated": FLAG,
    "weights.tokenSecretExists": FLAG,
    "weights.downloaderImage": text("python:3.12.11-slim"),
    "weights.huggingfaceHubVersion": text("0.34.4"),
    "weights.retries": whole(-1, 101),
    "weights.timeoutMinutes": whole(9, 100001),
    "storage.compileCacheSize": text("200Gi"),
    "storage.storageClass": maybe(text("nfs")),
    "storage.retainOnDelete": FLAG,
    "security.networkPolicies": FLAG,
    "security.monitoringNamespace": text("monitoring"),
    "security.gatewayPodLabel": text("gateway.networking.k8s.io/gateway-name"),
    "security.engineRunAsRoot": FLAG,
    "security.engineCapabilities": items("IPC_LOCK", "NET_ADMIN"),
    "observability.podMonitors": FLAG,
    "observability.grafanaDashboard": FLAG,
    "observability.scrapeInterval": text("30s", "10m", "1m30s"),
    "observability.prometheusAddress": maybe(text("http://prometheus.monitoring.svc:9090")),
    "observability.alerts.enabled": FLAG,
    "observability.alerts.runbookUrl": text("docs/operations.md", "https://example.com/runbooks", ""),
    "observability.alerts.eppUnavailableFor": text("1m", "30s", "1m30s", "1.5m"),
    "observability.alerts.noReadyDecodeFor": text("1m", "0", "2h"),
    "observability.alerts.noReadyPrefillFor": text("5m", "90"),
    "observability.alerts.pdDecisionsStoppedFor": text("15m", "1h"),
    "observability.alerts.pdDecisionsMinRate": number(0, 2),
    "observability.alerts.engineQueuePerPod": maybe(number(0, 64)),
    "observability.alerts.engineQueueFor": text("10m", "5m"),
    "observability.alerts.kvCacheUsage": number(0, 2),
    "observability.alerts.kvCacheUsageFor": text("15m", "1m"),
    "observability.alerts.restarts": whole(0, 11),
    "observability.alerts.restartsWindow": text("30m", "1h"),
    "observability.alerts.scrapeDownFor": text("10m", "5m"),
    "observability.alerts.eppErrorRatio": number(0, 1),
    "observability.alerts.eppErrorRatioFor": text("5m", "1m"),
    "placement.groups": whole(0, 513),
    "placement.groupLabel": text("rebel100.ai/pool-group"),
    "placement.spreadRoles": FLAG,
    "rollout.strategy": choice("Recreate", "RollingUpdate"),
    "rollout.poolAtATime": FLAG,
    "rollout.maxUnavailable": whole(0, 100001),
    "rollout.preStopSeconds": whole(-1, 3601),
    "rollout.drainSeconds": whole(-1, 3601),
    "rollout.terminationGracePeriodSeconds": whole(-1, 7201),
}
# What a user mistypes for each kind: booleans, quoted numbers and fractions for an int, `yes` and 1 for a bool, a
# number for text, a scalar for a map or a list. A top-level key gets them as text (not refused as a kind).
WRONG = {
    "int": [True, "4", 4.5, "many"],
    "float": [True, "0.8", "x"],
    "bool": ["yes", "true", 1],
    "str": [5, 4.5, True],
    "enum": [5, True],
    "map": ["x", 5],
    "list": ["x", 5],
    "top": [5, True, 4.5],
}
TYPE_REFUSAL = re.compile(r"\btakes an? (int|float|bool|str)\b")


def schema_keys(model: type = StackConfig, prefix: str = "") -> list[str]:
    """Every key of the schema a stack file can set a value at (sections, optional ones too, walked into)."""
    keys = []
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        inner = unwrap_optional(info.annotation)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            keys += schema_keys(inner, key + ".")
        else:
            keys.append(key)
    return keys


def test_every_field_has_a_strategy():
    keys = set(schema_keys())
    assert not keys - set(FIELDS), f"fields of the schema without a row in FIELDS: {sorted(keys - set(FIELDS))}"
    assert not set(FIELDS) - keys, f"rows of FIELDS the schema does not have: {sorted(set(FIELDS) - keys)}"


class Section(dict):
    """A section of the stack file being written (its keys become a block); any other dict is a value (a map)."""


def stack_text(values: dict[str, object]) -> str:
    """The stack file a user writes: sections as blocks, each value as its YAML scalar (its JSON) or a flow map/list."""
    tree = Section()
    for path, value in values.items():
        *sections, last = path.split(".")
        node = tree
        for section in sections:
            node = node.setdefault(section, Section())
        node[last] = value
    lines = ["config:"]

    def emit(node: Section, depth: int) -> None:
        for name, value in node.items():
            label = f"rebel100:{name}" if depth == 1 else name
            if isinstance(value, Section):
                lines.append(f"{'  ' * depth}{label}:")
                emit(value, depth + 1)
            else:
                lines.append(f"{'  ' * depth}{label}: {json.dumps(value)}")

    emit(tree, 1)
    return "\n".join(lines) + "\n"


def test_the_stack_text_is_what_a_user_writes():
    values = {
        "name": "a",
        "prefill.extraEnv": {},
        "prefill.autoscaling.maxReplicas": "4",
        "decode.extraArgs": ["--x"],
        "engine.subBlockCache": True,
    }
    assert stack_text(values) == (
        "config:\n"
        '  rebel100:name: "a"\n'
        "  rebel100:prefill:\n"
        "    extraEnv: {}\n"
        "    autoscaling:\n"
        '      maxReplicas: "4"\n'
        "  rebel100:decode:\n"
        '    extraArgs: ["--x"]\n'
        "  rebel100:engine:\n"
        "    subBlockCache: true\n"
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], **DETERMINISTIC)
@given(st.data())
def test_every_field_written_as_a_user_would_is_judged_by_its_kind(tmp_path, data):
    """A few keys, each with a value of its kind or of another, in a stack file as a user writes it: a value of another
    kind is refused at its key, naming the key's type (an int, a float, a bool, a str) where it has one; a value of its
    kind is never refused as one of another. A top-level key takes any scalar as text. Anything else is one clear
    error, never a traceback."""
    keys = data.draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=6, unique=True))
    values, wrong = {}, set()
    for key in keys:
        kind, right = FIELDS[key]
        if data.draw(st.booleans(), label=f"{key} of another kind"):
            values[key] = data.draw(st.sampled_from(WRONG[kind.rstrip("?")]), label=key)
            wrong.add(key)
        else:
            values[key] = data.draw(right, label=key)
    path = tmp_path / "Pulumi.fields.yaml"
    path.write_text(stack_text(values))
    try:
        stackfile.load_stack(path, "fields")
        found: list[gate.Issue] = []
    except gate.ConfigError as error:
        found = error.issues
    messages: dict[str, list[str]] = {}
    for issue in found:
        messages.setdefault(issue.path, []).append(issue.message)
    for key, value in values.items():
        kind = FIELDS[key][0].rstrip("?")
        at_key = messages.get(f"rebel100:{key}", [])
        typed = [m for m in at_key if TYPE_REFUSAL.search(m)]
        if key in wrong and kind in ("int", "float", "bool", "str"):
            article = "an" if kind == "int" else "a"
            assert any(f"takes {article} {kind}" in m for m in typed), (key, value, at_key, path.read_text())
        elif key in wrong and kind != "top":
            assert at_key, (key, value, found, path.read_text())
        else:
            assert not typed, (key, value, at_key)


sections = st.sampled_from(sorted({key.split(".")[0] for key in FIELDS} | {"hfToken"}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], **DETERMINISTIC)
@given(st.dictionaries(sections.map(lambda s: f"rebel100:{s}"), yaml_values, max_size=4) | yaml_values)
def test_random_stack_files_never_raise_anything_else(tmp_path, document):
    content = yaml.safe_dump(
        document if not isinstance(document, dict) or not document else {"config": document}
    ).encode()
    with contextlib.suppress(stackfile.StackFileError, gate.ConfigError):
        read(tmp_path, content)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], **DETERMINISTIC)
@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_else(tmp_path, content):
    with contextlib.suppress(stackfile.StackFileError, gate.ConfigError):
        read(tmp_path, content)
