"""Built tools the slow tests need, found by their scripts' `--check` (which never builds), and the one rule for
when they are missing: skip, unless REBEL100_REQUIRE_E2E=1 (set by .ci/run), which makes that a failure."""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest


def checked_dir(*command: str) -> str | None:
    """The last stdout line of a `--check` command (a bin folder), or None when it exits non-zero."""
    proc = subprocess.run(list(command), capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if proc.returncode == 0 and lines else None


def importable(*modules: str) -> str | None:
    """The modules' names when every one of them can be imported, else None (for `require`)."""
    try:
        found = all(importlib.util.find_spec(module) is not None for module in modules)
    except ModuleNotFoundError:  # a parent package of a dotted name is missing
        found = False
    return ", ".join(modules) if found else None


def require(found: str | None, message: str) -> str:
    """`found`, or skip the test with `message` (fail it under REBEL100_REQUIRE_E2E=1)."""
    if not found:
        if os.environ.get("REBEL100_REQUIRE_E2E") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found
