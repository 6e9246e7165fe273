"""Will the stack's engine pods fit the site? A placement of every pod on the site's nodes, before apply.

The scheduler decides for real; this is the same question asked of the site's inventory (node labels
and the devices its ResourceSlices publish, per NUMA node) so that a stack that can never be placed,
e.g. 5 prefill + 5 decode pods with one pod of a role per node on 4 nodes, is refused before `pulumi
up` changes anything, naming the pod and the reason. It counts the site's devices, not their current
use by other workloads: passing is necessary, not sufficient (the scheduler's own verdict during `up`
covers the rest). Pure: the site comes in as data (`stacks.site` reads it from a cluster).
"""

from __future__ import annotations

import dataclasses

from core.config import StackConfig
from core.derive import derive
from core.labels import needs_rds_nodes, pool_names, required_node_labels


@dataclasses.dataclass
class NumaNode:
    npus: int
    nics: int


@dataclasses.dataclass
class SiteNode:
    name: str
    labels: dict[str, str]
    numa: dict[int, NumaNode]  # free devices per NUMA node (mutated by place())


@dataclasses.dataclass(frozen=True)
class PodNeed:
    role: str
    pool: str
    index: int
    npus: int
    nics: int
    labels: dict[str, str]  # node labels it requires
    spread: bool


@dataclasses.dataclass(frozen=True)
class Placed:
    pod: str
    node: str
    numa: int


def needs(cfg: StackConfig) -> list[PodNeed]:
    """Every engine pod of the stack with what it asks of a node (as objects/pod.py writes it)."""
    facts = derive(cfg)
    groups = cfg.placement.groups
    pods = []
    for name, _role in cfg.engine_roles():
        for group, pool in pool_names(cfg.name, name, groups):
            group_labels = required_node_labels(
                cfg.hardware.npu_product,
                rds=needs_rds_nodes(name, facts.kv_tier),
                group_label=cfg.placement.group_label,
                group=group,
            )
            for index in range(facts.roles[name].replicas // groups):  # an autoscaled role at its maximum
                pods.append(
                    PodNeed(
                        name,
                        pool,
                        index,
                        facts.roles[name].serving.devices,
                        cfg.hardware.rdma_nics_per_pod,
                        group_labels,
                        cfg.placement.spread_roles,
                    )
                )
    return pods


def _why_not(pod: PodNeed, node: SiteNode, roles_on: set[str]) -> str | None:
    """None when the pod fits the node now, else the reason (the scheduler's words where it has them)."""
    if any(node.labels.get(key) != value for key, value in pod.labels.items()):
        return "node affinity"
    if pod.spread and pod.role in roles_on:
        return f"already runs a {pod.role} pod (anti-affinity: placement.spreadRoles)"
    if not any(numa.npus >= pod.npus and numa.nics >= pod.nics for numa in node.numa.values()):
        return f"no NUMA node with {pod.npus} free NPUs and {pod.nics} free NICs"
    return None


def place(cfg: StackConfig, nodes: list[SiteNode]) -> tuple[list[Placed], list[str]]:
    """(where each pod would go, the pods that cannot go anywhere and why). Greedy, roles in order."""
    placed: list[Placed] = []
    problems: list[str] = []
    roles_on: dict[str, set[str]] = {node.name: set() for node in nodes}
    for pod in needs(cfg):
        name = f"{pod.pool} pod {pod.index + 1}"
        reasons: dict[str, int] = {}
        for node in nodes:
            why = _why_not(pod, node, roles_on[node.name])
            if why is None:
                numa_id, numa = next(
                    (i, n) for i, n in sorted(node.numa.items()) if n.npus >= pod.npus and n.nics >= pod.nics
                )
                numa.npus -= pod.npus
                numa.nics -= pod.nics
                roles_on[node.name].add(pod.role)
                placed.append(Placed(name, node.name, numa_id))
                break
            reasons[why] = reasons.get(why, 0) + 1
        else:
            detail = "; ".join(f"{count} node{'s' if count != 1 else ''}: {why}" for why, count in reasons.items())
            labels = ", ".join(f"{k}={v}" for k, v in pod.labels.items())
            problems.append(
                f"{name} ({pod.npus} NPUs + {pod.nics} NICs on one NUMA node, nodes labelled {labels}) fits no node of "
                f"the site's {len(nodes)}: {detail or 'there are no nodes'}. It would stay Pending "
                f'("0/{len(nodes)} nodes are available"); lower {pod.role}.replicas, or add nodes.'
            )
    return placed, problems
