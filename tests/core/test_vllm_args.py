"""core/versions/vllm_args.py: argvs judged against `vllm serve`'s own options (the data tests/consumers checks
against the real parser)."""

import pytest

from core import serving
from core.versions import vllm_args

MODEL = ["MiniMaxAI/MiniMax-M2.7"]


def test_the_data_is_vllms_serve_parser():
    data = vllm_args.facts()
    assert data["program"] == "vllm serve" and data["version"] == vllm_args.VLLM_VERSION == "0.30.0"
    options = {o for action in data["actions"] for o in action["options"]}
    assert set(serving.FLAG_FIELDS) <= options
    assert set(serving.FLAG_ALIASES) <= options


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "8000"],
        ["--tensor_parallel_size", "2"],
        ["-tp", "2"],
        ["--no-enable-prefix-caching"],
        ["--speculative-config.method", "ngram"],
        ["--speculative-config.num_speculative_tokens=3"],
        ["-O3"],
        ["--kv-cache-dtype=fp8"],
    ],
)
def test_what_vllm_accepts(argv):
    assert vllm_args.judge(MODEL + argv) is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--foo"], "unrecognized arguments: --foo"),
        (["--foo=1", "--bar"], "unrecognized arguments: --foo=1 --bar"),
        (["--kv-cache-dtype", "fp4"], "argument --kv-cache-dtype: invalid choice: 'fp4'"),
        (["--port", "http"], "argument --port: invalid int value: 'http'"),
    ],
)
def test_what_vllm_refuses_in_its_words(argv, message):
    verdict = vllm_args.judge(MODEL + argv)
    assert verdict is not None and verdict.message.startswith(message)


def test_where_points_at_the_extra_args_entries():
    extra = ["--enforce-eager", "--foo", "--bar=2"]
    verdict = vllm_args.judge([*MODEL, "--port", "8000", *extra])
    assert vllm_args.where(verdict, extra) == [1, 2]
    verdict = vllm_args.judge([*MODEL, "--kv-cache-dtype", "fp4"])
    assert vllm_args.where(verdict, ["--kv-cache-dtype", "fp4"]) == [0]


@pytest.mark.parametrize(
    "flag, valueless",
    [
        ("--enforce-eager", True),  # BooleanOptionalAction, both spellings
        ("--no-enforce-eager", True),
        ("--headless", True),  # store_true
        ("--data-parallel-multi-port-external-lb", True),
        ("-dpm", True),  # its short alias
        ("--enable-expert-parallel", True),
        ("--max-model-len", False),
        ("--port", False),
        ("--speculative-config", False),
        ("--disable-log-requests", False),  # gone from vLLM 0.30.0's parser
    ],
)
def test_boolean_flags_come_from_the_parser_data(flag, valueless):
    assert (flag in vllm_args.boolean_flags()) is valueless


def test_a_line_is_judged_once():
    """The pack judges every engine Deployment's line, most of them alike: one verdict per distinct line, shared
    (a Verdict cannot be changed)."""
    bad = ["MiniMaxAI/MiniMax-M2.7", "--no-such-flag"]
    first = vllm_args.judge(bad)
    assert first is not None and vllm_args.judge(list(bad)) is first
    assert vllm_args.judge(["MiniMaxAI/MiniMax-M2.7"]) is None
