"""The render-mode main job (`scripts/up dev`) always leaves the render it reports, and the documented
commands (docs/deploying.md) work in the order written on a fresh clone with no login (one backend for up and preview).

Runs scripts/up and scripts/preview on a copy of the project (see conftest.py).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from core.stackfile import stack_file
from stacks import render
from tests.e2e.test_engine import rendered_files
from tests.pulumi_project import Project, tree_digest

pytestmark = pytest.mark.e2e


def run(project: Project, *command: str, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        list(command), cwd=project.root, env=env or project.env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"{' '.join(command)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def assert_full_render(project: Project) -> None:
    engine = rendered_files(project.root / "build" / "dev")
    offline = {render.manifest_path(m): m for m in render.render_stack_file(stack_file("dev"), "dev").manifests}
    assert sorted(engine) == sorted(offline)
    for path, manifest in offline.items():
        assert engine[path] == manifest, path


def test_up_writes_every_manifest_again_after_clean_delete_or_edit(project: Project):
    run(project, "scripts/up", "dev")
    assert_full_render(project)

    # `make clean` deletes build/: the next up writes every file again (not "27 unchanged").
    run(project, "make", "clean")
    assert not (project.root / "build").exists()
    again = run(project, "scripts/up", "dev")
    assert "forgetting the stack's state" in again.stderr
    assert_full_render(project)

    # An edited file and a deleted one: restored.
    files = sorted((project.root / "build" / "dev").rglob("*.yaml"))
    files[0].write_text(files[0].read_text() + "# edited by hand\n")
    files[1].unlink()
    run(project, "scripts/up", "dev")
    assert_full_render(project)
    assert "edited by hand" not in files[0].read_text()

    # Nothing touched: no forgetting, the engine reports no change and the files stay as they are.
    before = tree_digest(project.root / "build" / "dev")
    quiet = run(project, "scripts/up", "dev")
    assert "forgetting" not in quiet.stderr and "unchanged" in quiet.stdout
    assert "+ " not in quiet.stdout.split("Resources:")[1]
    assert tree_digest(project.root / "build" / "dev") == before


def test_readme_order_up_then_preview_without_login(project: Project):
    """`make up` then `scripts/preview prod-4p4d --diff` with no PULUMI_BACKEND_URL and no login:
    both scripts pick the file backend inside the project (scripts/pulumi-env)."""
    env = {k: v for k, v in project.env.items() if k not in ("PULUMI_BACKEND_URL", "PULUMI_ACCESS_TOKEN")}
    run(project, "scripts/up", "dev", env=env)
    preview = run(project, "scripts/preview", "prod-4p4d", "--diff", env=env)
    assert "to create" in preview.stdout
    stacks = {p.stem for p in (project.root / ".pulumi-state").rglob("*.json") if p.parent.name == "rebel100-serving"}
    assert {"dev", "prod-4p4d"} <= stacks, stacks
    assert (
        not os.path.exists(project.root / ".pulumi-home" / "credentials.json")
        or "pulumi.com" not in (project.root / ".pulumi-home" / "credentials.json").read_text()
    )
