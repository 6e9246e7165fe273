"""tests/prerequisites.py: a missing prerequisite skips locally and fails under REBEL100_REQUIRE_E2E=1."""

import pytest

from tests.prerequisites import importable, require


def test_importable_names_modules_that_import():
    assert importable("json", "email.mime") == "json, email.mime"


@pytest.mark.parametrize("modules", [("no_such_module_rebel100",), ("json", "no_such_package_rebel100.sub")])
def test_importable_is_none_when_one_is_missing(modules):
    assert importable(*modules) is None


def test_require_skips_locally(monkeypatch):
    monkeypatch.delenv("REBEL100_REQUIRE_E2E", raising=False)
    with pytest.raises(pytest.skip.Exception, match="boto3 is missing"):
        require(None, "boto3 is missing")


def test_require_fails_in_ci(monkeypatch):
    monkeypatch.setenv("REBEL100_REQUIRE_E2E", "1")
    with pytest.raises(pytest.fail.Exception, match="boto3 is missing"):
        require(importable("no_such_module_rebel100"), "boto3 is missing")
    assert require("found", "unused") == "found"
