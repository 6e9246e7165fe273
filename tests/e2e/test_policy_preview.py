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
    assert "[advisory]" not in proc.stdout  # the render's router: autoTune false, the engines' 4096-token block


def test_overrides_are_judged_at_their_key_path(project):
    """Extra args, env and LMCache keys that redefine generated ones are refused by the config gate inside
    the real engine, each at its key path; the pack judges the same values on anything past it."""
    root = project.root
    path = root / "Pulumi.pp-dp.yaml"
    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack.pop("encryptionsalt", None)
    stack["config"]["rebel100:prefill"] = {
        "replicas": 1,
        "extraArgs": ["--data-parallel-size=2"],
        "extraEnv": {"HF_TOKEN": "hf_literal"},
    }
    stack["config"]["rebel100:kvTier"] = {"extraConfig": {"rds_max_chunks": 4000}}
    path.write_text(yaml.safe_dump(stack))
    proc = preview(project, "pp-dp")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    for key in (
        "rebel100:prefill.extraArgs[0]",
        "rebel100:prefill.extraEnv.HF_TOKEN",
        "rebel100:kvTier.extraConfig.rds_max_chunks",
    ):
        assert key in out, out
    assert "hf_literal" not in out
