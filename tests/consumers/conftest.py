"""The real engine-side programs, installed by scripts/consumers-engine into a cache outside the project."""

from __future__ import annotations

import pathlib

import pytest

from tests.policy.conftest import renders
from tests.prerequisites import checked_dir, require

__all__ = ["engine_consumers", "renders"]  # `renders`: the real program's renders, made once per session

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = str(PROJECT_ROOT / "scripts" / "consumers-engine")


@pytest.fixture(scope="session")
def engine_consumers() -> pathlib.Path:
    """lmcache (installed with --no-deps) and the vllm-rbln wheel: `scripts/consumers-engine` (.ci/run runs it)."""
    found = checked_dir(SCRIPT, "--check")
    return pathlib.Path(
        require(found, "lmcache and the vllm-rbln wheel are not installed: run scripts/consumers-engine")
    )
