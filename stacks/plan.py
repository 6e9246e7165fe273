"""The capacity and memory plan of one stack: what `python -m stacks plan` prints.

Every figure comes from `core.derive` (the same facts the program renders and exports); this module
only arranges and prints them.
"""

from __future__ import annotations

from typing import Any

from core import autoscaling, sizing
from core.config import StackConfig
from core.derive import derive
from core.gate import warnings_for

# What the reference design says was validated on the Target Configuration, and what was not.
VALIDATED = [
    "Common serving arguments (block size 4096, max-model-len 204800, batched tokens 512, fp8 KV, prefix caching, "
    "chunked prefill, tool/reasoning parsers)",
    "Prefill PP4/DP1 and decode DP4 + expert parallel, KV over NIXL (4P4D, and 1P1D for function and accuracy)",
    "EAGLE-3 speculative decoding on both roles",
]
UNVERIFIED = [
    "Router plugin set and weights (pd-epp-config); the Target Configuration was measured with round robin",
    "LMCache / RDS KV tier (validation ran without it); the router's index does not count RDS capacity",
    "Router autoTune false with blockSizeTokens the engines' 4096 and lruCapacityPerServer 1024 (the render's; "
    "measured on the local site's simulated engines only, docs/performance.md)",
    "Hardware-profile defaults not in the sources: NVMe drives per node, RDS staging buffer size",
]


def plan(cfg: StackConfig) -> dict[str, Any]:
    facts = derive(cfg)
    roles: dict[str, Any] = {}
    for name, role in cfg.engine_roles():
        roles[name] = {
            **facts.roles[name].output(),
            "parallelism": f"TP{role.tensor_parallel_size} PP{role.pipeline_parallel_size} DP{role.data_parallel_size}"
            + (" +EP" if role.enable_expert_parallel else ""),
            "rankPorts": facts.roles[name].serving.rank_ports,
            "maxNumSeqs": role.max_num_seqs,
        }
    decode_serving = facts.decode
    kv_per_token = facts.kv_bytes_per_token
    result: dict[str, Any] = {
        "topology": cfg.topology,
        "roles": roles,
        "totalDevices": facts.total_devices,
        "nodes": cfg.hardware.nodes,
        "clusterDevices": cfg.hardware.nodes * cfg.hardware.npus_per_node if cfg.hardware.nodes else None,
        "kvBytesPerToken": kv_per_token,
        "prefixReuseUnitTokens": facts.prefix_reuse_unit,
        "kvTier": facts.kv_tier,
    }
    if cfg.decode.kv_capacity_tokens:
        tokens = cfg.decode.kv_capacity_tokens
        result["decodeKvCapacity"] = {
            "tokensPerEngine": tokens,
            "blocks": tokens // decode_serving.block_size,
            "gib": round(tokens * kv_per_token / sizing.GIB, 2),
            "tokensAllDecode": tokens * facts.roles["decode"].replicas,
        }
    if facts.rds_budget is not None:
        budget = facts.rds_budget
        ranks = facts.roles["prefill"].serving.data_parallel_local
        tokens = facts.rds_tokens_per_rank
        result["rds"] = {
            "tokensPerRank": tokens,
            "ranksPerPod": ranks,
            "tokensAllPrefill": tokens * ranks * facts.roles["prefill"].replicas,
            "budget": {label: value for label, value in budget.lines()},
            "fits": budget.fits,
        }
    scalings = facts.scalings
    if scalings:
        # The NPUs the roles hold at their minima (fixed roles at their count): what an idle site keeps busy.
        at_minimum = sum(
            role.serving.devices * (scalings[name].min_replicas if name in scalings else role.replicas)
            for name, role in facts.roles.items()
        )
        result["autoscaling"] = {
            "prometheus": autoscaling.prometheus_address(cfg),
            "devicesAtMinimum": at_minimum,
            "roles": {
                name: {
                    **scale.output(),
                    "series": autoscaling.series_for(scale.signal, cfg.router.image),
                    "unit": scale.signal.unit,
                    "stabilizationSeconds": [
                        scale.scale_up_stabilization_seconds,
                        scale.scale_down_stabilization_seconds,
                    ],
                    "pollingIntervalSeconds": scale.polling_interval_seconds,
                    "perDeployment": list(scale.per_pool(cfg.placement.groups)),
                }
                for name, scale in scalings.items()
            },
        }
    result["warnings"] = [str(w) for w in warnings_for(cfg)]
    result["validated"] = VALIDATED
    result["unverified"] = UNVERIFIED
    return result


