"""Secrets with the real engine: a prod stack under a key-management service (Pulumi's awskms:// provider against
moto's KMS on 127.0.0.1), a prod stack refused under the built-in passphrase, and a planted token that must not
appear in plain text in any file, output, plan, check or SARIF of a render-mode stack (tests/cluster/test_faults.py
plants one in a deployed stack, whose state holds it as a secret).
"""

from __future__ import annotations

import base64
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from core.secrets import BUILTIN_PASSPHRASE
from host.ports import any_free_port
from tests.pulumi_project import Project

pytestmark = pytest.mark.e2e

TOKEN = "hf_PLANTEDtokenNotARealOne4c1d7e"  # planted: a test greps for it


@pytest.fixture()
def kms():
    """moto's server on 127.0.0.1 with one KMS key under alias/rebel100-e2e; yields its endpoint."""
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    port = any_free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        client = boto3.client(
            "kms",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        key = client.create_key(Description="rebel100 e2e")["KeyMetadata"]["KeyId"]
        client.create_alias(AliasName="alias/rebel100-e2e", TargetKeyId=key)
        yield endpoint
    finally:
        server.stop()


def without_passphrase(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}


def prod_stack_file(project: Project, stack: str) -> None:
    document = yaml.safe_load((project.root / "Pulumi.prod-4p4d.yaml").read_text())
    (project.root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": document["config"]}))


def test_a_prod_stack_under_aws_kms(project: Project, kms: str):
    """`pulumi stack init --secrets-provider awskms://...`: the token set with `config set --secret` is read back
    through KMS, the stack file holds only ciphertext, and the stack runs with no passphrase at all."""
    stack = "kms"
    prod_stack_file(project, stack)
    project.env = {**without_passphrase(project.env), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    provider = f"awskms://alias/rebel100-e2e?region=us-east-1&endpoint={kms}"
    project.pulumi("stack", "init", stack, "--secrets-provider", provider, check=True)
    project.pulumi("config", "set", "-s", stack, "--secret", "rebel100:hfToken", TOKEN, check=True)
    text = (project.root / f"Pulumi.{stack}.yaml").read_text()
    document = yaml.safe_load(text)
    assert TOKEN not in text
    assert document["secretsprovider"] == provider and document["encryptedkey"]
    assert set(document["config"]["rebel100:hfToken"]) == {"secure"}
    got = project.pulumi("config", "get", "-s", stack, "rebel100:hfToken", check=True)
    assert got.stdout.strip() == TOKEN
    # No passphrase anywhere, and the prod check passes: the secrets are the key-management service's.
    check = subprocess.run(
        [sys.executable, "-m", "stacks", "secrets", stack],
        cwd=project.root,
        env=project.env,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    preview = project.pulumi(
        "preview", "-s", stack, "--policy-pack", "policy", "--policy-pack-config", "policy/config/prod.json"
    )
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-3000:]
    assert TOKEN not in preview.stdout + preview.stderr


def test_a_bare_pulumi_preview_of_prod_under_the_builtin_passphrase_is_refused(project: Project):
    """Past scripts/up and scripts/preview (a user running `pulumi` by hand after `. scripts/pulumi-env`): the
    program refuses before it registers anything."""
    stack = "prod-builtin"
    prod_stack_file(project, stack)
    project.env = {**project.env, "PULUMI_CONFIG_PASSPHRASE": BUILTIN_PASSPHRASE}
    project.select(stack)
    proc = project.pulumi("preview", "-s", stack)
    assert proc.returncode != 0
    assert "is a prod stack (rebel100:environment: prod) whose secrets use the passphrase provider" in proc.stdout
    assert "kubernetes:" not in proc.stdout  # nothing but the root Stack: no resource was registered
    project.pulumi("stack", "rm", stack, "--yes", "--force", check=True)


def test_a_planted_token_appears_only_as_ciphertext(project: Project):
    """The token set with `config set --secret` on a render-mode stack, then `scripts/up`, `plan`, `check`
    (SARIF), the state and every file written: the token is nowhere in plain text."""
    stack = "planted"
    render_dir = f"build/{stack}"
    (project.root / f"Pulumi.{stack}.yaml").write_text(
        (project.root / "Pulumi.dev.yaml").read_text().replace("build/dev", render_dir)
    )
    project.select(stack)
    project.pulumi("config", "set", "-s", stack, "--secret", "rebel100:hfToken", TOKEN, check=True)
    seen = {}
    up = subprocess.run(
        [str(project.root / "scripts" / "up"), stack],
        cwd=project.root,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    seen["scripts/up output"] = up.stdout + up.stderr
    for command in (
        ["plan", stack],
        ["plan", stack, "--json"],
        ["check", stack, "--format", "sarif"],
        ["check", stack, "--format", "json"],
        ["render", stack, "--out", str(project.root / "offline")],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "stacks", *command],
            cwd=project.root,
            env=project.env,
            capture_output=True,
            text=True,
        )
        seen[f"python -m stacks {' '.join(command)}"] = proc.stdout + proc.stderr
    seen["stack output --show-secrets"] = project.pulumi(
        "stack", "output", "-s", stack, "--json", "--show-secrets", check=True
    ).stdout
    for folder, dirs, files in os.walk(project.root):  # not into the linked .venv
        dirs[:] = [d for d in dirs if d != ".venv"]
        for name in files:
            path = pathlib.Path(folder) / name
            seen[str(path.relative_to(project.root))] = path.read_bytes().decode("utf-8", "replace")
    encoded = base64.b64encode(TOKEN.encode()).decode()  # a Secret's `data`: plain text to anyone who reads it
    leaks = sorted(where for where, text in seen.items() if TOKEN in text or encoded in text)
    assert leaks == [], f"the planted token in plain text: {leaks}"
    # The provider writes a Secret's data to the render folder in plain text: a render-mode stack renders none.
    assert "the Secret hf-token is not rendered" in up.stdout, up.stdout[-3000:]
    assert not list((project.root / render_dir).rglob("v1-secret-*hf-token.yaml"))
    project.pulumi("destroy", "-s", stack, "--yes", check=True)
