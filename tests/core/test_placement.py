"""core.placement: the stack's engine pods against a site inventory (the local cluster's shape)."""
from core.config import StackConfig
from core.placement import NumaNode, SiteNode, place

LABELS = {"rebellions.ai/npu.present": "true", "rebellions.ai/npu.product": "RBLN-CR13", "rebellions.ai/rds.present": "true"}


def site(nodes=4, labels=LABELS, npus_per_numa=4, nics_per_numa=2):
    return [SiteNode(f"rebel100-node-{i}", dict(labels), {n: NumaNode(npus_per_numa, nics_per_numa) for n in (0, 1)})
            for i in range(nodes)]


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
