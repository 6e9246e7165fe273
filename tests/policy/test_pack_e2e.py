"""`pulumi preview --policy-pack policy` with the real CLI (e2e: needs the Pulumi toolchain).

Runs on a copy of the project (its own file backend and stack files, the project's virtualenv
linked in), so nothing in the working tree changes. Skipped when no `pulumi` is on PATH or in the
toolchain cache of scripts/install-pulumi; never builds the toolchain itself.
"""
from __future__ import annotations

import glob
import os
import pathlib
import shutil
import subprocess

import pytest
import yaml

from stacks.stackfile import PROJECT_ROOT

pytestmark = pytest.mark.e2e
# What the copy leaves out: local state, caches, renders and the tests themselves.
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", ".pulumi-*", "build", "__pycache__", ".pytest_cache", "tests")


def toolchain() -> str:
    on_path = shutil.which("pulumi")
    cached = sorted(glob.glob(os.path.expanduser("~/.cache/rebel100-stack/*/bin/pulumi")))
    found = on_path or (cached[-1] if cached else None)
    if not found:
        pytest.skip("no Pulumi CLI on PATH or in the scripts/install-pulumi cache")
    return str(pathlib.Path(found).parent)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    bin_dir = toolchain()
    root = tmp_path_factory.mktemp("e2e") / "project"
    shutil.copytree(PROJECT_ROOT, root, ignore=NOT_COPIED)
    (root / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    (root / "state").mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PULUMI_HOME": str(root / ".pulumi-home"),
           "PULUMI_BACKEND_URL": f"file://{root / 'state'}", "PULUMI_CONFIG_PASSPHRASE": "e2e",
           "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}
    return root, env


def preview(project, stack: str, *extra: str) -> subprocess.CompletedProcess:
    root, env = project
    subprocess.run(["pulumi", "stack", "select", stack, "--create"], cwd=root, env=env, capture_output=True, check=True)
    return subprocess.run(["pulumi", "preview", "-s", stack, "--policy-pack", "policy", "--non-interactive", *extra],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)


def test_prod_passes_the_pack(project):
    proc = preview(project, "prod-4p4d", "--policy-pack-config", "policy/config/prod.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rebel100-serving@v0.1.0" in proc.stdout
    assert "[mandatory]" not in proc.stdout
    assert "[advisory]  router-autotune-block-unit" in proc.stdout


def test_resources_the_config_gate_cannot_see_are_rejected(project):
    """Extra args and env pass the config gate (it reads typed fields) but not the pack (it reads the args)."""
    root, _ = project
    path = root / "Pulumi.pp-dp.yaml"
    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack.pop("encryptionsalt", None)
    stack["config"]["rebel100:prefill"] = {"replicas": 1, "extraArgs": ["--data-parallel-size=2"],
                                           "extraEnv": {"LMCACHE_EXTRA_CONFIG": '{"rds_max_chunks":4000}'}}
    path.write_text(yaml.safe_dump(stack))
    proc = preview(project, "pp-dp")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for policy in ("pp-with-dp", "npu-claim-matches-parallelism", "rds-memory-budget"):
        assert f"[mandatory]  {policy}" in proc.stdout, proc.stdout
    assert "--pipeline-parallel-size 4 with --data-parallel-size 2" in proc.stdout
    assert "rds_max_chunks 4000" in proc.stdout
