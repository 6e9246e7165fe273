"""The Pulumi program: read the `rebel100:` namespace, check it, then build the stack.

Used by `__main__.py` under the real engine and by `python -m stacks render` under the mock runtime.
"""
from __future__ import annotations

import pulumi
import pulumi.runtime.config as runtime_config

from stacks import compose
from core.config import NAMESPACE
from core.gate import ConfigError, load_config, warnings_for
from core.stackfile import program_config


def current_config() -> dict:
    """Every config key of the running stack (`namespace:key` -> text), as the engine passed it and
    `pulumi.Config` resolves it; the offline tools resolve a stack file's values with the same function."""
    return program_config(runtime_config.CONFIG.get())


def main() -> None:
    try:
        cfg = load_config(current_config(), source=f"stack {pulumi.get_stack()!r}")
    except ConfigError as error:
        # Reported before any resource is registered, so nothing is created or changed.
        raise pulumi.RunError(str(error)) from None
    for advice in warnings_for(cfg):
        pulumi.log.warn(str(advice))
    token = pulumi.Config(NAMESPACE).get_secret("hfToken")
    for name, value in compose.build(cfg, hf_token=token).items():
        pulumi.export(name, value)
