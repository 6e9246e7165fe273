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
Random and malformed stack files always end in one clear error line, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core import gate, stackfile
from core.config import StackConfig
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
    "vllm-args-known",
    "pool-endpoints-serve",
    "sidecar-ssrf-protection",
    "sidecar-ssrf-capable",
    "autoscaling-bounds",
    "autoscaling-fits-site",
    "autoscaling-rollout",
    "autoscaling-signal",
    "pd-roles-agree",
    "inference-pool-wiring",
    "router-pd-profiles",
    "router-block-size",
    "router-autotune-block-unit",
)
# Policies of the pack that judge more than the shared rule: only their findings of that rule count, told by its words.
SHARED_IN_PART = {"inference-pool-wiring": "but an InferencePool allows at most"}
# The pack's resources of the router's rules: the EPP's config and the pool (the stack is named minimax-m27).
EPP_CONFIG = "ConfigMap/rebel100/minimax-m27-epp-config"
POOL = "InferencePool/rebel100/minimax-m27-pool"
# Routing sidecar pins: the target, one whose allowlist still reads the flat v1alpha2 selector, the v0.7 generation's.
SIDECAR_IMAGES = (
    "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
    "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0",
    "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1",
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
    optional={"metric": st.sampled_from(["engineQueue", "kvCacheUsage", "pdDecisionRate"])},
)
role = st.fixed_dictionaries({}, optional=ROLE)
decode_role = st.fixed_dictionaries(
    {}, optional={**ROLE, "sidecar": st.fixed_dictionaries({}, optional={"image": st.sampled_from(SIDECAR_IMAGES)})}
)
# The prefill port against the pool's targetPorts, the decode sidecar's 8000 + DP-local ranks.
prefill_role = st.fixed_dictionaries({}, optional={**ROLE, "port": st.sampled_from([8000, 8003, 8100])})
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
                ),
            },
        ),
        "prefill": prefill_role,
        "decode": decode_role,
        "rollout": st.fixed_dictionaries({}, optional={"strategy": st.sampled_from(["Recreate", "RollingUpdate"])}),
        "router": st.fixed_dictionaries(
            {},
            optional={
                "decider": st.sampled_from(["prefix-based", "always-disagg"]),
                "nonCachedTokens": st.sampled_from([0, 16]),
                "autoTune": st.booleans(),
                "blockSizeTokens": st.sampled_from([512, 1000, 4096, 8192]),
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


def version_before(version: str, first: tuple[int, int, int]) -> bool:
    """ "0.11.2" < (0, 12, 0); a leading v is allowed. Only the versions the strategy draws need to parse."""
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
    endpoint of every target port a pod lists as active, and a prefill pod listing none gets no endpoint. The
    strategy keeps topology pd with prefill pods, so both roles run."""
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
            if engine.image.endswith(":0.12.0") and arg.split("=", 1)[0] in UNKNOWN_TO_VLLM:
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
    # be the unit.
    router = cfg.router
    for role in (cfg.prefill, cfg.decode):
        block = role.block_size or engine.block_size
        unit = engine.max_num_batched_tokens if engine.sub_block_cache else block
        if router.auto_tune and unit != block:
            found.add(("router-autotune-block-unit", EPP_CONFIG, "rebel100:router.autoTune"))
        if not router.auto_tune and router.block_size_tokens != unit:
            found.add(("router-block-size", EPP_CONFIG, "rebel100:router.blockSizeTokens"))
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
    if tier.mode == "rds":
        drives = tier.rds_drives or hardware.nvme_drives_per_node
        utilization = 0.9 if cfg.prefill.gpu_memory_utilization is None else cfg.prefill.gpu_memory_utilization
        used_mib = tier.rds_max_chunks * tier.rds_chunk_overhead_mib * drives + tier.staging_buffer_mib
        if used_mib > hardware.hbm_per_chiplet_gib * 1024 * (1 - utilization):
            found.add(("rds-memory-budget", "prefill", "rebel100:kvTier.rdsMaxChunks"))
        if version_before(engine.image.rsplit(":", 1)[-1], (0, 12, 0)):  # lmcache-rbln: the image's version
            found.add(("lmcache-reads-rds-max-chunks", "prefill", "rebel100:engine.image"))
    # vllm-rbln: every render names the NIXL connector (0.10.3) and sets VLLM_RBLN_USE_DEVICE_TENSOR (0.10.4);
    # a role with DP > 1 passes --data-parallel-multi-port-external-lb (vLLM 0.22.0, in vllm-rbln 0.11.0).
    tag = engine.image.rsplit(":", 1)[-1]
    for name, role in (("prefill", cfg.prefill), ("decode", cfg.decode)):
        if version_before(tag, (0, 10, 4)) or (role.data_parallel_size > 1 and version_before(tag, (0, 11, 0))):
            found.add(("engine-image-has-features", name, "rebel100:engine.image"))
    # The P/D sidecar's SSRF allowlist reads the GA InferencePool's spec.selector.matchLabels from llm-d-router 0.10.0
    # (allowlist.go; 0.9.0 and older read a flat map and refuse every prefill): older pins run unprotected, advice. The
    # render protects every sidecar that can be, so the mandatory rule never fires on a config.
    if version_before(cfg.decode.sidecar.image.rsplit(":", 1)[-1], (0, 10, 0)):
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
        if metric == "pdDecisionRate" and name == "decode":
            found.add(("autoscaling-signal", name, f"{base}.metric"))
        elif metric != "pdDecisionRate" and version_before(engine.image.rsplit(":", 1)[-1], (0, 12, 0)):
            found.add(("autoscaling-signal", name, "rebel100:engine.image"))
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


# The advice every config with the default router and engine gets (autoTune on, 512-token sub-blocks).
AUTOTUNE_ADVICE = ("router-autotune-block-unit", EPP_CONFIG, "rebel100:router.autoTune")


def advised_and_more(cfg: StackConfig) -> set[tuple[str, str, str]]:
    """The oracle's verdict, the default router's advice set aside."""
    return reference_verdict(cfg) - {AUTOTUNE_ADVICE}


def test_the_oracle_on_the_target_configuration():
    """The oracle itself, on values whose verdicts the reference design states (beside the one advice of the default
    router, autoTune on while the engines reuse 512-token sub-blocks of 4096-token blocks)."""
    assert reference_verdict(StackConfig.model_validate({})) == {AUTOTUNE_ADVICE}
    assert reference_verdict(StackConfig.model_validate({"router": {"autoTune": False}})) == set()
    assert reference_verdict(StackConfig.model_validate({"router": {"nonCachedTokens": 0}})) == {
        AUTOTUNE_ADVICE,
        ("router-pd-profiles", EPP_CONFIG, "rebel100:router.nonCachedTokens"),
    }
    assert reference_verdict(StackConfig.model_validate({"decode": {"dataParallelSize": 9}})) == {
        AUTOTUNE_ADVICE,
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
    assert advised_and_more(StackConfig.model_validate({**scaled, "rollout": {}})) == {
        ("autoscaling-rollout", "prefill", "rebel100:rollout.strategy"),
        ("autoscaling-rollout", "decode", "rebel100:rollout.strategy"),
    }


def test_drives_reach_the_pack():
    """One drive and 3000 chunks: 3000 x 2 MiB x 1 + 512 = 6512 MiB fits 7372.8 MiB in both gates."""
    cfg = StackConfig.model_validate({"kvTier": {"rdsDrives": 1, "rdsMaxChunks": 3000}})
    assert gate.validate(cfg) == []
    assert pack_verdict(cfg) == {AUTOTUNE_ADVICE[:2]}
    two_drives = StackConfig.model_validate({"kvTier": {"rdsMaxChunks": 3000}})
    assert gate_verdict(two_drives) == {
        ("rds-memory-budget", "rebel100:kvTier.rdsMaxChunks"),
        (AUTOTUNE_ADVICE[0], AUTOTUNE_ADVICE[2]),
    }
    assert pack_verdict(two_drives) == {("rds-memory-budget", "prefill"), AUTOTUNE_ADVICE[:2]}


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
sections = st.sampled_from(
    [
        "prefill",
        "decode",
        "engine",
        "kvTier",
        "hardware",
        "router",
        "model",
        "storage",
        "name",
        "placement",
        "topology",
        "hfToken",
    ]
)


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
