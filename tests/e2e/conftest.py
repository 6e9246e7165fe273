"""The real Pulumi engine on a copy of the project (tests/pulumi_project.py).

The tests never build the toolchain (that is `scripts/install-pulumi`, run by `make` and `.ci/run`).
Without it they skip, unless REBEL100_REQUIRE_E2E=1 (set by .ci/run), which turns the skip into a
failure so that CI can never pass without running them.
"""

from __future__ import annotations

import pytest

from tests.prerequisites import require
from tests.pulumi_project import Project, copy_project, toolchain_dir


@pytest.fixture(scope="session")
def toolchain() -> str:
    return require(
        toolchain_dir(), "no Pulumi toolchain on PATH or in the scripts/install-pulumi cache (run `make toolchain`)"
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory, toolchain) -> Project:
    return copy_project(tmp_path_factory.mktemp("e2e") / "project", toolchain)
