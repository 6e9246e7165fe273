"""The real router programs of the generation before the rename (v0.7.1, scripts/consumers' `router07` set: the
corpus test checks the version facts against them) and how the tests run them: each in a network namespace
of its own with a discovery-only API (sandbox.py), stopped by its pid."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile

import yaml

from core.stackfile import PROJECT_ROOT, stack_file
from policy.read.flags import command_line
from policy.read.pods import pod_templates, routing_sidecars
from policy.read.pool import epp_configs, epp_containers
from stacks import render
from tests.prerequisites import checked_dir, require

SANDBOX = pathlib.Path(__file__).with_name("sandbox.py")
VERSION = "0.7.1"  # what scripts/consumers builds as its `router07` set
STACKS = ("dev", "prod-4p4d", "agg", "pd-router07")
# The EPP's own log lines: it read its configuration, or it refused it (each refusal is logged under this).
EPP_LOADED = "loaded configuration from file/text successfully"
EPP_REFUSED = ("Failed to parse configuration",)
TIMEOUT = 20.0


def programs_dir() -> pathlib.Path:
    found = checked_dir(str(PROJECT_ROOT / "scripts" / "consumers"), "build", "--check", "router07")
    return pathlib.Path(require(found, "the v0.7.1 router programs are not built (scripts/consumers build router07)"))


def sandboxed(spec: dict) -> dict:
    """Run one program as `spec` says (see sandbox.py); its outcome, exit code and log."""
    with tempfile.TemporaryDirectory(prefix="consumer-spec.") as tmp:
        path = pathlib.Path(tmp) / "spec.json"
        path.write_text(json.dumps(spec))
        proc = subprocess.run(
            ["unshare", "--net", sys.executable, str(SANDBOX), str(path)],
            capture_output=True,
            text=True,
            timeout=float(spec.get("timeout", TIMEOUT)) + 30,
        )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"the sandbox failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_epp(programs: pathlib.Path, config: dict, args: list[str] | None = None) -> dict:
    """The EPP reading `config` with the rendered arguments (`--config-file` pointed at a copy of it)."""
    with tempfile.TemporaryDirectory(prefix="epp-config.") as tmp:
        config_file = pathlib.Path(tmp) / "epp-config.yaml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        argv = list(args or ["--pool-name", "pool", "--pool-namespace", "default"])
        if "--config-file" in argv:
            argv[argv.index("--config-file") + 1] = str(config_file)
        else:
            argv += ["--config-file", str(config_file)]
        return sandboxed(
            {"argv": [str(programs / "epp"), *argv], "pass": EPP_LOADED, "fail": list(EPP_REFUSED), "timeout": TIMEOUT}
        )


def rendered(stack: str) -> list[dict]:
    return render.render_stack_file(stack_file(stack), stack).manifests


def rendered_epp(manifests: list[dict]) -> tuple[dict, list[str]]:
    """The EndpointPickerConfig of a render and the arguments of the EPP container that mounts it."""
    ((config_map, _key, config),) = epp_configs(manifests)
    ((_template, container),) = epp_containers(manifests, config_map)
    return config, command_line(container)


def rendered_epp_image(manifests: list[dict]) -> str:
    """The image of the EPP container that mounts the render's EndpointPickerConfig."""
    ((config_map, _key, _config),) = epp_configs(manifests)
    ((_template, container),) = epp_containers(manifests, config_map)
    return str(container["image"])


def rendered_sidecar(manifests: list[dict]) -> dict | None:
    """The first routing sidecar container of a render (None for AGG)."""
    sidecars = [s for t in pod_templates(manifests) for s in routing_sidecars(t)]
    return sidecars[0].container if sidecars else None


def rendered_sidecar_args(manifests: list[dict]) -> list[str]:
    sidecar = rendered_sidecar(manifests)
    return command_line(sidecar) if sidecar else []


def verdict(outcome: dict) -> str:
    """`accepted` / `refused` from the EPP's own log (refused at its configuration, or at its command line: pflag's
    `unknown flag: --x` and a non-zero exit before any configuration is read); anything else fails the test with
    the log."""
    if outcome["outcome"] == "passed":
        return "accepted"
    if outcome["outcome"] == "failed":
        return "refused"
    if (
        outcome["outcome"] == "exited"
        and outcome["returncode"]
        and any(line.startswith("unknown flag: ") for line in outcome["log"])
    ):
        return "refused"
    raise AssertionError(
        f"the EPP neither loaded nor refused its config ({outcome['outcome']}):\n" + "\n".join(outcome["log"][-30:])
    )
