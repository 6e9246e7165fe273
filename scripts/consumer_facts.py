"""Dump what a consumer program itself says it accepts, as the JSON data core/versions reads.

Run by the interpreter of the cache that holds the program (scripts/consumers-engine), never by the project's
venv, and with no project import: the facts come from the program alone.

    python scripts/consumer_facts.py lmcache      # lmcache's config keys (lmcache/v1/config.py) and LMCACHE_* names
    python scripts/consumer_facts.py vllm-serve   # every option of `vllm serve`, from vLLM's own argparse parser

`make consumer-facts` regenerates the committed files (core/versions/data/) this way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import re
import sys
from importlib.metadata import version


def lmcache_facts() -> dict:
    import lmcache
    from lmcache.v1 import config

    package = pathlib.Path(lmcache.__file__).parent
    literal = set()
    for path in sorted(package.rglob("*.py")):
        literal.update(re.findall(r"[\"'](LMCACHE_[A-Z0-9_]+)[\"']", path.read_text(errors="replace")))
    keys = sorted(config._CONFIG_DEFINITIONS)
    aliases = dict(sorted(config._CONFIG_ALIASES.items()))
    from_keys = {f"LMCACHE_{name.upper()}" for name in list(keys) + list(aliases)}
    return {
        "program": "lmcache",
        "version": version("lmcache"),
        "source": f"lmcache=={version('lmcache')} lmcache/v1/config.py (_CONFIG_DEFINITIONS, _CONFIG_ALIASES; "
        f"from_env reads LMCACHE_<KEY>) and the literal LMCACHE_* names of the package's modules",
        "regenerate": "make consumer-facts",
        "config_keys": keys,
        "aliases": aliases,
        "env_prefix": "LMCACHE_",
        # Families read through their own prefix (LMCACHE_EC_ for load_ec_engine_config, ...): literals ending in "_".
        "env_family_prefixes": sorted({name for name in literal if name.endswith("_")} | {config._EC_ENV_PREFIX}),
        "other_env": sorted(name for name in literal - from_keys if not name.endswith("_")),
    }


def _choices(action: argparse.Action) -> list | None:
    """Choices as the parser compares them: kept only when they are strings the value is compared to as typed."""
    if action.choices is None:
        return None
    choices = list(action.choices)
    if all(isinstance(c, str) for c in choices) and action.type in (None, str):
        return choices
    return None


def _option(action: argparse.Action) -> dict:
    kind = type(action).__name__
    return {
        "options": list(action.option_strings),
        "dest": action.dest,
        "action": kind,
        "nargs": action.nargs,
        "type": getattr(action.type, "__name__", None) if action.type is not None else None,
        "choices": _choices(action),
    }


def vllm_serve_facts() -> dict:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(prog="vllm")
    subparsers = root.add_subparsers(dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)
    actions = [_option(a) for a in serve._actions]
    return {
        "program": "vllm serve",
        "version": version("vllm"),
        "source": f"vllm=={version('vllm')} vllm/entrypoints/cli/serve.py (ServeSubcommand.subparser_init: "
        f"make_arg_parser of vllm/entrypoints/launchers/cli_args.py and EngineArgs.add_cli_args of "
        f"vllm/engine/arg_utils.py), VLLM_TARGET_DEVICE=cpu",
        "regenerate": "make consumer-facts (scripts/consumers-engine vllm, then scripts/consumer_facts.py vllm-serve)",
        "allow_abbrev": serve.allow_abbrev,
        "prefix_chars": serve.prefix_chars,
        "actions": actions,
    }


def main(argv: list[str]) -> int:
    which = argv[1] if len(argv) > 1 else ""
    facts = {"lmcache": lmcache_facts, "vllm-serve": vllm_serve_facts}.get(which)
    if facts is None:
        print("usage: consumer_facts.py lmcache|vllm-serve", file=sys.stderr)
        return 2
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # the programs log to stdout while they import
        data = facts()
    json.dump(data, out, indent=1, sort_keys=False)
    out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
