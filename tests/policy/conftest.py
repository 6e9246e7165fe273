"""The real program's renders, made once per session: the good fixtures every policy test starts from."""

from __future__ import annotations

import pytest

from core.stackfile import stack_file
from stacks.render import render_stack_file

STACKS = ("dev", "prod-4p4d", "agg", "pd-router07")


@pytest.fixture(scope="session")
def renders() -> dict[str, list[dict]]:
    return {stack: render_stack_file(stack_file(stack), stack).manifests for stack in STACKS}


@pytest.fixture
def prod(renders) -> list[dict]:
    """prod-4p4d as the program renders it (tests deep-copy before editing, see fixtures.mutate)."""
    return renders["prod-4p4d"]


@pytest.fixture
def agg(renders) -> list[dict]:
    return renders["agg"]
