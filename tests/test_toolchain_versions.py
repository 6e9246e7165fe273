"""The Python SDK of the Kubernetes provider is the provider the toolchain builds.

Pulumi warns on every run when the SDK asks for a newer provider than the one it finds ("resource
plugin kubernetes is expected to have version >=X, but has Y"); these fail as soon as the pin in
requirements.txt, the version scripts/install-pulumi builds and the installed SDK drift apart.
The end-to-end PR-check preview (tests/e2e/test_engine.py) checks the engine prints no such warning.
"""

from __future__ import annotations

import importlib.metadata
import re

from core.stackfile import PROJECT_ROOT

INSTALLER = (PROJECT_ROOT / "scripts" / "install-pulumi").read_text()


def sdk_pin() -> str:
    match = re.search(r"^pulumi-kubernetes==(\S+)$", (PROJECT_ROOT / "requirements.txt").read_text(), re.M)
    assert match, "requirements.txt pins no pulumi-kubernetes version"
    return match.group(1)


def built_provider() -> str:
    match = re.search(r'^K8S_PROVIDER_VERSION="\$\{K8S_PROVIDER_VERSION:-([0-9.]+)\}"$', INSTALLER, re.M)
    assert match, "scripts/install-pulumi sets no default K8S_PROVIDER_VERSION"
    return match.group(1)


def test_sdk_pin_is_the_provider_the_toolchain_builds():
    assert sdk_pin() == built_provider(), (
        f"requirements.txt pins pulumi-kubernetes {sdk_pin()} but scripts/install-pulumi builds provider "
        f"{built_provider()}: every pulumi run would warn; pin the SDK to the provider's version"
    )


def test_installed_sdk_is_the_pin():
    assert importlib.metadata.version("pulumi-kubernetes") == sdk_pin(), "the virtualenv is stale: run `make venv`"


def test_the_built_version_can_be_fetched():
    """The provider's release tag is not served by the Go module proxy here; its commit's pseudo-version is."""
    served = re.search(r"\[" + re.escape(built_provider()) + r"\]=v4\.0\.0-\d{14}-[0-9a-f]{12}", INSTALLER)
    assert served, f"scripts/install-pulumi has no module version to build provider {built_provider()} from"
