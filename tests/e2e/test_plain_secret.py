"""The real engine: a stack file holding `rebel100:hfToken` in plain text (not `secure:`) is refused by the program
during `pulumi preview`, at the key, with the `pulumi config set --secret` command, and the token is in no output;
nothing but the root Stack is registered."""

from __future__ import annotations

import pytest
import yaml

from tests.pulumi_project import Project

pytestmark = pytest.mark.e2e

TOKEN = "hf_PLAINtextTokenNotARealOne9f2e"  # planted: the output is searched for it


def test_a_plain_token_in_the_stack_file_is_refused_by_the_preview(project: Project):
    stack = "plain"
    document = yaml.safe_load((project.root / "Pulumi.dev.yaml").read_text())
    document["config"]["rebel100:renderDirectory"] = f"build/{stack}"
    document["config"]["rebel100:hfToken"] = TOKEN
    (project.root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": document["config"]}))
    project.select(stack)
    proc = project.pulumi(
        "preview", "-s", stack, "--policy-pack", "policy", "--policy-pack-config", "policy/config/dev.json"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert "rebel100:hfToken is a secret but the stack file holds it in plain text" in output, output[-3000:]
    assert "pulumi config set --secret rebel100:hfToken <value>" in output
    assert TOKEN not in output
    assert "kubernetes:" not in proc.stdout  # nothing but the root Stack: no resource was registered
    project.pulumi("stack", "rm", stack, "--yes", "--force", check=True)
