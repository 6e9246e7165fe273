"""core/secrets.py: a prod stack's secrets never under the passphrase written in the project, or under none."""

from __future__ import annotations

import json

import pytest

from core.secrets import BUILTIN_PASSPHRASE, backend_url, passphrase_of, prod_secrets_refusal, uses_passphrase

FILE = "file:///tmp/state"


@pytest.mark.parametrize(
    "passphrase, why",
    [
        (None, "no passphrase is set"),
        ("", "the passphrase is empty"),
        (BUILTIN_PASSPHRASE, "the built-in 'rebel100-local'"),
    ],
)
def test_prod_under_the_builtin_passphrase_or_none_is_refused(passphrase, why):
    refusal = prod_secrets_refusal("prod-4p4d", "prod", None, FILE, passphrase)
    assert refusal is not None and why in refusal
    assert "stack 'prod-4p4d' is a prod stack" in refusal and "Nothing was changed" in refusal
    assert "pulumi stack change-secrets-provider -s prod-4p4d awskms://" in refusal  # the way forward


def test_prod_with_its_own_passphrase_or_a_kms_is_accepted():
    assert prod_secrets_refusal("prod-4p4d", "prod", None, FILE, "a team passphrase") is None
    assert prod_secrets_refusal("prod-4p4d", "prod", "awskms://alias/x?region=eu-west-1", FILE, None) is None
    assert prod_secrets_refusal("prod-4p4d", "prod", "awskms://alias/x", FILE, BUILTIN_PASSPHRASE) is None


def test_dev_stacks_keep_the_builtin_passphrase():
    assert prod_secrets_refusal("dev", "dev", None, FILE, BUILTIN_PASSPHRASE) is None
    assert prod_secrets_refusal("dev", "dev", None, FILE, None) is None


def test_the_passphrase_provider_is_the_default_of_self_managed_backends_only():
    assert uses_passphrase(None, "s3://bucket?region=eu-west-1")
    assert uses_passphrase(None, None)  # the project's default: the file backend
    assert uses_passphrase("passphrase", "https://api.pulumi.com")
    assert not uses_passphrase(None, "https://api.pulumi.com")  # Pulumi Cloud encrypts with its own keys
    assert prod_secrets_refusal("prod", "prod", None, "https://api.pulumi.com", None) is None


def test_the_passphrase_and_backend_are_read_as_pulumi_reads_them(tmp_path):
    assert passphrase_of({}) is None
    assert passphrase_of({"PULUMI_CONFIG_PASSPHRASE": ""}) == ""
    secret = tmp_path / "passphrase"
    secret.write_text(BUILTIN_PASSPHRASE + "\n")
    assert passphrase_of({"PULUMI_CONFIG_PASSPHRASE_FILE": str(secret)}) == BUILTIN_PASSPHRASE
    assert passphrase_of({"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "missing")}) is None
    (tmp_path / "credentials.json").write_text(json.dumps({"current": "s3://team-state"}))
    assert backend_url({"PULUMI_HOME": str(tmp_path)}) == "s3://team-state"
    assert backend_url({"PULUMI_HOME": str(tmp_path), "PULUMI_BACKEND_URL": FILE}) == FILE
    assert backend_url({"PULUMI_HOME": str(tmp_path / "none")}) is None


def test_a_secret_in_plain_text_is_refused_at_its_key_first_with_the_command_that_stores_it():
    from core.gate import ConfigError, load_config
    from tests.conftest import stack_config

    with pytest.raises(ConfigError) as refused:
        load_config(stack_config("dev", prefill={"replicas": -1}), plain_secrets=["rebel100:hfToken"])
    first = refused.value.issues[0]
    assert (first.path, first.message) == (
        "rebel100:hfToken",
        "rebel100:hfToken is a secret but the stack file holds it in plain text (not `secure:`): anyone who can read "
        "the file or its history has it, and it would be deployed as it is. Delete the line, store the value "
        "encrypted with `pulumi config set --secret rebel100:hfToken <value>` (`-s STACK`), and revoke the exposed "
        "one (the value is not shown here).",
    )
