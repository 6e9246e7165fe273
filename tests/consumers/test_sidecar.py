"""The real llm-d P/D sidecar v0.7.1 (built by scripts/consumers) started with the decode sidecar's rendered
flags of each P/D stack (pd-router07 pins this very version): it listens on every port the render gives it, then
exits cleanly on SIGTERM. In its own network namespace (tests/consumers/sandbox.py), so the rendered ports are
free and nothing leaves loopback. The stub API beside it serves the render's InferencePool: a sidecar with SSRF
protection (the renders of the v0.10.0 pins) lists it before it listens."""

from __future__ import annotations

import json

import pytest

from core.versions import Version, epp_schema, image_version
from core.versions import router as router_versions
from policy.read.pods import SIDECAR_DEFAULTS
from tests.consumers.programs import programs_dir, rendered, rendered_sidecar, rendered_sidecar_args, sandboxed

pytestmark = pytest.mark.consumers


@pytest.mark.parametrize("stack", ["dev", "prod-4p4d", "pd-router07"])
def test_sidecar_starts_with_the_rendered_flags_and_stops_cleanly(stack):
    programs = programs_dir()
    manifests = rendered(stack)
    args = rendered_sidecar_args(manifests)
    port = int(args[args.index("--port") + 1])
    size = int(args[args.index("--data-parallel-size") + 1])
    pools = [m for m in manifests if m["kind"] == "InferencePool"]
    outcome = sandboxed(
        {
            "argv": [str(programs / "pd-sidecar"), *args],
            "listen": list(range(port, port + size)),
            "timeout": 20,
            "objects": pools,
        }
    )
    assert outcome["outcome"] == "passed", outcome["log"][-20:]
    flags = router_versions.sidecar_flags(args)
    listed = [r["path"] for r in outcome["requests"] if "/inferencepools?" in r["path"] and r["status"] == 200]
    if router_versions.ssrf_protection_on(flags):  # it read the pool it allowlists from before listening
        namespace, name = router_versions.ssrf_pool(flags).split("/")
        assert any(
            f"/namespaces/{namespace}/inferencepools?" in p and f"metadata.name%3D{name}" in p for p in listed
        ), outcome["requests"]
        logged = [json.loads(json.loads(line)["config"]) for line in outcome["log"] if '"Proxy configuration"' in line]
        assert logged and {
            k: logged[0][k] for k in ("EnableSSRFProtection", "InferencePoolNamespace", "InferencePoolName")
        } == {"EnableSSRFProtection": True, "InferencePoolNamespace": namespace, "InferencePoolName": name}, logged
    else:
        assert not listed, outcome["requests"]
    if router_versions.ssrf_protection_on(flags) and size > 1:
        # Upstream, v0.7.1 and v0.10.0 alike: the server of each DP rank stops the one allowlist validator they share
        # on SIGTERM, and the second close of its channel panics (allowlist.go Stop; exit code 2). A native sidecar
        # gets SIGTERM after the engine container has exited, so nothing is served by then.
        assert outcome["returncode"] == 2, outcome["log"][-20:]
        assert any("panic: close of closed channel" in line for line in outcome["log"]), outcome["log"][-20:]
    else:
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
    """policy.read.pods reads an omitted sidecar flag as the program's default: started with none of them, v0.7.1
    logs the configuration it took (port, connector, DP size, and the vLLM port in its decoder URL)."""
    outcome = sandboxed(
        {"argv": [str(programs_dir() / "pd-sidecar"), "--secure-proxy=false"], "listen": [8000], "timeout": 20}
    )
    assert outcome["outcome"] == "passed", outcome["log"][-20:]
    logged = [json.loads(line) for line in outcome["log"] if '"Proxy configuration"' in line]
    assert logged, outcome["log"][-20:]
    config = json.loads(logged[0]["config"])
    assert {
        "--port": int(config["Port"]),
        "--vllm-port": int(config["DecoderURL"].rsplit(":", 1)[1]),
        "--data-parallel-size": config["DataParallelSize"],
        "--kv-connector": config["KVConnector"],
    } == SIDECAR_DEFAULTS
