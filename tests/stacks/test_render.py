"""Golden renders of the three stacks, and the project's strict manifest validator over them.

Regenerate after an intended change with `make golden`, review the diff, commit it.
"""

import subprocess
import sys

import pytest
import yaml

from core.stackfile import PROJECT_ROOT, stack_file
from stacks import render

GOLDEN = PROJECT_ROOT / "tests" / "golden"
STACKS = ["dev", "prod-4p4d", "agg", "pd-router07", "prod-autoscale"]


def golden_files(stack: str) -> dict[str, dict]:
    folder = GOLDEN / stack
    return {str(p.relative_to(folder)): yaml.safe_load(p.read_text()) for p in sorted(folder.rglob("*.yaml"))}


@pytest.fixture(scope="module", params=STACKS)
def rendered(request):
    return request.param, render.render_stack_file(stack_file(request.param), request.param)


def test_render_matches_golden(rendered):
    stack, result = rendered
    expected = golden_files(stack)
    actual = {render.manifest_path(m): m for m in result.manifests}
    assert sorted(actual) == sorted(expected), f"objects differ from tests/golden/{stack}: run `make golden` and review"
    for path, manifest in actual.items():
        assert manifest == expected[path], f"{path} differs from tests/golden/{stack}: run `make golden` and review"


def test_golden_files_are_written_as_render_writes_them(tmp_path):
    result = render.render_stack_file(stack_file("dev"), "dev")
    render.write(result.manifests, tmp_path / "out")
    for path in (tmp_path / "out").rglob("*.yaml"):
        relative = path.relative_to(tmp_path / "out")
        assert path.read_text() == (GOLDEN / "dev" / relative).read_text(), (
            f"{relative}: byte-level diff, run `make golden`"
        )


def test_every_object_has_an_explicit_name(rendered):
    _, result = rendered
    for manifest in result.manifests:
        assert manifest["metadata"].get("name"), manifest


def test_hf_token_only_by_secret_reference(rendered):
    _, result = rendered
    seen = 0
    for manifest in result.manifests:
        if manifest["kind"] != "Deployment":
            continue
        pod = manifest["spec"]["template"]["spec"]
        for item in pod["containers"] + pod.get("initContainers", []):
            for env in item.get("env", []):
                if env["name"] == "HF_TOKEN":
                    seen += 1
                    assert "value" not in env and env["valueFrom"]["secretKeyRef"]["name"] == "hf-token"
    assert seen >= 1


def test_prod_outputs_match_the_reference_design():
    outputs = render.render_stack_file(stack_file("prod-4p4d"), "prod-4p4d").outputs
    assert outputs["prefill"] == {"replicas": 4, "devicesPerPod": 4, "devices": 16}
    assert outputs["decode"] == {"replicas": 4, "devicesPerPod": 4, "devices": 16}
    assert outputs["totalDevices"] == 32
    assert outputs["kvBytesPerToken"] == 126_976
    assert outputs["rdsTokensPerRank"] == 4_096_000
    assert outputs["openaiBaseUrl"].endswith(":80/v1")
    assert outputs["servedModelName"] == "MiniMaxAI/MiniMax-M2.7"
    assert outputs["memoryBudget"]["usedMiB"] == 4512 and outputs["memoryBudget"]["freeMiB"] == 7372.8


def test_agg_has_no_prefill_and_agg_router():
    result = render.render_stack_file(stack_file("agg"), "agg")
    names = {m["metadata"]["name"] for m in result.manifests}
    assert not any("prefill" in n for n in names)
    config = next(
        m for m in result.manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"].endswith("epp-config")
    )
    assert "peakPrefillThroughput: 2256" in config["data"]["epp-config.yaml"]


@pytest.mark.parametrize("stack", STACKS)
def test_golden_passes_strict_validator(stack):
    """`python -m stacks validate` (stacks/validate.py, CRDs from crds/) as `make validate` runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "validate", "--quiet", str(GOLDEN / stack)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 invalid" in summary, summary
