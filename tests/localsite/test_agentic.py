"""The coding-agent trace (sitetests/agentic.py) without a site: what every routing option is given to replay."""

from __future__ import annotations

import re

from core.config import StackConfig
from sitetests import agentic

# llm-d-inference-sim v0.10.2's dummy tokenizer (pkg/tokenizer/tokenizer.go): a word or a punctuation mark, with the
# space after it, is one token.
SIM_TOKEN = re.compile(r"""(\{|\}|:|,|-|\.|\?|\!|;|@|#|\$|%|\^|&|\*|\(|\)|\+|\-|_|~|/|\\|>|<|\[|\]|=|"|'|\w+)(\s*)""")


def test_the_same_seed_gives_the_same_trace_and_another_seed_another():
    assert agentic.Trace.make(5, sessions=3, turns=2) == agentic.Trace.make(5, sessions=3, turns=2)
    assert agentic.Trace.make(5, sessions=3, turns=2) != agentic.Trace.make(6, sessions=3, turns=2)


def test_each_turn_extends_the_prompt_of_the_last_with_its_answer_and_what_the_turn_adds():
    trace = agentic.Trace.make(1, sessions=2, turns=3)
    first, second, third = (trace.prompt(0, t) for t in range(3))
    assert first == trace.system + trace.added[0][0]
    assert second == first + trace.answers[0][0] + trace.added[0][1]
    assert third == second + trace.answers[0][1] + trace.added[0][2]
    assert len(trace.answers[0][0]) // 4 == agentic.ANSWER_TOKENS
    assert trace.prompt(1, 0) != first and trace.prompt(1, 0).startswith(trace.system)


def test_a_prompt_is_as_many_simulator_tokens_as_router_tokens_of_four_bytes():
    trace = agentic.Trace.make(2, sessions=1, turns=1)
    prompt = trace.prompt(0, 0)
    tokens = len(SIM_TOKEN.findall(prompt))
    assert (
        tokens == trace.prompt_tokens(0, 0) == len(prompt) // 4 == agentic.SYSTEM_TOKENS + len(trace.added[0][0]) // 4
    )
    assert agentic.ADDED_TOKENS[0] <= len(trace.added[0][0]) // 4 <= agentic.ADDED_TOKENS[1]


def test_the_engines_timing_follows_the_stack():
    timing = agentic.SimTiming.of(StackConfig())
    assert timing.prefill_tokens_per_s == StackConfig().router.peak_prefill_throughput
    assert "--prefill-time-per-token=443us" in timing.sim_args()  # 1 / 2256 tokens a second
    assert "--kv-cache-transfer-time-per-token=5079ns" in timing.sim_args()  # 126,976 B a token at 25 GB/s
    half = agentic.SimTiming.of(StackConfig(), time_scale=0.5)
    assert half.prefill_tokens_per_s == 2 * timing.prefill_tokens_per_s
    # The prefill engine's throughput shared by the 4 sequences it runs at once (prefill --max-num-seqs 4).
    assert "--time-factor-under-load=4" in timing.sim_args()
    two = StackConfig.model_validate({"prefill": {"maxNumSeqs": 2}, "decode": {"maxNumSeqs": 8}})
    assert "--time-factor-under-load=2" in agentic.SimTiming.of(two).sim_args()
    agg = StackConfig.model_validate({"topology": "agg", "decode": {"maxNumSeqs": 8}})
    assert "--time-factor-under-load=8" in agentic.SimTiming.of(agg).sim_args()  # no prefill role: decode prefills


def record(session: int, turn: int, prefiller: str = "", destination: str = "") -> agentic.Record:
    return agentic.Record(
        session,
        turn,
        0.0,
        status=200,
        ttft=0.5,
        prompt_tokens=100,
        prefiller=prefiller,
        destination=destination,
        pod=destination.split(":")[0],
    )


def moved(*records: agentic.Record) -> int:
    return len(agentic.summarize(agentic.Run(list(records), wall=1.0)).moved)


def test_a_session_moves_when_two_engines_of_a_kind_computed_its_prompts():
    # prefilled on A, then computed by the decode rank that holds it: stayed
    assert moved(record(0, 0, prefiller="A:8000"), record(0, 1, destination="d1:8200")) == 0
    # one prefill engine throughout: stayed; then on B: moved
    assert moved(record(0, 0, prefiller="A:8000"), record(0, 1, prefiller="A:8000")) == 0
    assert moved(record(0, 0, prefiller="A:8000"), record(0, 1, prefiller="B:8000")) == 1
    # decode-only on two ranks of one pod: moved (a rank's cache is its own)
    assert moved(record(0, 0, destination="d1:8200"), record(0, 1, destination="d1:8201")) == 1
    # counted by session
    assert moved(*(record(s, t, prefiller=f"{s}{t}:8000") for s in range(3) for t in range(2))) == 3
    stayed, left = record(0, 0, prefiller="A:8000"), record(1, 0, prefiller="A:8000")
    run = agentic.Run([stayed, record(0, 1, prefiller="A:8000"), left, record(1, 1, prefiller="B:8000")], wall=1.0)
    assert agentic.summarize(run).moved == (1,)  # which sessions, for the bench to name


def test_placed_counts_the_sessions_each_prefill_engine_began_most_first():
    records = [record(0, 0, prefiller="A:8000"), record(0, 1, prefiller="B:8000"), record(1, 0, prefiller="B:8000")]
    records += [record(2, 0, prefiller="B:8000"), record(3, 0, destination="d1:8200"), record(4, 1, prefiller="C:8000")]
    assert agentic.summarize(agentic.Run(records, wall=1.0)).placed == (2, 1)


def test_the_sessions_below_one_block_are_those_whose_first_prompt_is_shorter():
    trace = agentic.Trace.make(37, sessions=32, turns=2)
    firsts = {s: trace.prompt_tokens(s, 0) for s in range(32)}
    block = sorted(firsts.values())[5]  # six sessions at or below it, five strictly
    assert trace.below_one_block(block) == sorted(s for s, tokens in firsts.items() if tokens < block)
    assert len(trace.below_one_block(block)) == 5
    assert trace.below_one_block(agentic.SYSTEM_TOKENS) == []  # every first prompt holds the system prompt and more
