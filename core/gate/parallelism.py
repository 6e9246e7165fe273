"""Rules of the gate on parallelism: PP with DP, devices per node and per site, pipeline stages and experts, block
size and memory utilization.
"""

from __future__ import annotations

from collections.abc import Iterable

from core import rules
from core.config import StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key


def rule_pp_with_dp(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    for name, role in cfg.engine_roles():
        problem = rules.pp_with_dp(role.pipeline_parallel_size, role.data_parallel_size)
        if problem:
            yield Issue(key(f"{name}.pipelineParallelSize"), problem, "pp-with-dp")


def rule_devices_fit_node(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    per_node = cfg.hardware.npus_per_node
    for name, role in cfg.engine_roles():
        problem = rules.devices_fit_node(
            role.tensor_parallel_size,
            role.pipeline_parallel_size,
            facts.roles[name].serving.data_parallel_local,
            per_node,
            per_node_name="hardware.npusPerNode",
        )
        if problem:
            yield Issue(key(name), problem, "npu-devices-fit-node")
    nodes = cfg.hardware.nodes
    # With an autoscaled role the total is at its maximum, judged at that maximum by rule_autoscaling.
    if nodes is not None and facts.total_devices > nodes * per_node and not facts.scalings:
        yield Issue(
            key("hardware.nodes"),
            f"the stack needs {facts.total_devices} NPUs but {nodes} nodes x {per_node} NPUs = {nodes * per_node}: "
            f"lower the replicas or add nodes.",
        )


def rule_pipeline_and_experts(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    model = cfg.model
    for name, role in cfg.engine_roles():
        problem = rules.pipeline_fits_layers(role.pipeline_parallel_size, model.layers, layers_name="model.layers")
        if problem:
            yield Issue(key(f"{name}.pipelineParallelSize"), problem, "parallelism-fits-model")
        if role.enable_expert_parallel:
            problem = rules.experts_divide(
                model.experts, role.data_parallel_size, role.tensor_parallel_size, experts_name="model.experts"
            )
            if problem:
                yield Issue(key(f"{name}.enableExpertParallel"), problem, "parallelism-fits-model")
    problem = rules.decode_without_pipeline(cfg.decode.pipeline_parallel_size)
    if problem:
        yield Issue(key("decode.pipelineParallelSize"), problem, "parallelism-fits-model")


def rule_block_and_memory(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    engine = cfg.engine
    for name, role in cfg.engine_roles():
        resolved = facts.roles[name].serving
        if engine.sub_block_cache:
            problem = rules.block_holds_sub_blocks(
                resolved.block_size, engine.max_num_batched_tokens, sub_block_name="engine.maxNumBatchedTokens"
            )
            if problem:
                yield Issue(
                    key(f"{name}.blockSize" if role.block_size else "engine.blockSize"), problem, "engine-args-in-range"
                )
        if role.gpu_memory_utilization is not None:
            problem = rules.utilization_in_range(role.gpu_memory_utilization)
            if problem:
                yield Issue(key(f"{name}.gpuMemoryUtilization"), problem, "engine-args-in-range")
    problem = rules.max_model_len_fits(engine.max_model_len, cfg.model.max_context, context_name="model.maxContext")
    if problem:
        yield Issue(key("engine.maxModelLen"), problem, "engine-args-in-range")
    spec = engine.speculative
    if spec is not None and spec.method == "eagle3" and not spec.model:
        yield Issue(key("engine.speculative.model"), "EAGLE-3 needs a draft model: set engine.speculative.model.")
