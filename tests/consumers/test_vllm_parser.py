"""vLLM's own `vllm serve` parser over what the stacks render, at the vLLM the target vllm-rbln builds on (0.30.0,
VLLM_TARGET_DEVICE=cpu, installed by `scripts/consumers-engine vllm`): both roles' rendered args of every stack parse,
the committed flag data (core/versions/data) is what that parser says, and an argv the parser refuses is refused by
the data-driven check with the same words."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from core.versions import vllm_args
from policy.read.engines import engines
from policy.read.flags import serve_argv
from tests.consumers.conftest import PROJECT_ROOT, SCRIPT
from tests.policy.conftest import STACKS
from tests.prerequisites import checked_dir, require

PROGRAM = f"vllm=={vllm_args.VLLM_VERSION} `vllm serve`"
# Runs in the vLLM venv: parse each argv with the real serve parser (no engine is started), report exit and stderr.
PARSE = r"""
import contextlib, io, json, os, sys
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser
root = FlexibleArgumentParser(prog="vllm")
subparsers = root.add_subparsers(dest="subparser")
ServeSubcommand().subparser_init(subparsers)
results = []
for argv in json.load(sys.stdin):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = root.parse_args(["serve", *argv])
        results.append({"status": 0, "model": args.model_tag, "error": ""})
    except SystemExit as exit:
        results.append({"status": exit.code, "model": None, "error": err.getvalue().strip().splitlines()[-1:]})
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def vllm_python() -> pathlib.Path:
    found = checked_dir(SCRIPT, "vllm", "--check")
    return (
        pathlib.Path(require(found, f"{PROGRAM} is not installed: run `make consumers-vllm`"))
        / "venv"
        / "bin"
        / "python"
    )


def parse(python: pathlib.Path, argvs: list[list[str]]) -> list[dict]:
    proc = subprocess.run(
        [str(python), "-c", PARSE],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rendered_argvs(renders) -> dict[tuple[str, str], list[str]]:
    """(stack, engine resource) -> its `vllm serve` argv, as the render has it."""
    return {(stack, e.resource): serve_argv(e.container) for stack in STACKS for e in engines(renders[stack])}


@pytest.fixture(scope="module")
def real_verdicts(renders, vllm_python) -> dict[tuple, dict]:
    """One run of the real parser (importing vLLM takes a while) over every rendered argv and the BAD corpus."""
    argvs = {**rendered_argvs(renders), **{("corpus", " ".join(extra)): CORPUS_BASE + extra for extra in BAD}}
    return dict(zip(argvs, parse(vllm_python, list(argvs.values())), strict=True))


@pytest.mark.parametrize("stack", STACKS)
def test_vllm_parses_every_rendered_engine_argv(renders, real_verdicts, stack):
    argvs = {key: argv for key, argv in rendered_argvs(renders).items() if key[0] == stack}
    assert len(argvs) == (1 if stack == "agg" else 2)
    for key, argv in argvs.items():
        result = real_verdicts[key]
        assert result["status"] == 0, f"{PROGRAM} refuses {key[1]}: {result['error']}"
        assert result["model"] == argv[0]
        assert vllm_args.judge(argv) is None


def test_the_committed_flag_data_is_what_vllm_says(vllm_python):
    proc = subprocess.run(
        [str(vllm_python), str(PROJECT_ROOT / "scripts" / "consumer_facts.py"), "vllm-serve"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == vllm_args.facts(), "stale: run `make consumer-facts`"


CORPUS_BASE = ["MiniMaxAI/MiniMax-M2.7", "--port", "8000"]
BAD = [
    ["--foo"],
    ["--enable-prefix-cachin"],  # a prefix of a flag: argparse expands it only when allow_abbrev is on
    ["--kv-cache-dtype", "fp4"],  # a value outside the choices
    ["--tensor_parallel_size", "2"],  # underscores: vLLM reads it as --tensor-parallel-size (accepted)
    ["--speculative-config.method", "ngram"],  # one key of a JSON flag (accepted)
    ["--no-enable-prefix-caching"],  # a boolean flag's negation (accepted)
    ["--port", "http"],  # a value of the wrong type
    ["-dpm", "-tp", "2"],  # short aliases (accepted)
]


def test_the_data_driven_check_agrees_with_vllm(real_verdicts):
    for extra in BAD:
        result = real_verdicts[("corpus", " ".join(extra))]
        verdict = vllm_args.judge(CORPUS_BASE + extra)
        assert (verdict is None) == (result["status"] == 0), (extra, result, verdict)
        if verdict is not None:
            assert any(verdict.message in line for line in result["error"]), (extra, result["error"], verdict.message)
