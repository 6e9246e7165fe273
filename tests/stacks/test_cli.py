"""`python -m stacks render|plan` as a user runs them: exit codes, messages, nothing written on error."""
import json
import pathlib
import subprocess
import sys

import yaml

from core.stackfile import PROJECT_ROOT


def run(*args, cwd=PROJECT_ROOT):
    return subprocess.run([sys.executable, "-m", "stacks", *args], cwd=cwd, capture_output=True, text=True)


def bad_stack(tmp_path: pathlib.Path, **config) -> pathlib.Path:
    base = yaml.safe_load((PROJECT_ROOT / "Pulumi.prod-4p4d.yaml").read_text())
    for key, value in config.items():
        base["config"][f"rebel100:{key}"] = {**base["config"].get(f"rebel100:{key}", {}), **value}
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def test_render_writes_one_file_per_object(tmp_path):
    proc = run("render", "dev", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    files = list((tmp_path / "out" / "1-manifest").glob("*.yaml"))
    assert len(files) >= 10
    assert "apps_v1-deployment-rebel100-minimax-m27-decode.yaml" in {f.name for f in files}


def test_pp_with_dp_refused_nothing_written(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.yaml").write_text("earlier render\n")
    proc = run("render", "--config-file", str(bad_stack(tmp_path, prefill={"pipelineParallelSize": 4, "dataParallelSize": 2})), "--out", str(out))
    assert proc.returncode == 1
    assert "rebel100:prefill.pipelineParallelSize: pipeline parallel size 4 together with data parallel size 2" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["keep.yaml"]
    assert (out / "keep.yaml").read_text() == "earlier render\n"


def test_rds_over_budget_refused(tmp_path):
    out = tmp_path / "out"
    proc = run("render", "--config-file", str(bad_stack(tmp_path, kvTier={"rdsMaxChunks": 4000})), "--out", str(out))
    assert proc.returncode == 1
    assert "kvTier.rdsMaxChunks 4000 x 2 MiB x 2 NVMe drives + 512 MiB staging = 16,512 MiB" in proc.stderr
    assert "7,372.8 MiB" in proc.stderr
    assert not out.exists()


def test_unknown_stack_is_a_usage_error():
    proc = run("plan", "nope")
    assert proc.returncode == 2 and "stacks: agg, dev, prod-4p4d" in proc.stderr


def test_plan_prints_the_budget():
    proc = run("plan", "prod-4p4d")
    assert proc.returncode == 0, proc.stderr
    for figure in ("126,976 B (124 KiB)", "4,096,000 tokens per rank", "7,372.8 MiB", "4,512.0 MiB", "32 of 32 on 4 nodes", "Unverified:"):
        assert figure in proc.stdout


def test_plan_json_with_decode_capacity(tmp_path):
    path = bad_stack(tmp_path, decode={"maxNumSeqs": 8, "kvCapacityTokens": 282624})
    proc = run("plan", "--config-file", str(path), "--json")
    data = json.loads(proc.stdout)
    assert data["decodeKvCapacity"]["blocks"] == 69
    assert data["totalDevices"] == 32 and data["rds"]["tokensPerRank"] == 4_096_000
    assert data["rds"]["fits"] is True


def test_plan_refuses_invalid_config(tmp_path):
    proc = run("plan", "--config-file", str(bad_stack(tmp_path, decode={"maxNumSeq": 2})))
    assert proc.returncode == 1
    assert "rebel100:decode.maxNumSeq: unknown key. Did you mean `rebel100:decode.maxNumSeqs`?" in proc.stderr
