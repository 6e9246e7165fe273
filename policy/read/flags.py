"""Reading command lines: `--flag value`, `--flag=value` and bare boolean flags (vLLM's from its parser data), the
`vllm serve` argv of a container.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Iterable
from typing import Any

from core.versions import vllm_args

# --- command lines -------------------------------------------------------------------------

# vLLM flags that take no value: needed so that `--enable-prefix-caching MODEL` reads MODEL as the
# positional model, not as the flag's value. Those of the vLLM the target image builds on come from its committed
# parser data (core/versions/vllm_args.py); older releases' flags a foreign manifest may still pass are added here.
# Unknown bare flags are recognised by what follows them.
VLLM_RETIRED_BOOLEAN_FLAGS = frozenset({"--disable-log-requests", "--api-server-count-auto"})
VLLM_BOOLEAN_FLAGS = vllm_args.boolean_flags() | VLLM_RETIRED_BOOLEAN_FLAGS
# vLLM's short aliases.
VLLM_ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dpr": "--data-parallel-rank",
    "-ep": "--enable-expert-parallel",
    "-q": "--quantization",
}

FlagValue = str | bool


@dataclasses.dataclass(frozen=True)
class Flags:
    """A parsed command line: `--flag value`, `--flag=value` and bare boolean flags, plus positionals.

    A flag given twice keeps its last value, as argparse and Go's flag package do.
    """

    values: dict[str, FlagValue]
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
        value = self.values.get(flag)
        if value is None:
            return default
        try:
            return int(str(value))
        except ValueError:
            return None

    def number(self, flag: str, default: float | None = None) -> float | None:
        value = self.values.get(flag)
        if value is None:
            return default
        try:
            return float(str(value))
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
    argv: Iterable[str], *, boolean: frozenset = frozenset(), aliases: dict | None = None, go_style: bool = False
) -> Flags:
    """Parse a command line. `go_style` accepts Go's single-dash long flags (`-vllm-port=8200`)."""
    aliases = aliases or {}
    values: dict[str, FlagValue] = {}
    positionals: list[str] = []
    tokens = [str(t) for t in argv]
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
    return Flags(values=values, positionals=tuple(positionals))


def _is_number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def command_line(container: dict) -> list[str]:
    """command + args; a shell form (`sh -c "vllm serve ..."`) is split into words."""
    words = [str(w) for w in (container.get("command") or [])] + [str(w) for w in (container.get("args") or [])]
    expanded: list[str] = []
    for word in words:
        if " " in word and ("vllm serve" in word or "vllm\tserve" in word):
            try:
                expanded.extend(shlex.split(word))
                continue
            except ValueError:
                pass
        expanded.append(word)
    return expanded


VLLM_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def serve_argv(container: dict) -> list[str] | None:
    """The arguments after `vllm serve` (or `python -m vllm.entrypoints.openai.api_server`, which takes the same
    arguments), or None when the container runs neither. An engine started by its image's entrypoint (args
    only) is not recognised: what the entrypoint runs is not in the manifest."""
    words = command_line(container)
    for index in range(len(words) - 1):
        if (words[index] == "vllm" or words[index].endswith("/vllm")) and words[index + 1] == "serve":
            return words[index + 2 :]
        if words[index] == "-m" and words[index + 1] == VLLM_API_SERVER_MODULE:
            return words[index + 2 :]
    return None
