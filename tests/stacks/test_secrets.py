"""`python -m stacks secrets STACK` and scripts/up as a user runs them: a prod stack under the built-in passphrase,
or none, is refused before anything runs; the dev stacks keep it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core.secrets import BUILTIN_PASSPHRASE
from core.stackfile import PROJECT_ROOT
from tests.prerequisites import require
from tests.pulumi_project import toolchain_dir


def secrets(stack: str, **environ: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    env.update(PULUMI_BACKEND_URL="file:///nonexistent", **environ)
    return subprocess.run(
        [sys.executable, "-m", "stacks", "secrets", stack], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "environ", [{}, {"PULUMI_CONFIG_PASSPHRASE": ""}, {"PULUMI_CONFIG_PASSPHRASE": BUILTIN_PASSPHRASE}]
)
def test_prod_is_refused_in_one_message(environ):
    proc = secrets("prod-4p4d", **environ)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: stack 'prod-4p4d' is a prod stack"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_prod_with_a_passphrase_of_its_own_and_dev_with_the_builtin_one_pass():
    assert secrets("prod-4p4d", PULUMI_CONFIG_PASSPHRASE="correct horse battery staple").returncode == 0
    assert secrets("dev", PULUMI_CONFIG_PASSPHRASE=BUILTIN_PASSPHRASE).returncode == 0


def test_the_secrets_check_does_not_build_the_config_schema():
    """Every scripts/preview and scripts/up runs `python -m stacks secrets` first: it reads the stack file and
    its secrets provider only, without pydantic or the config gate (0.15 s of CPU against 0.6 s with them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    env.update(PULUMI_BACKEND_URL="file:///nonexistent", PULUMI_CONFIG_PASSPHRASE="correct horse battery staple")
    code = (
        "import sys, runpy; sys.argv = ['stacks', 'secrets', 'prod-4p4d']\ntry:\n    runpy.run_module('stacks', "
        "run_name='__main__')\nexcept SystemExit as end:\n    assert not end.code\nprint(sorted(m for m in "
        "sys.modules if m.split('.')[0] in ('pydantic', 'pulumi') or m in ('core.config', 'core.gate')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("script", ["up", "preview"])
@pytest.mark.parametrize(
    "environ, why",
    [
        ({}, "no passphrase is set"),
        ({"PULUMI_CONFIG_PASSPHRASE": BUILTIN_PASSPHRASE}, "the built-in 'rebel100-local' of scripts/pulumi-env"),
    ],
)
def test_scripts_refuse_prod_without_a_passphrase_of_its_own_before_anything(tmp_path, script, environ, why):
    """scripts/pulumi-env hands a prod stack no passphrase (the built-in one is for dev stacks only): scripts/up and
    scripts/preview of prod with none set, or with the built-in one set by hand, stop at once, before the toolchain
    is even asked for a stack (no state, no preflight, no cluster)."""
    require(toolchain_dir(), "no Pulumi toolchain (run `make toolchain`)")  # scripts/up would build it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_CONFIG_PASSPHRASE", "KUBECONFIG"))}
    env.update(PULUMI_BACKEND_URL=f"file://{tmp_path}", PULUMI_HOME=str(tmp_path / "home"), **environ)
    proc = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / script), "prod-4p4d"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: stack 'prod-4p4d' is a prod stack") and why in proc.stderr, proc.stderr
    assert "policy pack level" not in proc.stderr  # stopped before anything else
    assert not list(tmp_path.glob(".pulumi/stacks/**/*.json"))
