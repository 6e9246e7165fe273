"""Command lines read as their programs read them: `--flag value`, `--flag=value` and bare boolean flags (argparse's
way), Go's single-dash long flags (`-vllm-port=8200`, the flag package's way) and its duration values (`30s`), and
positionals. What the policy pack reads of a container's argv (policy/read/flags.py: vLLM's) and the local site of the
programs it runs."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

FlagValue = str | bool
Number = TypeVar("Number", int, float)


@dataclasses.dataclass(frozen=True)
class Flags:
    """A parsed command line: `--flag value`, `--flag=value` and bare boolean flags, plus positionals.

    A flag given twice keeps its last value, as argparse and Go's flag package do.
    """

    values: Mapping[str, FlagValue]  # read-only: one parse is shared by every reader of the same line
    positionals: tuple[str, ...]

    def get(self, flag: str) -> FlagValue | None:
        return self.values.get(flag)

    def has(self, flag: str) -> bool:
        value = self.values.get(flag)
        return value is True or (isinstance(value, str) and value.lower() not in ("false", "0"))

    def text(self, flag: str) -> str | None:
        value = self.values.get(flag)
        return value if isinstance(value, str) else None

    def integer(self, flag: str, default: int | None = None) -> int | None:
        """The flag as an int; `default` when absent; None when present but not an integer."""
        return self._as(int, flag, default)

    def number(self, flag: str, default: float | None = None) -> float | None:
        return self._as(float, flag, default)

    def _as(self, kind: Callable[[str], Number], flag: str, default: Number | None) -> Number | None:
        value = self.values.get(flag)
        if value is None:
            return default
        try:
            return kind(str(value))
        except ValueError:
            return None

    def json(self, flag: str) -> Any:
        """A JSON-valued flag (`--speculative-config`, `--kv-transfer-config`); None when absent or not JSON."""
        value = self.text(flag)
        if value is None:
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None


def parse_flags(
    argv: Iterable[str],
    *,
    boolean: frozenset[str] = frozenset(),
    aliases: Mapping[str, str] | None = None,
    go_style: bool = False,
) -> Flags:
    """Parse a command line. `go_style` accepts Go's single-dash long flags (`-vllm-port=8200`)."""
    return _parse(tuple(str(t) for t in argv), frozenset(boolean), tuple(sorted((aliases or {}).items())), go_style)


# The pack's rules read the same engine lines over and over (at 256 pools, 31 stack policies over 256 engine
# templates, most of them alike): each distinct line is parsed once.
@functools.lru_cache(maxsize=4096)
def _parse(
    tokens: tuple[str, ...], boolean: frozenset[str], alias_items: tuple[tuple[str, str], ...], go_style: bool
) -> Flags:
    aliases = dict(alias_items)
    values: dict[str, FlagValue] = {}
    positionals: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-") or token == "-" or _is_number(token):
            positionals.append(token)
            continue
        name, has_value, value = token.partition("=")
        name = aliases.get(name, name)
        if go_style and not name.startswith("--"):
            name = "-" + name
        if name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        if has_value:
            values[name] = value
        elif (
            name in boolean or index >= len(tokens) or (tokens[index].startswith("-") and not _is_number(tokens[index]))
        ):
            values[name] = True
        else:
            values[name] = tokens[index]
            index += 1
    return Flags(values=types.MappingProxyType(values), positionals=tuple(positionals))


def _is_number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


# What Go's strconv.ParseBool reads as true: a Go program's boolean flag given a value (`--flag=T`).
_GO_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})


def go_true(text: str) -> bool:
    """A Go boolean flag's value is true, as strconv.ParseBool reads it."""
    return text in _GO_TRUE


def go_flag_on(flags: Flags, flag: str) -> bool:
    """A Go boolean flag is on: given alone, or with a value Go reads as true (parse `flag` as boolean)."""
    value = flags.get(flag)
    return value is True or (isinstance(value, str) and go_true(value))


# Go's time.ParseDuration (a Go program's duration flag, `--drain-timeout=30s`): a sign, then decimal numbers, each
# with a unit; "0" alone is allowed. In seconds.
_GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def go_duration_seconds(text: str) -> float | None:
    """A Go duration (`30s`, `1m30s`, `1.5h`, `0`) in seconds; None for text Go would refuse."""
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    if not body:
        return None
    total, position = 0.0, 0
    for match in _GO_DURATION_PART.finditer(body):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _GO_DURATION_UNITS[match.group(2)]
        position = match.end()
    return sign * total if position == len(body) else None
