"""Which secrets provider may hold a stack's secrets: a prod stack never under a passphrase written in the project.

`python -m stacks preview|up` set the passphrase `rebel100-local` for a dev stack when the caller set none
(host/stackenv.py `use_passphrase`), so that the dev and render stacks work on a fresh clone. Anyone with the
repository has that passphrase, so a secret encrypted under it (a Hugging Face token set with `pulumi config set
--secret`) is as good as plain text in `Pulumi.STACK.yaml`. A prod stack (`rebel100:environment: prod`) therefore runs
only with a passphrase of its own, or with a key-management service (`secretsprovider: awskms://...` and the like in
its stack file). Pure: the caller passes the stack file's values and the environment (host/stackenv.py for
`python -m stacks secrets|preview|up`, the program itself for a bare `pulumi up`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

BUILTIN_PASSPHRASE = "rebel100-local"  # a dev stack's when the caller sets none (host/stackenv.py use_passphrase)
# Backends whose stacks use the passphrase provider when the stack file names no other (Pulumi Cloud does not).
SELF_MANAGED_BACKENDS = ("file://", "s3://", "gs://", "azblob://", "postgres://")
FIX = (
    "Set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) to your team's passphrase, kept out of "
    "the repository, or move the stack to a key-management service: `pulumi stack change-secrets-provider -s "
    "{stack} awskms://alias/NAME?region=REGION` (docs/recovery.md, Secrets)."
)


def uses_passphrase(secrets_provider: str | None, backend_url: str | None) -> bool:
    """True when Pulumi encrypts the stack's secrets with a passphrase: the stack file says so, or names no
    provider on a self-managed backend (file, S3, ...; the project's default is the file backend)."""
    if secrets_provider:
        return secrets_provider == "passphrase"
    return not backend_url or backend_url.startswith(SELF_MANAGED_BACKENDS)


def backend_url(environ: Mapping[str, str]) -> str | None:
    """The backend the CLI would use: PULUMI_BACKEND_URL, else the current `pulumi login` of PULUMI_HOME."""
    if environ.get("PULUMI_BACKEND_URL"):
        return environ["PULUMI_BACKEND_URL"]
    home = environ.get("PULUMI_HOME") or os.path.join(environ.get("HOME", ""), ".pulumi")
    try:
        with open(os.path.join(home, "credentials.json"), encoding="utf-8") as handle:
            current = json.load(handle).get("current")
    except (OSError, ValueError, AttributeError):
        return None
    return current if isinstance(current, str) and current else None


def passphrase_of(environ: Mapping[str, str]) -> str | None:
    """The passphrase Pulumi would use (PULUMI_CONFIG_PASSPHRASE, else the first line of
    PULUMI_CONFIG_PASSPHRASE_FILE), or None when neither is set or the file cannot be read."""
    if "PULUMI_CONFIG_PASSPHRASE" in environ:
        return environ["PULUMI_CONFIG_PASSPHRASE"]
    path = environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def refusal_for(stack: str, environment: str, secrets_provider: str | None, environ: Mapping[str, str]) -> str | None:
    """prod_secrets_refusal with the backend and passphrase read from the environment."""
    return prod_secrets_refusal(stack, environment, secrets_provider, backend_url(environ), passphrase_of(environ))


def prod_secrets_refusal(
    stack: str, environment: str, secrets_provider: str | None, backend_url: str | None, passphrase: str | None
) -> str | None:
    """None when the stack's secrets are safe to write, else one sentence: what, why, and the fix."""
    if environment != "prod" or not uses_passphrase(secrets_provider, backend_url):
        return None
    if passphrase is None:
        why = "no passphrase is set (PULUMI_CONFIG_PASSPHRASE, PULUMI_CONFIG_PASSPHRASE_FILE)"
    elif passphrase == "":
        why = "the passphrase is empty"
    elif passphrase == BUILTIN_PASSPHRASE:
        why = (
            f"the passphrase is the built-in {BUILTIN_PASSPHRASE!r} of scripts/pulumi-env, which anyone with "
            f"the repository has: a secret set under it is readable by all of them"
        )
    else:
        return None
    return (
        f"stack {stack!r} is a prod stack (rebel100:environment: prod) whose secrets use the passphrase "
        f"provider, and {why}. Nothing was changed. " + FIX.format(stack=stack)
    )
