"""The real program's renders, made once per session: the good fixtures every policy test starts from."""

from __future__ import annotations

import pytest

from core.stackfile import stack_file
from sitetests.harness import stack_file_variant
from stacks.render import render_stack_file

STACKS = ("dev", "prod-4p4d", "agg", "pd-router07")
# prod-4p4d routed by the engines' KV events (router.prefixCache precise), in 512-token blocks (4096 / 8).
PRECISE = "prod-precise"
PRECISE_ROUTER = {"prefixCache": "precise", "blockSizeTokens": 512}
SESSIONLESS = "prod-sessionless"  # prod-4p4d without session affinity (no v0.10-only plugin)


@pytest.fixture(scope="session")
def renders(tmp_path_factory) -> dict[str, list[dict]]:
    found = {stack: render_stack_file(stack_file(stack), stack).manifests for stack in STACKS}
    variant = stack_file_variant(
        "prod-4p4d",
        tmp_path_factory.mktemp("precise"),
        lambda values: values.setdefault("rebel100:router", {}).update(PRECISE_ROUTER),
    )
    found[PRECISE] = render_stack_file(variant, "prod-4p4d").manifests
    variant = stack_file_variant(
        "prod-4p4d",
        tmp_path_factory.mktemp("sessionless"),
        lambda values: values.setdefault("rebel100:router", {}).update(sessionAffinityWeight=0),
    )
    found[SESSIONLESS] = render_stack_file(variant, "prod-4p4d").manifests
    return found


@pytest.fixture
def prod(renders) -> list[dict]:
    """prod-4p4d as the program renders it (tests deep-copy before editing, see fixtures.mutate)."""
    return renders["prod-4p4d"]


@pytest.fixture
def precise(renders) -> list[dict]:
    """prod-4p4d with the precise prefix cache: the EPP's tokenizer, the engines' KV events."""
    return renders[PRECISE]


@pytest.fixture
def sessionless(renders) -> list[dict]:
    """prod-4p4d without session affinity: its config is one a v0.9 EPP reads."""
    return renders[SESSIONLESS]


@pytest.fixture
def agg(renders) -> list[dict]:
    return renders["agg"]
