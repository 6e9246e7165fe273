"""The Pulumi program: read the `rebel100:` namespace, check it, then build the stack.

Used by `__main__.py` under the real engine and by `python -m stacks render` under the mock runtime.
"""

from __future__ import annotations

import os
import pathlib

import pulumi
import pulumi.runtime.config as runtime_config

from core import stackfile
from core.config import NAMESPACE
from core.gate import ConfigError, load_config, warnings_for
from core.keys import plain_secret_keys
from core.labels import epp_name
from core.secrets import refusal_for
from core.stackfile import program_config
from objects.stack import hf_token_withheld
from stacks import compose
from stacks.certificate import self_signed


def current_config() -> dict:
    """Every config key of the running stack (`namespace:key` -> text), as the engine passed it and
    `pulumi.Config` resolves it; the offline tools resolve a stack file's values with the same function."""
    return program_config(runtime_config.CONFIG.get())


def refuse_unsafe_secrets() -> None:
    """Under the real engine: a bare `pulumi up` of a prod stack under the built-in passphrase (or none) stops
    here, before any resource is registered, as `scripts/up` does before it starts (core/secrets.py)."""
    stack = pulumi.get_stack()
    path = pathlib.Path.cwd() / f"Pulumi.{stack}.yaml"
    provider = stackfile.secrets_provider(path) if path.exists() else None
    refusal = refusal_for(stack, stackfile.environment(current_config()), provider, os.environ)
    if refusal:
        raise pulumi.RunError(refusal)


def main() -> None:
    try:
        # Judged on what the engine passed (the stack file), as `secure:` or not; never on the environment.
        plain = plain_secret_keys(runtime_config.CONFIG.get(), runtime_config.is_config_secret)
        cfg = load_config(current_config(), source=f"stack {pulumi.get_stack()!r}", plain_secrets=plain)
    except ConfigError as error:
        # Reported before any resource is registered, so nothing is created or changed.
        raise pulumi.RunError(str(error)) from None
    for advice in warnings_for(cfg):
        pulumi.log.warn(str(advice))
    token = pulumi.Config(NAMESPACE).get_secret("hfToken")
    withheld = hf_token_withheld(cfg, pulumi.get_stack()) if token is not None else None
    if withheld:
        pulumi.log.warn(withheld)
        token = None
    certificate = None
    if cfg.router.certificate == "stack":
        certificate = self_signed(epp_name(cfg.name), cfg.namespace)
    for name, value in compose.build(cfg, hf_token=token, epp_certificate=certificate).items():
        pulumi.export(name, value)
