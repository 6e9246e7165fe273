"""`vllm serve`'s arguments as vLLM itself defines them, and a check of an argv against them in vLLM's own words.

The data (data/vllm-<version>-serve.json) is every option of the `vllm serve` parser, dumped from vLLM's own argparse
parser by scripts/consumer_facts.py at the vLLM version the target vllm-rbln builds on (core.versions.engine). Here
an argparse parser is rebuilt from it, and an argv is read the way vLLM's FlexibleArgumentParser reads it (`--x_y` is
`--x-y`, `--json-arg.key value` sets one key of a JSON flag): an option the parser does not know is "unrecognized
arguments", a value outside an option's choices "invalid choice", as `vllm serve` would exit with them. Option
values of vLLM's own types (JSON, human-readable ints) are not converted here; the real parser run
(`make consumers-vllm`) covers them.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import re
from typing import Any, NoReturn

from core.versions import engine as engine_versions

VLLM_VERSION = str(engine_versions.target_release().vllm)
DATA = pathlib.Path(__file__).resolve().parent / "data" / f"vllm-{VLLM_VERSION}-serve.json"
_PLAIN_TYPES = {"int": int, "float": float, "str": str}
_STORE_ACTIONS = {"_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false", "_CountAction": "count"}


class Refused(Exception):
    """What `vllm serve`'s parser would print before exiting with status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits; the gates want the sentence
        raise Refused(message)


@functools.cache
def facts() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


# argparse actions whose options take no value.
_VALUELESS = ("BooleanOptionalAction", "_StoreConstAction", "_AppendConstAction", *_STORE_ACTIONS)


@functools.cache
def boolean_flags() -> frozenset[str]:
    """Every option of `vllm serve` that takes no value (both spellings of a `--x` / `--no-x` pair, short aliases
    too), read from the parser data: a reader of a command line needs them to tell `--enforce-eager MODEL` from a
    flag and its value."""
    return frozenset(o for action in facts()["actions"] if action["action"] in _VALUELESS for o in action["options"])


def _add(parser: argparse.ArgumentParser, action: dict[str, Any]) -> None:
    options, kind = action["options"], action["action"]
    if kind in ("_HelpAction", "_VersionAction", "_SubParsersAction"):
        return
    if not options:  # the positional model tag
        parser.add_argument(action["dest"], nargs=action["nargs"])
        return
    kwargs: dict[str, Any] = {"dest": action["dest"]}
    if kind == "BooleanOptionalAction":
        positive = [o for o in options if not o.startswith("--no-")]
        parser.add_argument(*positive, action=argparse.BooleanOptionalAction, **kwargs)
        return
    if kind in _STORE_ACTIONS:
        parser.add_argument(*options, action=_STORE_ACTIONS[kind], **kwargs)
        return
    if kind in ("_StoreConstAction", "_AppendConstAction"):
        parser.add_argument(*options, action="store_const", const=True, **kwargs)
        return
    if action["nargs"] is not None:
        kwargs["nargs"] = action["nargs"]
    if kind == "_AppendAction":
        kwargs["action"] = "append"
    plain = _PLAIN_TYPES.get(action["type"] or "str")
    if plain is not None:
        kwargs["type"] = plain
    if action["choices"] is not None:
        kwargs["choices"] = action["choices"]
    parser.add_argument(*options, **kwargs)


@functools.cache
def parser() -> argparse.ArgumentParser:
    data = facts()
    built = _Parser(
        prog="vllm serve", allow_abbrev=data["allow_abbrev"], prefix_chars=data["prefix_chars"], add_help=False
    )
    for action in data["actions"]:
        _add(built, action)
    return built


_OPTION_NAME = re.compile(r"(?<=--)[^.]*")


def normalize(argv: list[str]) -> list[str]:
    """FlexibleArgumentParser's reading: `_` in option names is `-`; `--json-arg.key value` (or `=value`) sets a key
    of `--json-arg`, so only `--json-arg` must be an option; `-O3` is `--optimization-level 3`."""
    out: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            name = _OPTION_NAME.sub(lambda m: m.group(0).replace("_", "-"), name, count=1)
            if "." in name:
                base = name.split(".", 1)[0].rstrip("+")
                out += [base, value if eq else "{}"]
                skip = not eq
                continue
            out.append(f"{name}={value}" if eq else name)
        elif token.startswith("-O") and token != "-O":
            out += ["--optimization-level", token[3:] if token[2:3] == "=" else token[2:]]
        else:
            out.append(token)
    return out


@dataclasses.dataclass(frozen=True)
class Verdict:
    """vLLM's message and the argv tokens it is about (the unrecognized ones; empty for a value error)."""

    message: str
    tokens: tuple[str, ...]


def judge(argv: list[str]) -> Verdict | None:
    """None when `vllm serve ARGV` parses, else vLLM's own error (`unrecognized arguments: --foo`)."""
    return _judge(tuple(argv))


# The pack judges every engine Deployment's line, most of them alike (256 at 256 pools): each distinct one once.
@functools.lru_cache(maxsize=1024)
def _judge(argv: tuple[str, ...]) -> Verdict | None:
    processed = normalize(list(argv))
    try:
        _, unknown = parser().parse_known_args(processed)
    except Refused as refused:
        return Verdict(str(refused), ())
    if unknown:
        return Verdict(f"unrecognized arguments: {' '.join(unknown)}", tuple(unknown))
    return None


def judges(image: str) -> bool:
    """The data describes the vLLM of the target vllm-rbln release only: another release's vLLM (even a patch release,
    0.10.2 and 0.10.3 differ) may have other flags, so its args are not judged here."""
    from core.versions import image_version

    return engine_versions.is_engine_image(image) and image_version(image) == engine_versions.TARGET


def refusal(verdict: Verdict) -> str:
    return (
        f"`vllm serve` of vLLM {VLLM_VERSION} (the vLLM of vllm-rbln {engine_versions.TARGET}) exits with "
        f'"{verdict.message}" before the engine starts, so the pod crash-loops. Remove the entry, or spell it as '
        f"`vllm serve --help` of that version does."
    )


def where(verdict: Verdict, extra_args: list[str]) -> list[int]:
    """Positions in a role's extraArgs of the tokens a verdict is about (the generated args are vLLM's already)."""
    if verdict.tokens:
        return [
            i
            for i, token in enumerate(extra_args)
            if token in verdict.tokens or normalize([token])[0] in verdict.tokens
        ]
    named = re.search(r"argument (\S+?)(?:/\S+)?:", verdict.message)
    flag = named.group(1) if named else None
    return [i for i, token in enumerate(extra_args) if flag and normalize([token])[0].split("=", 1)[0] == flag][:1]
