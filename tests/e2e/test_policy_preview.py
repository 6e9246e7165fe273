"""`pulumi preview --policy-pack policy` with the real CLI (e2e: needs the Pulumi toolchain).

Runs on a copy of the project (its own file backend and stack files, the project's virtualenv
linked in), so nothing in the working tree changes. Skipped when no `pulumi` is on PATH or in the
toolchain cache of scripts/install-pulumi; never builds the toolchain itself.
"""
from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.e2e


def preview(project, stack: str, *extra: str):
    project.select(stack)
    return project.pulumi("preview", "-s", stack, "--policy-pack", "policy", *extra)


def test_prod_passes_the_pack(project):
    proc = preview(project, "prod-4p4d", "--policy-pack-config", "policy/config/prod.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rebel100-serving@v0.1.0" in proc.stdout
    assert "[mandatory]" not in proc.stdout
    assert "[advisory]  router-autotune-block-unit" in proc.stdout


def test_resources_the_config_gate_cannot_see_are_rejected(project):
    """Extra args and env pass the config gate (it reads typed fields) but not the pack (it reads the args)."""
    root = project.root
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
