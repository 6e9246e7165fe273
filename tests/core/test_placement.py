"""core.placement: the stack's engine pods against a site inventory (the local cluster's shape)."""

import pytest

from core import labels
from core.config import StackConfig
from core.placement import NumaNode, SiteNode, needs, place

LABELS = {
    "rebellions.ai/npu.present": "true",
    "rebellions.ai/npu.product": "RBLN-CR13",
    "rebellions.ai/rds.present": "true",
}


def site(nodes=4, labels=LABELS, npus_per_numa=4, nics_per_numa=2):
    return [
        SiteNode(f"rebel100-node-{i}", dict(labels), {n: NumaNode(npus_per_numa, nics_per_numa) for n in (0, 1)})
        for i in range(nodes)
    ]


def test_prod_4p4d_fits_one_prefill_and_one_decode_per_node():
    placed, problems = place(StackConfig(), site())
    assert problems == []
    by_node = {}
    for pod in placed:
        by_node.setdefault(pod.node, []).append(pod)
    assert len(placed) == 8 and all(len(pods) == 2 for pods in by_node.values())
    assert all({p.numa for p in pods} == {0, 1} for pods in by_node.values())


def test_five_and_five_on_four_nodes_is_refused_with_the_reason():
    cfg = StackConfig.model_validate({"prefill": {"replicas": 5}, "decode": {"replicas": 5}})
    _, problems = place(cfg, site())
    assert len(problems) == 2
    assert problems[0].startswith("minimax-m27-prefill pod 5 (4 NPUs + 2 NICs on one NUMA node")
    assert "4 nodes: already runs a prefill pod (anti-affinity: placement.spreadRoles)" in problems[0]
    assert "lower prefill.replicas, or add nodes" in problems[0]


def test_without_rds_nodes_prefill_fits_nowhere():
    no_rds = {k: v for k, v in LABELS.items() if k != "rebellions.ai/rds.present"}
    _, problems = place(StackConfig(), site(labels=no_rds))
    assert len(problems) == 4 and all("4 nodes: node affinity" in p for p in problems)


def test_a_pod_larger_than_a_numa_node_fits_nowhere():
    cfg = StackConfig.model_validate({"decode": {"dataParallelSize": 4, "tensorParallelSize": 2}})
    _, problems = place(cfg, site())
    assert any("8 NPUs + 2 NICs" in p and "no NUMA node with 8 free NPUs" in p for p in problems)


def test_each_pod_takes_its_devices_from_one_numa_node():
    """One node, two NUMA nodes of 4 NPUs + 2 NICs: a prefill pod (4 + 2) fills NUMA 0, a decode pod NUMA 1, and
    nothing is left for a third pod."""
    cfg = StackConfig.model_validate({"prefill": {"replicas": 1}, "decode": {"replicas": 1}})
    nodes = site(nodes=1)
    placed, problems = place(cfg, nodes)
    assert problems == []
    assert [(p.pod, p.node, p.numa) for p in placed] == [
        ("minimax-m27-prefill pod 1", "rebel100-node-0", 0),
        ("minimax-m27-decode pod 1", "rebel100-node-0", 1),
    ]
    assert nodes[0].numa == {0: NumaNode(0, 0), 1: NumaNode(0, 0)}


def test_nics_count_as_much_as_npus():
    """8 free NPUs on a NUMA node but 1 NIC: a pod of 4 NPUs + 2 NICs does not fit."""
    nodes = [SiteNode("n", dict(LABELS), {0: NumaNode(8, 1), 1: NumaNode(4, 2)})]
    cfg = StackConfig.model_validate({"prefill": {"replicas": 1}, "decode": {"replicas": 1}})
    placed, problems = place(cfg, nodes)
    assert [p.numa for p in placed] == [1]  # prefill: NUMA 1 (NUMA 0 lacks a NIC); decode: nothing left
    assert len(problems) == 1
    assert problems[0] == (
        "minimax-m27-decode pod 1 (4 NPUs + 2 NICs on one NUMA node, nodes labelled "
        "rebellions.ai/npu.present=true, rebellions.ai/npu.product=RBLN-CR13) fits no node of the "
        "site's 1: 1 node: no NUMA node with 4 free NPUs and 2 free NICs. It would stay Pending "
        '("0/1 nodes are available"); lower decode.replicas, or add nodes.'
    )


def test_reasons_are_counted_per_node_and_an_empty_site_says_so():
    cfg = StackConfig.model_validate({"prefill": {"replicas": 1}, "decode": {"replicas": 1}})
    without_rds = {k: v for k, v in LABELS.items() if k != "rebellions.ai/rds.present"}
    nodes = [
        SiteNode("a", dict(without_rds), {0: NumaNode(4, 2)}),
        SiteNode("b", dict(LABELS), {0: NumaNode(2, 2)}),
        SiteNode("c", dict(without_rds), {0: NumaNode(4, 2)}),
    ]
    _, problems = place(cfg, nodes)
    assert "fits no node of the site's 3: 2 nodes: node affinity; 1 node: no NUMA node with 4 free NPUs" in problems[0]
    assert "rebellions.ai/rds.present=true" in problems[0]  # prefill on RDS needs RDS nodes; decode does not
    _, none = place(cfg, [])
    assert "fits no node of the site's 0: there are no nodes." in none[0]


def test_groups_add_their_label_and_cpu_tier_needs_no_rds():
    cfg = StackConfig.model_validate(
        {"prefill": {"replicas": 2}, "decode": {"replicas": 2}, "kvTier": {"mode": "cpu"}, "placement": {"groups": 2}}
    )
    pods = needs(cfg)
    assert [(p.pool, p.labels.get(cfg.placement.group_label)) for p in pods] == [
        ("minimax-m27-prefill-g0", "g0"),
        ("minimax-m27-prefill-g1", "g1"),
        ("minimax-m27-decode-g0", "g0"),
        ("minimax-m27-decode-g1", "g1"),
    ]
    assert all("rebellions.ai/rds.present" not in p.labels for p in pods)
    single = needs(StackConfig.model_validate({}))
    assert all(cfg.placement.group_label not in p.labels for p in single)


def test_required_node_labels_are_the_ones_the_pod_affinity_lists():
    """What the placement check asks of a node is what objects/pod.py writes into the pod's node affinity, in order."""
    assert list(labels.required_node_labels("P", rds=True, group_label="site/group", group="g1").items()) == [
        ("rebellions.ai/npu.present", "true"),
        ("rebellions.ai/npu.product", "P"),
        ("rebellions.ai/rds.present", "true"),
        ("site/group", "g1"),
    ]
    assert labels.required_node_labels("P", rds=False, group_label="site/group", group=None) == {
        "rebellions.ai/npu.present": "true",
        "rebellions.ai/npu.product": "P",
    }


@pytest.mark.parametrize(
    "role, tier, needed",
    [("prefill", "rds", True), ("decode", "rds", False), ("prefill", "cpu", False), ("prefill", "off", False)],
)
def test_only_prefill_with_the_rds_tier_needs_rds_nodes(role, tier, needed):
    assert labels.needs_rds_nodes(role, tier) is needed
