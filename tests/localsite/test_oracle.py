"""The agentic bench's oracle through the router (sitetests/agentic.py `pin_in_router`): the render's EPP, with
upstream's `header-based-testing-filter` first in every scheduling profile, sends each session to the decode rank and
prefill engine it is pinned to, turn after turn, on the path every routed option takes.

Broken once (docs/testing.md): the same test on the render as it is (no filter) fails, the router placing sessions by
its own scores.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from sitetests import agentic
from sitetests.harness import ServedSite
from tests.localsite.conftest import served

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def pinned(tmp_path_factory, site_binaries) -> Iterator[ServedSite]:
    yield from served(
        tmp_path_factory,
        site_binaries,
        "pinned",
        agentic.ENGINE_MODE,
        render_edit=agentic.pin_in_router,
        probe_headers=agentic.pin_every_engine,
    )


def test_the_oracle_through_the_router_sends_every_turn_of_a_session_where_it_is_pinned(pinned, site_binaries):
    decode = pinned.engine_ranks(site_binaries.programs.sidecar, "decode")
    prefill = pinned.engine_ranks(site_binaries.programs.sim, "prefill")
    trace = agentic.Trace.make(uuid.uuid4().int % 10**6, sessions=5, turns=2, pause_s=(0.5, 0.5))
    run = agentic.replay(trace, agentic.router_pinned_target(pinned.base_url, decode, prefill))
    assert [r.error for r in run.records if r.error] == []
    assert [r for r in run.records if r.turn == 0 and not r.prefiller] == [], "a first turn is P/D: all of it is new"
    assert agentic.off_pins(run.records, decode, prefill) == []
    assert len({agentic.pins(s, decode, prefill) for s in range(trace.sessions)}) == trace.sessions
