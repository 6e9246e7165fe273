"""scripts/pulumi-env, sourced by `python -m stacks up|preview`: the backend it chooses without starting the CLI,
the provider it puts in the plugin cache; and what `python -m stacks up|preview` then does per stack
(stacks/deploy/): the stack it creates only once, the pack level and the passphrase."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from core import stackfile
from core.secrets import BUILTIN_PASSPHRASE
from host import stackenv
from stacks.deploy import cli
from tests.pulumi_project import Project

pytestmark = pytest.mark.e2e


def sourced(project: Project, home: pathlib.Path, script: str = "true", **extra: str) -> dict[str, str]:
    """The environment after `. scripts/pulumi-env` and `script` in a copy of the project, with PULUMI_HOME=home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update(PULUMI_HOME=str(home), **extra)
    proc = subprocess.run(
        ["bash", "-c", f". scripts/pulumi-env && {script} && env -0"],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(item.split("=", 1) for item in proc.stdout.split("\0") if "=" in item)


def test_without_a_login_the_project_file_backend(project, tmp_path):
    env = sourced(project, tmp_path / "home")
    assert env["PULUMI_BACKEND_URL"] == f"file://{project.root / '.pulumi-state'}"


def test_a_login_in_pulumi_home_is_kept(project, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "credentials.json").write_text(
        json.dumps({"current": "s3://team-state?region=eu-west-1", "accessTokens": {}})
    )
    assert "PULUMI_BACKEND_URL" not in sourced(project, home)


def test_the_provider_comes_from_the_plugin_cache(project, toolchain, tmp_path):
    env = sourced(project, tmp_path / "home")
    plugins = list((tmp_path / "home" / "plugins").glob("resource-kubernetes-v*/pulumi-resource-kubernetes"))
    assert (
        len(plugins) == 1 and plugins[0].resolve() == (pathlib.Path(toolchain) / "pulumi-resource-kubernetes").resolve()
    )
    assert env["PULUMI_IGNORE_AMBIENT_PLUGINS"] == "true"
    listed = subprocess.run(["pulumi", "plugin", "ls", "--json"], env=env, capture_output=True, text=True, check=True)
    assert [(p["name"], p["kind"]) for p in json.loads(listed.stdout)] == [("kubernetes", "resource")]


def test_a_stack_is_created_once_then_found_without_the_cli(project, tmp_path, monkeypatch):
    """What scripts/up and scripts/preview select (stacks/deploy/cli.py Workspace.select_stack): a stack is created on
    first use; on the file backend its checkpoint then says it exists without a CLI start."""
    state = tmp_path / "state"
    state.mkdir()
    backend = {"PULUMI_BACKEND_URL": f"file://{state}", "PULUMI_CONFIG_PASSPHRASE": "e2e"}
    for key, value in sourced(project, tmp_path / "home", **backend).items():
        monkeypatch.setenv(key, value)
    cli.Workspace(cli.Cli(tmp_path / "runs"), {}, project.root).select_stack("bench-once")
    assert list(state.glob(".pulumi/stacks/*/bench-once.json"))
    # Found again without the CLI: with `pulumi` unusable the selection still succeeds.
    unusable = cli.Cli(tmp_path / "runs")
    unusable.command = "/bin/false"
    cli.Workspace(unusable, {}, project.root).select_stack("bench-once")


@pytest.mark.parametrize("environment, level", [(None, "prod"), ("dev", "dev"), ("prod", "prod"), ('"dev"', "dev")])
def test_the_pack_level_of_a_stack_is_its_environments_prod_when_unset(project, environment, level):
    """What scripts/up and scripts/preview pass to --policy-pack-config (host/stackenv.py policy_config, on the stack
    file as core.stackfile reads it): an unset environment is prod (the schema's default, what `check` applies),
    not the lower dev level."""
    lines = ["config:", "  rebel100:topology: pd"] + ([f"  rebel100:environment: {environment}"] if environment else [])
    (project.root / "Pulumi.fresh.yaml").write_text("\n".join(lines) + "\n")
    config, _ = stackfile.read_config(project.root / "Pulumi.fresh.yaml", project.root)
    assert stackenv.policy_config(config) == f"policy/config/{level}.json"


def test_sourcing_it_hands_no_stack_a_passphrase(project, tmp_path):
    """The README's secret step sources scripts/pulumi-env, then `pulumi config set --secret`: nothing sourced may
    carry a passphrase written in the repository into that shell."""
    env = sourced(project, tmp_path / "home")
    assert [k for k in env if k.startswith("PULUMI_CONFIG_PASSPHRASE")] == []


@pytest.mark.parametrize("level, builtin", [("policy/config/dev.json", True), ("policy/config/prod.json", False)])
def test_the_builtin_passphrase_is_for_a_dev_stack_only(tmp_path, monkeypatch, level, builtin):
    """What scripts/up and scripts/preview do per stack (host/stackenv.py use_passphrase with the stack's pack
    level): the built-in passphrase for a dev stack, none for prod; a passphrase the caller chose is kept for both."""
    for key in [k for k in os.environ if k.startswith("PULUMI_CONFIG_PASSPHRASE")]:
        monkeypatch.delenv(key)
    stackenv.use_passphrase(level)
    assert os.environ.get("PULUMI_CONFIG_PASSPHRASE") == (BUILTIN_PASSPHRASE if builtin else None)
    assert "PULUMI_CONFIG_PASSPHRASE_FILE" not in os.environ
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    mine = tmp_path / "mine"
    mine.write_text("correct horse battery staple\n")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(mine))
    stackenv.use_passphrase(level)
    assert "PULUMI_CONFIG_PASSPHRASE" not in os.environ and os.environ["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(mine)


def test_a_prod_secret_set_after_sourcing_it_needs_a_passphrase_of_the_users(project, tmp_path):
    """The issue's steps: a prod stack made under the user's own passphrase, then, in a shell that sourced
    scripts/pulumi-env and set none, `pulumi config set --secret`: refused by Pulumi (no passphrase), the stack file
    as it was, the token nowhere in it. With the user's passphrase it is set, as ciphertext."""
    stack, token = "prod-secret", "hf_PLANTEDbyTestPulumiEnv0c9a1e"  # planted
    path = project.root / f"Pulumi.{stack}.yaml"
    path.write_text((project.root / "Pulumi.prod-4p4d.yaml").read_text())
    project.pulumi("stack", "init", stack, "--no-select", check=True)  # PULUMI_CONFIG_PASSPHRASE=e2e: the user's own
    before = path.read_bytes()
    errors = tmp_path / "errors"
    set_secret = f"pulumi config set --secret rebel100:hfToken {token} -s {stack} --non-interactive"
    sourced(project, tmp_path / "home", f"if {set_secret} 2>{errors}; then exit 9; fi")
    assert "passphrase must be set" in errors.read_text(), errors.read_text()
    assert path.read_bytes() == before
    env = sourced(project, tmp_path / "home", set_secret, PULUMI_CONFIG_PASSPHRASE="e2e")
    assert token not in path.read_text() and "secure:" in path.read_text()
    assert env["PULUMI_CONFIG_PASSPHRASE"] == "e2e"
