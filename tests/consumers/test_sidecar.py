"""The real llm-d P/D sidecar v0.7.1 (built by scripts/consumers) started with the decode sidecar's rendered
flags of each P/D stack (pd-router07 pins this very version): it listens on every port the render gives it, then
exits cleanly on SIGTERM. In its own network namespace (tests/consumers/sandbox.py), so the rendered ports are
free and nothing leaves loopback."""
from __future__ import annotations

import json

import pytest

from core.versions import Version, epp_schema, image_version
from core.versions import router as router_versions
from policy.manifests import SIDECAR_DEFAULTS
from tests.consumers.programs import programs_dir, rendered, rendered_sidecar, rendered_sidecar_args, sandboxed

pytestmark = pytest.mark.consumers


@pytest.mark.parametrize("stack", ["dev", "prod-4p4d", "pd-router07"])
def test_sidecar_starts_with_the_rendered_flags_and_stops_cleanly(stack):
    programs = programs_dir()
    args = rendered_sidecar_args(rendered(stack))
    port = int(args[args.index("--port") + 1])
    size = int(args[args.index("--data-parallel-size") + 1])
    outcome = sandboxed({"argv": [str(programs / "pd-sidecar"), *args], "listen": list(range(port, port + size)),
                         "timeout": 20})
    assert outcome["outcome"] == "passed", outcome["log"][-20:]
    assert outcome["returncode"] == 0, outcome["log"][-20:]


@pytest.mark.parametrize("version", ["0.7.1", str(router_versions.TARGET)])
def test_rendered_flags_are_known_to_the_sidecar_data(version):
    args = rendered_sidecar_args(rendered("prod-4p4d"))
    assert epp_schema.check_sidecar_args(args, epp_schema.load("sidecar", Version.parse(version))) == []


@pytest.mark.parametrize("stack", ["dev", "prod-4p4d", "pd-router07"])
def test_rendered_flags_are_known_to_the_data_of_the_pinned_sidecar(stack):
    manifests = rendered(stack)
    data = epp_schema.data_for("sidecar", image_version(rendered_sidecar(manifests)["image"]))
    assert data is not None and epp_schema.check_sidecar_args(rendered_sidecar_args(manifests), data) == []


def test_unknown_sidecar_flag_is_refused_by_the_data_and_the_program():
    programs = programs_dir()
    args = [*rendered_sidecar_args(rendered("prod-4p4d")), "--no-such-flag=1"]
    assert epp_schema.check_sidecar_args(args, epp_schema.load("sidecar", Version(0, 7, 1)))
    outcome = sandboxed({"argv": [str(programs / "pd-sidecar"), *args], "timeout": 20})
    assert outcome["outcome"] == "exited" and outcome["returncode"] != 0, outcome
    assert any("unknown flag: --no-such-flag" in line for line in outcome["log"]), outcome["log"]


def test_the_packs_sidecar_defaults_are_the_programs():
    """policy.manifests reads an omitted sidecar flag as the program's default: started with none of them, v0.7.1
    logs the configuration it took (port, connector, DP size, and the vLLM port in its decoder URL)."""
    outcome = sandboxed({"argv": [str(programs_dir() / "pd-sidecar"), "--secure-proxy=false"], "listen": [8000],
                         "timeout": 20})
    assert outcome["outcome"] == "passed", outcome["log"][-20:]
    logged = [json.loads(line) for line in outcome["log"] if '"Proxy configuration"' in line]
    assert logged, outcome["log"][-20:]
    config = json.loads(logged[0]["config"])
    assert {"--port": int(config["Port"]), "--vllm-port": int(config["DecoderURL"].rsplit(":", 1)[1]),
            "--data-parallel-size": config["DataParallelSize"], "--kv-connector": config["KVConnector"]} == SIDECAR_DEFAULTS
