"""A secret key (core.keys.SECRET_KEYS: `rebel100:hfToken`) written in plain text in a stack file is refused by the
gate that `check`, `render` and `plan` run and by the program itself (the preview), at its key, with the
`pulumi config set --secret` command; the value is in no output. The same key written `secure:` passes.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from core.gate import ConfigError, load_config
from core.keys import plain_secret_keys
from core.stackfile import PROJECT_ROOT, load_stack
from tests.conftest import stack_config

TOKEN = "hf_PLAINtextTokenNotARealOne9f2e"  # planted: every output is searched for it
KEY = "rebel100:hfToken"
COMMAND = f"pulumi config set --secret {KEY} <value>"


def stack_file(tmp_path: pathlib.Path, token_entry) -> pathlib.Path:
    """Pulumi.dev.yaml with `rebel100:hfToken` set to `token_entry` (a plain string, or {secure: ...})."""
    document = yaml.safe_load((PROJECT_ROOT / "Pulumi.dev.yaml").read_text())
    document["config"][KEY] = token_entry
    path = tmp_path / "Pulumi.plain.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(
    "written, secure, plain",
    [
        ({KEY: TOKEN}, set(), [KEY]),
        ({KEY: TOKEN}, {KEY}, []),
        ({KEY: ""}, set(), [KEY]),  # an empty plain value is still not a secret
        ({"rebel100:hfTokenSecret": "hf-token"}, set(), []),  # the Secret's name is no secret
        ({"other:hfToken": TOKEN}, set(), []),  # another namespace's key is not the schema's
        ({}, set(), []),
    ],
)
def test_plain_secret_keys(written, secure, plain):
    assert plain_secret_keys(written, secure.__contains__) == plain


def test_the_gate_refuses_a_plain_secret_at_its_key_with_the_command_and_without_the_value():
    with pytest.raises(ConfigError) as info:
        load_config({**stack_config("dev"), KEY: TOKEN}, source="stack 'dev'", plain_secrets=[KEY])
    (issue,) = info.value.issues
    assert issue.path == KEY
    assert "holds it in plain text (not `secure:`)" in issue.message and COMMAND in issue.message
    assert TOKEN not in str(info.value)


def test_a_plain_secret_is_reported_with_the_other_problems():
    with pytest.raises(ConfigError) as info:
        load_config({**stack_config("dev", decode={"maxNumSeqs": 0}), KEY: TOKEN}, plain_secrets=[KEY])
    assert [issue.path for issue in info.value.issues] == [KEY, "rebel100:decode.maxNumSeqs"]
    assert TOKEN not in str(info.value)


def test_read_from_a_stack_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_stack(stack_file(tmp_path, TOKEN), "plain")
    assert [issue.path for issue in info.value.issues] == [KEY] and TOKEN not in str(info.value)
    # `secure:` (ciphertext the offline tools never decrypt) passes.
    assert load_stack(stack_file(tmp_path, {"secure": "v1:AAAA"}), "secure").environment == "dev"


@pytest.mark.parametrize(
    "command",
    [
        ["check"],
        ["render", "--out", "{out}"],
        ["plan"],
        ["plan", "--json"],
        ["check", "--format", "sarif"],
        ["check", "--format", "json"],
    ],
)
def test_the_offline_tools_refuse_it_and_print_no_value(tmp_path, command):
    path = stack_file(tmp_path, TOKEN)
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in command]
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", *argv, "--config-file", str(path)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-2000:]
    assert f"{KEY}: {KEY} is a secret but the stack file holds it in plain text" in output and COMMAND in output
    assert TOKEN not in output
    assert not (tmp_path / "out").exists() or TOKEN not in "".join(
        p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file()
    )


# Run in a process of its own: a program that raises mid-run leaves the SDK's process-wide runtime state behind, which
# a later mock run in the same process would inherit.
PROGRAM = """
import json, sys
import pulumi
from core.stackfile import PROJECT_ROOT, SECRET_PLACEHOLDER, read_config
from stacks import program
from stacks.mocks import run_under_mocks
token, secret = sys.argv[1], sys.argv[2] == "secret"
config, _ = read_config(PROJECT_ROOT / "Pulumi.dev.yaml")
config["rebel100:hfToken"] = SECRET_PLACEHOLDER if secret else token
try:
    rendered = run_under_mocks(program.main, config, ["rebel100:hfToken"] if secret else [], "dev")
except Exception as error:
    while not isinstance(error, pulumi.RunError) and (error.__cause__ or error.__context__):
        error = error.__cause__ or error.__context__
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
else:
    print(json.dumps({"objects": len(rendered.manifests)}))
"""


@pytest.mark.parametrize("secret", [False, True], ids=["plain", "secure"])
def test_the_program_refuses_it_before_registering_anything(secret):
    """stacks.program.main under Pulumi's mock runtime, given the config and secret keys the engine would pass: a
    plain token is refused as `pulumi preview` refuses it (tests/e2e/test_plain_secret.py); as a secret key it is
    deployed."""
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, TOKEN, "secret" if secret else "plain"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert TOKEN not in proc.stdout + proc.stderr
    if secret:
        assert outcome["objects"] > 0, outcome
    else:
        assert outcome["error"] == "RunError", outcome
        assert f"{KEY}: {KEY} is a secret but the stack file holds it in plain text" in outcome["message"]
        assert COMMAND in outcome["message"]
