"""Read `Pulumi.<stack>.yaml` the way the engine passes it to the program: `namespace:key` -> text."""
from __future__ import annotations

import json
import pathlib
from typing import Any

import yaml

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
# Stands in for secret values offline: the tools never decrypt anything.
SECRET_PLACEHOLDER = "[secret]"


def stack_file(stack: str) -> pathlib.Path:
    return PROJECT_ROOT / f"Pulumi.{stack}.yaml"


def available_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in PROJECT_ROOT.glob("Pulumi.*.yaml"))


def _as_text(value: Any) -> str:
    """Objects and lists as JSON, scalars as the engine prints them (true/false, numbers as written)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def read_config(path: pathlib.Path) -> tuple[dict[str, str], list[str]]:
    """(config map, secret keys) of one stack file; `secure:` values become SECRET_PLACEHOLDER."""
    document = yaml.safe_load(path.read_text()) or {}
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a mapping with a `config:` key, got {type(document).__name__}.")
    config = document.get("config") or {}
    values: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[key] = SECRET_PLACEHOLDER
            secrets.append(key)
        else:
            values[key] = _as_text(value)
    return values, secrets
