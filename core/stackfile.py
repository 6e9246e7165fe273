"""Read `Pulumi.<stack>.yaml` the way the engine passes it to the program: `namespace:key` -> text.

Whatever the file holds, reading it either succeeds or raises `StackFileError` with one line that
names the file and what is wrong with it: no traceback reaches a user for a malformed stack file.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any

import yaml

from core.config import StackConfig
from core.gate import load_config

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
# Stands in for secret values offline: the tools never decrypt anything.
SECRET_PLACEHOLDER = "[secret]"


class StackFileError(ValueError):
    """A stack file that cannot be read as Pulumi stack configuration."""


def stack_file(stack: str) -> pathlib.Path:
    return PROJECT_ROOT / f"Pulumi.{stack}.yaml"


def available_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in PROJECT_ROOT.glob("Pulumi.*.yaml"))


def _as_text(value: Any) -> str:
    """Objects and lists as JSON, scalars as the engine prints them (true/false, numbers as written)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _document(path: pathlib.Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StackFileError(f"{path}: no such stack file (stacks here: {', '.join(available_stacks())})") from None
    except UnicodeDecodeError as error:
        raise StackFileError(f"{path}: not a UTF-8 text file (byte {error.start}); a stack file is YAML") from None
    except OSError as error:
        raise StackFileError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise StackFileError(f"{path}: {where}YAML syntax error: {problem}") from None


def read_config(path: pathlib.Path) -> tuple[dict[str, str], list[str]]:
    """(config map, secret keys) of one stack file; `secure:` values become SECRET_PLACEHOLDER."""
    document = _document(path)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise StackFileError(f"{path}: expected a mapping with a `config:` key, got a YAML {type(document).__name__}")
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"{path}: `config:` must be a mapping of `namespace:key: value`, got a YAML "
                             f"{type(config).__name__}")
    values: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in config.items():
        key = str(key)
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[key] = SECRET_PLACEHOLDER
            secrets.append(key)
        else:
            values[key] = _as_text(value)
    return values, secrets


def load_stack(path: pathlib.Path, name: str) -> StackConfig:
    """Read and check one stack file: StackFileError or ConfigError, else the typed config."""
    config, _ = read_config(path)
    return load_config(config, source=f"stack {name!r}")
