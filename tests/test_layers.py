"""The layer contracts of `.importlinter` hold, and they can fail: a deliberately upward import, or an
import cycle between two modules, in a copy of the project breaks them. And ruff's linter (the rules pyproject.toml
selects: pyflakes' unused imports and undefined names among them) finds nothing."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

from core.stackfile import PROJECT_ROOT

LINT = pathlib.Path(sys.executable).parent / "lint-imports"
RUFF = pathlib.Path(sys.executable).parent / "ruff"
PACKAGES = ("core", "objects", "components", "policy", "stacks", "localsite", "sitetests", "host")


def lint(root: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def copy_project(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(PROJECT_ROOT / ".importlinter", root)
    for package in PACKAGES:
        shutil.copytree(PROJECT_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_layers_are_kept():
    proc = lint(PROJECT_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def lint_with(tmp_path: pathlib.Path, module: str, statement: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the project whose `module` (a path) ends with the import `statement`."""
    root = copy_project(tmp_path)
    source = root / module
    source.write_text(source.read_text() + f"\n{statement}  # noqa: E402,F401 - deliberately wrong\n")
    return lint(root)


def test_an_upward_import_breaks_the_layers(tmp_path):
    proc = lint_with(tmp_path, "core/rules.py", "from stacks import plan")
    assert proc.returncode == 1
    assert "BROKEN" in proc.stdout and "core.rules -> stacks.plan" in proc.stdout


@pytest.mark.parametrize("module", ["core/sizing.py", "objects/pod.py", "host/processes.py"])
def test_pulumi_in_core_objects_or_host_breaks_their_purity(tmp_path, module):
    proc = lint_with(tmp_path, module, "import pulumi")
    assert proc.returncode == 1 and "core, objects and host import no Pulumi SDK BROKEN" in proc.stdout


def test_the_site_under_host_breaks_the_layers(tmp_path):
    """host/ is below the local site and the deploy it serves: it imports neither."""
    proc = lint_with(tmp_path, "host/ports.py", "from localsite import procs")
    assert proc.returncode == 1 and "host.ports -> localsite.procs" in proc.stdout, proc.stdout


def test_the_site_tests_under_the_site_break_the_layers(tmp_path):
    """The site's runtime (localsite/) serves; the harness, the loads and the changes that test it (sitetests/) sit
    above it, and it imports none of them."""
    proc = lint_with(tmp_path, "localsite/agent.py", "from sitetests import load")
    assert proc.returncode == 1 and "localsite.agent -> sitetests.load" in proc.stdout, proc.stdout


def test_the_pulumi_sdk_in_the_pack_breaks_its_contract(tmp_path):
    """The project's language host starts the pack without the stack's configuration (policy/PulumiPolicy.yaml)."""
    proc = lint_with(tmp_path, "policy/memory.py", "import pulumi")
    assert proc.returncode == 1 and "reads no stack configuration" in proc.stdout and "BROKEN" in proc.stdout, (
        proc.stdout
    )


def test_pulumi_under_the_offline_cli_breaks_its_contract(tmp_path):
    """`check` was 2x its import floor while its render ran under Pulumi's mock runtime (docs/performance.md)."""
    proc = lint_with(tmp_path, "stacks/render.py", "import pulumi.runtime")
    assert proc.returncode == 1 and "are pure BROKEN" in proc.stdout, proc.stdout


@pytest.mark.parametrize("module", ["localsite/agent.py", "sitetests/load.py"])
def test_the_pack_under_the_local_site_or_its_tests_breaks_its_contract(tmp_path, module):
    """The site's kubelet read label selectors and flags through the pack's readers; they are core's now."""
    proc = lint_with(tmp_path, module, "from policy.read import objects")
    assert proc.returncode == 1 and "the local site and its tests import nothing of the policy pack" in proc.stdout
    assert "BROKEN" in proc.stdout, proc.stdout


def test_an_import_cycle_between_modules_breaks_the_contract(tmp_path):
    """stacks.check imports stacks.sarif (inside a function, which counts too); an import back is a cycle."""
    proc = lint_with(tmp_path, "stacks/sarif.py", "from stacks.check import run_check")
    assert proc.returncode == 1
    assert "no import cycle between the modules of a layer BROKEN" in proc.stdout, proc.stdout


def ruff_check(root: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "--output-format", "concise", "."], cwd=root, capture_output=True, text=True
    )


def test_ruff_finds_nothing():
    proc = ruff_check(PROJECT_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_unused_import_or_undefined_name_fails_ruff(tmp_path):
    root = copy_project(tmp_path)
    shutil.copy(PROJECT_ROOT / "pyproject.toml", root)
    assert ruff_check(root).returncode == 0
    sizing = root / "core" / "sizing.py"
    sizing.write_text(sizing.read_text() + "\nimport zlib\n\n\ndef f():\n    return undefined_name\n")
    proc = ruff_check(root)
    assert proc.returncode == 1
    assert "core/sizing.py" in proc.stdout and "F401" in proc.stdout and "F821" in proc.stdout, proc.stdout