def format_plan(stack: str, data: dict[str, Any]) -> str:
    lines = [f"Capacity and memory plan of stack {stack!r} ({data['topology']})", ""]
    lines.append(f"{'role':<9}{'pods':>5}  {'parallelism':<17}{'NPUs/pod':>9}{'NPUs':>6}  ports")
    for name, role in data["roles"].items():
        ports = role["rankPorts"]
        port_text = str(ports[0]) if len(ports) == 1 else f"{ports[0]}-{ports[-1]}"
        scaled = role.get("autoscaling")
        pods = f"{scaled['minReplicas']}-{scaled['maxReplicas']}" if scaled else str(role["replicas"])
        lines.append(
            f"{name:<9}{pods:>5}  {role['parallelism']:<17}{role['devicesPerPod']:>9}{role['devices']:>6}  {port_text}"
        )
    cluster = f" of {data['clusterDevices']} on {data['nodes']} nodes" if data["clusterDevices"] else ""
    lines.append(f"{'total':<9}{'':>5}  {'':<17}{'':>9}{data['totalDevices']:>6}{cluster}")
    if "autoscaling" in data:
        scaling = data["autoscaling"]
        lines += [
            "",
            f"Autoscaling (KEDA, a ScaledObject per Deployment, triggers read {scaling['prometheus']}); "
            f"NPUs are counted at the maxima, {scaling['devicesAtMinimum']} at the minima:",
        ]
        for name, scale in scaling["roles"].items():
            up, down = scale["stabilizationSeconds"]
            per = scale["perDeployment"]
            lines.append(
                f"  {name:<8} {scale['minReplicas']}-{scale['maxReplicas']} pods on {scale['metric']} "
                f"({scale['series']}), target {scale['target']:g} per pod: {scale['unit']}; stabilisation "
                f"up {up} s, down {down} s; polled every {scale['pollingIntervalSeconds']} s"
                + (
                    f"; {per[0]}-{per[1]} per node-group Deployment"
                    if per != [scale["minReplicas"], scale["maxReplicas"]]
                    else ""
                )
            )
    lines += [
        "",
        f"KV per token: {data['kvBytesPerToken']:,} B ({data['kvBytesPerToken'] / 1024:.0f} KiB)",
        f"Prefix reuse unit: {data['prefixReuseUnitTokens']} tokens",
        f"KV tier 2: {data['kvTier']}",
    ]
    if "decodeKvCapacity" in data:
        cap = data["decodeKvCapacity"]
        lines.append(
            f"Decode KV capacity: {cap['tokensPerEngine']:,} tokens per engine ({cap['blocks']} blocks, "
            f"{cap['gib']} GiB), {cap['tokensAllDecode']:,} over all decode engines"
        )
    if "rds" in data:
        rds = data["rds"]
        lines += [
            "",
            f"RDS: {rds['tokensPerRank']:,} tokens per rank x {rds['ranksPerPod']} rank(s) per pod = "
            f"{rds['tokensAllPrefill']:,} tokens over all prefill pods",
            "Chiplet-0 budget (per prefill device):",
        ]
        lines += [f"  {label:<34}{value}" for label, value in rds["budget"].items()]
    if data["warnings"]:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in data["warnings"]]
    lines += ["", "Validated (reference design):"] + [f"  - {v}" for v in data["validated"]]
    lines += ["Unverified:"] + [f"  - {u}" for u in data["unverified"]]
    return "\n".join(lines)
