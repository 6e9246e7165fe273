"""`python -m stacks render|plan` as a user runs them: exit codes, messages, nothing written on error."""

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from core import stackfile
from core.stackfile import PROJECT_ROOT
from policy import levels


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
    proc = run(
        "render",
        "--config-file",
        str(bad_stack(tmp_path, prefill={"pipelineParallelSize": 4, "dataParallelSize": 2})),
        "--out",
        str(out),
    )
    assert proc.returncode == 1
    assert (
        "rebel100:prefill.pipelineParallelSize: pipeline parallel size 4 together with data parallel size 2"
        in proc.stderr
    )
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
    assert proc.returncode == 2 and "stacks: agg, dev, pd-router07, prod-4p4d" in proc.stderr


def test_up_and_preview_are_commands_with_their_help():
    """`python -m stacks up` is a command like the others: listed in the help, with its own (no toolchain, no stack
    read); its usage is the one place it is checked (scripts/up hands over without a check of its own)."""
    listed = run("--help")
    assert listed.returncode == 0 and "    up " in listed.stdout and "    preview " in listed.stdout
    assert "changes" not in listed.stdout
    helped = run("up", "--help")
    assert helped.returncode == 0 and "--local-cluster" in helped.stdout and "--restore-checkpoint" in helped.stdout
    for args in (("up", "--bogus"), ("preview",)):
        proc = run(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("usage: python -m stacks"), proc.stderr


def test_plan_prints_the_budget():
    proc = run("plan", "prod-4p4d")
    assert proc.returncode == 0, proc.stderr
    for figure in (
        "126,976 B (124 KiB)",
        "4,096,000 tokens per rank",
        "7,372.8 MiB",
        "4,512.0 MiB",
        "32 of 32 on 4 nodes",
        "Unverified:",
    ):
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


MALFORMED = {
    "config-is-a-list": b"config:\n  - rebel100:name: x\n",
    "yaml-syntax-error": b"config: {rebel100:prefill: [1, 2\n",
    "document-is-a-list": b"- a\n- b\n",
    "binary": b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe",
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
@pytest.mark.parametrize("command", ["check", "plan", "render"])
def test_malformed_stack_file_is_one_line(tmp_path, case, command):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_bytes(MALFORMED[case])
    extra = ["--out", str(tmp_path / "out")] if command == "render" else []
    proc = run(command, "--config-file", str(path), *extra)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), proc.stderr


def test_extra_env_and_extra_config_overrides_are_refused(tmp_path):
    path = bad_stack(
        tmp_path, prefill={"extraEnv": {"HF_TOKEN": "hf_literal"}}, kvTier={"extraConfig": {"rds_max_chunks": 4000}}
    )
    proc = run("check", "--config-file", str(path))
    assert proc.returncode == 1
    assert "rebel100:prefill.extraEnv.HF_TOKEN: HF_TOKEN is generated by the program" in proc.stderr
    assert (
        "rebel100:kvTier.extraConfig.rds_max_chunks: rds_max_chunks is set by the program from kvTier.rdsMaxChunks"
        in proc.stderr
    )
    assert "hf_literal" not in proc.stderr + proc.stdout


def test_failing_check_prints_no_traceback_at_exit(tmp_path):
    """A run that ends with a mandatory violation closes the mock runtime's event loop (no
    'Exception ignored in BaseEventLoop.__del__' after the findings)."""
    path = bad_stack(tmp_path, security={"networkPolicies": False})  # prod: engine-network-policy is mandatory
    for _ in range(3):
        proc = run("check", "--config-file", str(path))
        assert proc.returncode == 1 and "[mandatory] engine-network-policy" in proc.stdout
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("stack", ["dev", "prod-4p4d", "agg", "pd-router07"])
def test_policy_config_is_the_level_check_applies(stack):
    proc = run("policy-config", stack)
    assert proc.returncode == 0, proc.stderr
    environment = stackfile.load_stack(stackfile.stack_file(stack), stack).environment
    assert proc.stdout.strip() == levels.environment_config(environment).relative_to(PROJECT_ROOT).as_posix()


@pytest.mark.parametrize(
    "line, level",
    [("", "prod"), ("  rebel100:environment: dev\n", "dev"), ("  rebel100:environment: staging\n", "prod")],
)
def test_policy_config_of_an_unset_or_unknown_environment_is_prod(tmp_path, line, level):
    path = tmp_path / "Pulumi.fresh.yaml"
    path.write_text("config:\n  rebel100:topology: pd\n" + line)
    proc = run("policy-config", "--config-file", str(path))
    assert proc.returncode == 0 and proc.stdout.strip() == f"policy/config/{level}.json", proc.stdout + proc.stderr


def test_policy_config_of_a_malformed_stack_file_is_one_error(tmp_path):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text("config: [\n")
    proc = run("policy-config", "--config-file", str(path))
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr


# The examples of issue 38, as a new user writes them: `check` refuses each at the key named, with the fix.
DIGEST = "sha256:" + "0123456789abcdef" * 4
ISSUE_38 = {
    "target-in-another-unit": (
        "  rebel100:decode:\n    autoscaling: {minReplicas: 1, maxReplicas: 4, metric: kvCacheUsage, target: 80}\n"
        "  rebel100:rollout:\n    strategy: RollingUpdate\n",
        "rebel100:decode.autoscaling.target: decode.autoscaling.target 80 is outside the range of "
        "decode.autoscaling.metric kvCacheUsage, a fraction",
        "Set decode.autoscaling.target to a fraction below that (80% is 0.8)",
    ),
    "replicas-true": (
        "  rebel100:prefill:\n    replicas: true\n",
        "rebel100:prefill.replicas: true is a boolean, but prefill.replicas takes an int",
        "Write a whole number in its place, e.g. `replicas: 4`.",
    ),
    "max-replicas-true": (
        "  rebel100:decode:\n    autoscaling: {minReplicas: 1, maxReplicas: true}\n",
        "rebel100:decode.autoscaling.maxReplicas: true is a boolean, but decode.autoscaling.maxReplicas takes an int",
        "Write a whole number in its place.",
    ),
    "max-replicas-quoted": (
        '  rebel100:decode:\n    autoscaling: {minReplicas: 1, maxReplicas: "4"}\n',
        'rebel100:decode.autoscaling.maxReplicas: "4" is a quoted number (text), but decode.autoscaling.maxReplicas '
        "takes an int",
        "Write it without the quotes: `maxReplicas: 4`.",
    ),
    "scrape-ten-minutes": (
        "  rebel100:decode:\n    autoscaling: {minReplicas: 1, maxReplicas: 4}\n  rebel100:rollout:\n"
        "    strategy: RollingUpdate\n  rebel100:observability:\n    scrapeInterval: 10m\n",
        "rebel100:observability.scrapeInterval: observability.scrapeInterval 10m scrapes kvCacheUsage",
        "Set observability.scrapeInterval to at most 5m (one scrape per 5m).",
    ),
    "grpc-port-on-metrics-port": (
        "  rebel100:router:\n    grpcPort: 9090\n",
        "rebel100:router.grpcPort: router.grpcPort 9090 and router.metricsPort 9090 both take port 9090",
        "Set router.grpcPort to a port that nothing else there takes, e.g. its default 9002.",
    ),
    "epp-by-digest-alone": (
        f"  rebel100:router:\n    image: ghcr.io/llm-d/llm-d-router-endpoint-picker@{DIGEST}\n",
        "rebel100:router.image: router.image ghcr.io/llm-d/llm-d-router-endpoint-picker@sha256:",
        f"Pin the release's tag, beside the digest: ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST}",
    ),
    "newer-api-version-older-epp": (
        "  rebel100:router:\n    image: ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1\n"
        "    configApiVersion: llm-d.ai/v1alpha1\n  rebel100:decode:\n"
        "    sidecar: {image: ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1}\n",
        "rebel100:router.configApiVersion: router.configApiVersion llm-d.ai/v1alpha1 is read only by llm-d EPP 0.9.0",
        "Remove router.configApiVersion (the render then writes inference.networking.x-k8s.io/v1alpha1",
    ),
}


@pytest.mark.parametrize("case", ISSUE_38, ids=list(ISSUE_38))
def test_check_refuses_the_issue_38_examples_at_their_key_with_the_fix(tmp_path, case):
    text, refusal, fix = ISSUE_38[case]
    path = tmp_path / "Pulumi.user.yaml"
    path.write_text("config:\n" + text)
    proc = run("check", "--config-file", str(path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: stack 'user' is invalid (1 problem):\n  - "), proc.stderr
    assert refusal in proc.stderr and fix in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


GRACE_60 = """\
config:
  rebel100:environment: prod
  rebel100:hardware:
    nodes: 4
  rebel100:rollout:
    terminationGracePeriodSeconds: 60
"""


def test_an_engine_grace_period_shorter_than_its_stop_is_refused_at_its_key(tmp_path):
    """The stack file as a user writes it: 60 s of grace for 15 s of preStop and 90 s of drain (the defaults)."""
    path = tmp_path / "Pulumi.short-grace.yaml"
    path.write_text(GRACE_60)
    proc = run("check", "--config-file", str(path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == (
        "error: stack 'short-grace' is invalid (1 problem):\n"
        "  - rebel100:rollout.terminationGracePeriodSeconds: rollout.terminationGracePeriodSeconds 60 is shorter than "
        "rollout.preStopSeconds 15 + rollout.drainSeconds 90 = 105 s: the grace period counts from the pod's deletion, "
        "its preStop included, so the kubelet kills the engine 45 s before the drain it was given ends, and the "
        "requests still running then fail. Set rollout.terminationGracePeriodSeconds to at least 105, or shorten "
        "rollout.drainSeconds (the longest request a stopping pod lets finish).\n"
    )
    # The same stack with the drain it can hold passes the gate.
    path.write_text(GRACE_60 + "    drainSeconds: 45\n")
    proc = run("check", "--config-file", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_drain_for_an_epp_without_the_flag_is_advice(tmp_path):
    path = tmp_path / "Pulumi.router07-drain.yaml"
    path.write_text(
        "config:\n"
        "  rebel100:environment: prod\n"
        "  rebel100:hardware: {nodes: 4}\n"
        "  rebel100:router: {image: 'ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1', drainSeconds: 45}\n"
        "  rebel100:decode: {sidecar: {image: 'ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1'}}\n"
    )
    proc = run("check", "--config-file", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "warning: rebel100:router.drainSeconds: router.drainSeconds 45 is set, but "
        "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1 (router.image) has no --drain-timeout (first in 0.10.0): on "
        "SIGTERM it refuses new ext_proc streams at once, so the requests the gateway sends it before it sees the pod "
        "go fail, and the setting has no effect. Pin 0.10.0 or later for a drain, or remove the setting.\n"
    ) in proc.stdout + proc.stderr
