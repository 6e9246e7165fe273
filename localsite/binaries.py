"""Where the site's programs are: the router's two programs from REBEL100_EPP_BINARY and REBEL100_SIDECAR_BINARY
(any build of a supported generation: a user or a release job proving a new pin), else the builds of
`scripts/consumers` (the v0.10.0 programs prod-4p4d pins, the simulator and the gateway role, cached outside the
project)."""

from __future__ import annotations

import os
import pathlib
import subprocess
from dataclasses import dataclass

from localsite.programs import Binaries

PROJECT = pathlib.Path(__file__).resolve().parent.parent
CONSUMERS = PROJECT / "scripts" / "consumers"
# Builds other than scripts/consumers' (the last two for working on the site itself).
OVERRIDES = {
    "epp": "REBEL100_EPP_BINARY",
    "pd-sidecar": "REBEL100_SIDECAR_BINARY",
    "llm-d-inference-sim": "REBEL100_SIM_BINARY",
    "gateway": "REBEL100_GATEWAY_BINARY",
}


class Missing(RuntimeError):
    """A program is not built; the message says how to build it."""


@dataclass(frozen=True)
class Found:
    programs: Binaries
    gateway: str


def built(program: str) -> str:
    """The path of a program `scripts/consumers` built (never builds)."""
    proc = subprocess.run([str(CONSUMERS), "bin", program, "--check"], capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise Missing(f"{program} is not built: run scripts/consumers build ({proc.stderr.strip()})")
    return lines[-1]


def program(name: str) -> str:
    override = os.environ.get(OVERRIDES.get(name, ""), "")
    if override:
        if not os.access(override, os.X_OK):
            raise Missing(f"{OVERRIDES[name]}={override} is not an executable file")
        return os.path.abspath(override)
    return built(name)


def find() -> Found:
    return Found(
        Binaries(sim=program("llm-d-inference-sim"), epp=program("epp"), sidecar=program("pd-sidecar")),
        gateway=program("gateway"),
    )


# The stack the site serves for each generation of the router programs: the render must be what that EPP reads.
STACK_BY_MODULE = {
    "github.com/llm-d/llm-d-inference-scheduler": "pd-router07",
    "github.com/llm-d/llm-d-router": "prod-4p4d",
}


def main_module(binary: str) -> str:
    """The Go module a program was built from (its build info, `go version -m`): the router project was renamed at
    v0.9.0, so the module names the generation even for a build of a source checkout, whose version is (devel)."""
    proc = subprocess.run(["go", "version", "-m", binary], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "mod":
            return fields[1]
    raise Missing(f"{binary}: no Go build info (`go version -m` answered {proc.returncode}: {proc.stderr.strip()})")


def stack_for(epp: str) -> str:
    """The stack whose render the EPP at `epp` reads (REBEL100_SERVE_STACK overrides)."""
    if os.environ.get("REBEL100_SERVE_STACK"):
        return os.environ["REBEL100_SERVE_STACK"]
    module = main_module(epp)
    if module not in STACK_BY_MODULE:
        raise Missing(
            f"{epp} was built from {module}, not a router module the site knows ({', '.join(STACK_BY_MODULE)})"
        )
    return STACK_BY_MODULE[module]
