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
PACKAGES = ("core", "objects", "components", "policy", "stacks", "localsite")


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


def test_an_upward_import_breaks_the_layers(tmp_path):
    root = copy_project(tmp_path)
    rules = root / "core" / "rules.py"
    rules.write_text(rules.read_text() + "\nfrom stacks import plan  # noqa: E402,F401 - deliberately wrong\n")
    proc = lint(root)
    assert proc.returncode == 1
    assert "BROKEN" in proc.stdout and "core.rules -> stacks.plan" in proc.stdout


@pytest.mark.parametrize("module", ["core/sizing.py", "objects/pod.py"])
def test_pulumi_in_core_or_objects_breaks_their_purity(tmp_path, module):
    root = copy_project(tmp_path)
    source = root / module
    source.write_text(source.read_text() + "\nimport pulumi  # noqa: E402,F401 - deliberately wrong\n")
    proc = lint(root)
    assert proc.returncode == 1 and "core and objects import no Pulumi SDK BROKEN" in proc.stdout


def test_pulumi_under_the_offline_cli_breaks_its_contract(tmp_path):
    """`check` was 2x its import floor while its render ran under Pulumi's mock runtime (docs/performance.md)."""
    root = copy_project(tmp_path)
    render = root / "stacks" / "render.py"
    render.write_text(render.read_text() + "\nimport pulumi.runtime  # noqa: E402,F401 - deliberately wrong\n")
    proc = lint(root)
    assert proc.returncode == 1 and "are pure BROKEN" in proc.stdout, proc.stdout


def test_an_import_cycle_between_modules_breaks_the_contract(tmp_path):
    """stacks.check imports stacks.sarif (inside a function, which counts too); an import back is a cycle."""
    root = copy_project(tmp_path)
    sarif = root / "stacks" / "sarif.py"
    sarif.write_text(
        sarif.read_text() + "\nfrom stacks.check import run_check  # noqa: E402,F401 - deliberately wrong\n"
    )
    proc = lint(root)
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
