"""stacks/plan.py in process: the figures the plan derives, written by hand from the reference design."""

from core.gate import load_config
from stacks.plan import plan
from tests.conftest import stack_config


def test_decode_capacity_of_282624_tokens_is_69_blocks_of_4096():
    """Section 3: 282,624 KV tokens per decode engine (maxNumSeqs 8) = 69 blocks of 4096."""
    cfg = load_config(stack_config("prod-4p4d", decode={"maxNumSeqs": 8, "kvCapacityTokens": 282_624}))
    assert plan(cfg)["decodeKvCapacity"] == {
        "tokensPerEngine": 282_624,
        "blocks": 69,  # 282,624 / 4096
        "gib": 33.42,  # 282,624 x 126,976 B / 2^30 = 33.42
        "tokensAllDecode": 1_130_496,  # x 4 decode pods
    }


def test_decode_capacity_rounds_blocks_down():
    cfg = load_config(stack_config("prod-4p4d", decode={"kvCapacityTokens": 4095}))
    assert plan(cfg)["decodeKvCapacity"]["blocks"] == 0


def test_autoscaling_bounds_in_the_plan():
    """prod-autoscale: both roles 1-4 pods; the NPUs counted at the maxima (32 of 32), 8 at the minima (4 + 4)."""
    from stacks.plan import format_plan

    cfg = load_config(stack_config("prod-autoscale"))
    data = plan(cfg)
    assert data["totalDevices"] == 32
    assert data["autoscaling"]["devicesAtMinimum"] == 8
    assert data["autoscaling"]["prometheus"] == "http://prometheus-operated.monitoring.svc:9090"
    assert data["autoscaling"]["roles"]["decode"] == {
        "minReplicas": 1,
        "maxReplicas": 4,
        "metric": "kvCacheUsage",
        "target": 0.8,
        "series": "vllm:kv_cache_usage_perc",
        "unit": "share of the KV cache in use (0-1), averaged over a pod's DP ranks",
        "stabilizationSeconds": [0, 300],
        "pollingIntervalSeconds": 15,
        "perDeployment": [1, 4],
    }
    text = format_plan("prod-autoscale", data)
    assert "prefill    1-4  TP1 PP4 DP1              4    16  8000" in text
    assert (
        "  prefill  1-4 pods on engineQueue (vllm:num_requests_waiting), target 2 per pod: requests waiting in the "
        "engine's scheduler, per pod; stabilisation up 0 s, down 300 s; polled every 15 s"
    ) in text
    grouped = plan(
        load_config(
            stack_config(
                "prod-autoscale",
                placement={"groups": 2},
                prefill={"autoscaling": {"minReplicas": 2, "maxReplicas": 4}},
                decode={"autoscaling": {"minReplicas": 2, "maxReplicas": 4}},
            )
        )
    )
    assert grouped["autoscaling"]["roles"]["prefill"]["perDeployment"] == [1, 2]
    assert "; 1-2 per node-group Deployment" in format_plan("x", grouped)
