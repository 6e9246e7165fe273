"""The coding-agent trace (sitetests/agentic.py) without a site: what every routing option is given to replay."""

from __future__ import annotations

import collections
import pathlib
import re
import shutil

import pytest
import yaml

from core.config import StackConfig
from core.versions import Version, epp_schema
from objects.router import CONFIG_FILE
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


GOLDEN = pathlib.Path(__file__).parents[1] / "golden" / "prod-4p4d"
RANKS = [("127.1.0.2", 8000), ("127.1.0.2", 8001), ("127.1.0.3", 8000), ("127.1.0.3", 8001)]
PREFILL = [("127.1.0.4", 8000), ("127.1.0.4", 8001)]


def test_the_oracle_pins_each_session_to_one_rank_of_each_kind_and_spreads_them_evenly():
    placed = [agentic.pins(s, RANKS, PREFILL) for s in range(8)]
    assert placed[0] == ("127.1.0.2:8000", "127.1.0.4:8000") and placed[5] == ("127.1.0.2:8001", "127.1.0.4:8001")
    assert collections.Counter(d for d, _ in placed) == {f"{ip}:{port}": 2 for ip, port in RANKS}
    assert collections.Counter(p for _, p in placed) == {f"{ip}:{port}": 4 for ip, port in PREFILL}


def test_off_pins_lists_the_requests_answered_elsewhere_than_their_sessions_pins():
    home = agentic.Record(started=0.0, session=1, turn=0, destination="127.1.0.2:8001", prefiller="127.1.0.4:8001")
    decode_only = agentic.Record(started=0.0, session=1, turn=1, destination="127.1.0.2:8001")
    other_rank = agentic.Record(
        started=0.0, session=1, turn=2, destination="127.1.0.3:8001", prefiller="127.1.0.4:8001"
    )
    other_prefill = agentic.Record(
        started=0.0, session=1, turn=3, destination="127.1.0.2:8001", prefiller="127.1.0.4:8000"
    )
    records = [home, decode_only, other_rank, other_prefill]
    assert agentic.off_pins(records, RANKS, PREFILL) == [other_rank, other_prefill]


def test_the_pinned_router_keeps_its_render_and_puts_the_pin_filter_first_in_every_profile(tmp_path):
    """The render of prod-4p4d (its golden copy) edited for the oracle: the EPP config the v0.10.0 EPP's own schema
    accepts (core's data of it), every profile led by the filter, the rest as rendered."""
    render = tmp_path / "render"
    shutil.copytree(GOLDEN, render)
    agentic.pin_in_router(render)
    before, after = (epp_config(folder) for folder in (GOLDEN, render))
    assert after["plugins"] == [*before["plugins"], {"type": agentic.PIN_FILTER, "name": agentic.PIN_FILTER}]
    for was, now in zip(before["schedulingProfiles"], after["schedulingProfiles"], strict=True):
        assert now["plugins"] == [{"pluginRef": agentic.PIN_FILTER}, *was["plugins"]]
    assert epp_schema.check_epp_config(after, epp_schema.data_for("epp", Version(0, 10, 0))) == []
    changed = [p.name for p in render.rglob("*.yaml") if p.read_text() != (GOLDEN / p.relative_to(render)).read_text()]
    assert changed == ["v1-configmap-rebel100-minimax-m27-epp-config.yaml"]


def test_pin_in_router_says_so_when_the_render_has_no_epp_config(tmp_path):
    with pytest.raises(RuntimeError, match=r"no ConfigMap with epp-config\.yaml"):
        agentic.pin_in_router(tmp_path)


def epp_config(render: pathlib.Path) -> dict:
    (path,) = render.rglob("*epp-config.yaml")
    return yaml.safe_load(yaml.safe_load(path.read_text())["data"][CONFIG_FILE])
