"""`python -m stacks check` as CI runs it: stacks pass, one edit to a copy of a render fails and is named."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from core.stackfile import PROJECT_ROOT
from tests.policy.fixtures import DECODE_CLAIM

GOLDEN = PROJECT_ROOT / "tests" / "golden" / "prod-4p4d" / "1-manifest"
DECODE_FILE = "apps_v1-deployment-rebel100-minimax-m27-decode.yaml"
PREFILL_FILE = "apps_v1-deployment-rebel100-minimax-m27-prefill.yaml"
DECODE_CLAIM_FILE = f"resource.k8s.io_v1-resourceclaimtemplate-rebel100-{DECODE_CLAIM}.yaml"
EPP_FILE = "apps_v1-deployment-rebel100-minimax-m27-epp.yaml"


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stacks", "check", *args], cwd=PROJECT_ROOT, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "stack, advice",
    [
        ("dev", "[advisory] engine-network-policy: "),  # dev relaxes hygiene policies to advice
        ("prod-4p4d", None),
        ("agg", None),
        ("pd-router07", "[advisory] sidecar-ssrf-capable: Deployment/rebel100/minimax-m27-decode:"),
    ],
)
def test_every_stack_passes(stack, advice):
    proc = check(stack)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("0 mandatory and " if advice else "0 mandatory and 0 advisory violations") in proc.stdout
    assert advice is None or advice in proc.stdout
    assert "evaluated in" in proc.stdout


def copy_of_golden(tmp_path: pathlib.Path) -> pathlib.Path:
    target = tmp_path / "render"
    shutil.copytree(GOLDEN.parent, target)
    return target / "1-manifest"


def edit_yaml(path: pathlib.Path, change) -> None:
    document = yaml.safe_load(path.read_text())
    change(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def decode_claim_8(folder):
    edit_yaml(
        folder / DECODE_CLAIM_FILE, lambda d: d["spec"]["spec"]["devices"]["requests"][0]["exactly"].update(count=8)
    )


def sidecar_vllm_port_8001(folder):
    def change(d):
        sidecar = next(c for c in d["spec"]["template"]["spec"]["initContainers"] if c["name"] == "routing-proxy")
        args = sidecar["args"]
        args[args.index("--vllm-port") + 1] = "8001"

    edit_yaml(folder / DECODE_FILE, change)


def rds_max_chunks_4000(folder):
    """The LMCache environment lives in RdsTier's ConfigMap, which prefill takes through envFrom."""

    def change(d):
        d["data"]["LMCACHE_EXTRA_CONFIG"] = json.dumps(
            {**json.loads(d["data"]["LMCACHE_EXTRA_CONFIG"]), "rds_max_chunks": 4000}
        )

    edit_yaml(folder / "v1-configmap-rebel100-minimax-m27-lmcache.yaml", change)


EDITS = {
    "decode-claim-count-8": (
        decode_claim_8,
        "[mandatory] npu-claim-matches-parallelism: Deployment/rebel100/minimax-m27-decode:",
        ("claims 8 NPUs", "exactly.count 8", "= 4"),
    ),
    "sidecar-vllm-port-8001": (
        sidecar_vllm_port_8001,
        "[mandatory] sidecar-matches-decode: Deployment/rebel100/minimax-m27-decode:",
        ("--vllm-port 8001", "--port 8200"),
    ),
    "rds-max-chunks-4000": (
        rds_max_chunks_4000,
        "[mandatory] rds-memory-budget: Deployment/rebel100/minimax-m27-prefill:",
        ("rds_max_chunks 4000", "16,512 MiB", "7,372.8 MiB", "at most 1715"),
    ),
}


def test_unedited_copy_passes(tmp_path):
    proc = check("--manifests", str(copy_of_golden(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 mandatory" in proc.stdout


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_one_edit_fails_and_is_named(tmp_path, edit):
    change, line_start, texts = EDITS[edit]
    folder = copy_of_golden(tmp_path)
    change(folder)
    proc = check("--manifests", str(tmp_path / "render"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    mandatory = [line for line in proc.stdout.splitlines() if line.startswith("[mandatory]")]
    assert len(mandatory) == 1, mandatory
    assert mandatory[0].startswith(line_start)
    for text in texts:
        assert text in mandatory[0]
    assert "1 mandatory" in proc.stdout


def test_manifests_reads_multi_document_helm_style_output(tmp_path):
    """`helm template` writes many objects per file under templates/ folders: all are read."""
    documents = [yaml.safe_load(p.read_text()) for p in sorted(GOLDEN.glob("*.yaml"))]
    chart = tmp_path / "chart" / "templates"
    chart.mkdir(parents=True)
    (chart / "all.yml").write_text("---\n" + "\n---\n".join(yaml.safe_dump(d) for d in documents) + "\n---\n")
    proc = check("--manifests", str(tmp_path / "chart"), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["objects"] == len(documents) and report["mandatory"] == 0


def test_environment_decides_image_hygiene(tmp_path):
    """An image no version facts read (the engines' wait-for-weights, Python): `latest` is hygiene alone, mandatory in
    prod and advice in dev. (An EPP at `latest` is also undated, image-pin-dated, in every environment.)"""
    folder = copy_of_golden(tmp_path)
    edit_yaml(
        folder / PREFILL_FILE,
        lambda d: d["spec"]["template"]["spec"]["initContainers"][0].update(image="python:latest"),
    )
    prod = check("--manifests", str(folder))
    assert (
        prod.returncode == 1 and "[mandatory] image-tag-pinned: Deployment/rebel100/minimax-m27-prefill:" in prod.stdout
    )
    dev = check("--manifests", str(folder), "--environment", "dev")
    assert dev.returncode == 0 and "[advisory] image-tag-pinned: Deployment/rebel100/minimax-m27-prefill:" in dev.stdout


def test_an_undated_epp_is_refused_in_every_environment(tmp_path):
    folder = copy_of_golden(tmp_path)
    edit_yaml(
        folder / EPP_FILE,
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
            image="ghcr.io/llm-d/llm-d-inference-scheduler:latest"
        ),
    )
    for environment in ("prod", "dev"):
        proc = check("--manifests", str(folder), "--environment", environment)
        assert proc.returncode == 1, proc.stdout
        assert "[mandatory] image-pin-dated: Deployment/rebel100/minimax-m27-epp: container epp image" in proc.stdout


def test_json_report(tmp_path):
    folder = copy_of_golden(tmp_path)
    decode_claim_8(folder)
    proc = check("--manifests", str(folder), "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["mandatory"] == 1 and report["environment"] == "prod"
    violation = next(v for v in report["violations"] if v["level"] == "mandatory")
    assert violation["policy"] == "npu-claim-matches-parallelism"
    assert violation["resource"] == "Deployment/rebel100/minimax-m27-decode"


def test_invalid_config_stops_before_the_pack(tmp_path):
    stack = yaml.safe_load((PROJECT_ROOT / "Pulumi.prod-4p4d.yaml").read_text())
    stack["config"]["rebel100:prefill"] = {**stack["config"]["rebel100:prefill"], "dataParallelSize": 2}
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(stack))
    proc = check("--config-file", str(path))
    assert proc.returncode == 1
    assert "pipeline parallel size 4 together with data parallel size 2" in proc.stderr
    assert "policy pack" not in proc.stdout


@pytest.mark.parametrize(
    "args", [(), ("prod-4p4d", "--manifests", "tests/golden/prod-4p4d"), ("--manifests", "no/such/dir")]
)
def test_usage_errors(args):
    assert check(*args).returncode == 2
