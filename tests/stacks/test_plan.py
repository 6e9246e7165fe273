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
