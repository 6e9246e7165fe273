"""The real engine end to end: preview with the policy pack, the config gate, up/refresh/destroy, S3 state.

Each test runs `pulumi` on a copy of the project (see conftest.py), so the working tree, its
state and its renders are never touched.
"""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import yaml

from core.stackfile import load_stack, stack_file
from host.ports import any_free_port
from stacks import render
from tests.certificates import as_rendered
from tests.prerequisites import importable, require
from tests.pulumi_project import Project, tree_digest

pytestmark = pytest.mark.e2e
STACKS = ["dev", "prod-4p4d", "agg", "pd-router07"]


def policy_config(stack: str) -> list[str]:
    level = "prod" if stack == "prod-4p4d" else "dev"
    return ["--policy-pack-config", f"policy/config/{level}.json"]


@pytest.mark.parametrize("stack", STACKS)
def test_pr_check_preview_passes(project: Project, stack: str):
    """scripts/preview, the command of the PR workflow: preview with the pack at the stack's level."""
    proc = subprocess.run(
        [str(project.root / "scripts" / "preview"), stack],
        cwd=project.root,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[mandatory]" not in proc.stdout
    assert "to create" in proc.stdout
    level = "prod" if load_stack(stack_file(stack), stack).environment == "prod" else "dev"
    assert f"policy pack level: policy/config/{level}.json" in proc.stderr
    # The SDK is the provider's version, and the provider comes from the plugin cache, not PATH
    # (scripts/pulumi-env): neither warning a user cannot act on is printed.
    out = proc.stdout + proc.stderr
    assert "is expected to have version" not in out and "from $PATH" not in out, out


def parsed(folder: pathlib.Path) -> dict[str, dict]:
    return {str(p.relative_to(folder)): yaml.safe_load(p.read_text()) for p in sorted(folder.rglob("*.yaml"))}


def rendered_files(folder: pathlib.Path) -> dict[str, dict]:
    """The files the provider wrote, parsed, as the offline render shows them (tests/certificates.py as_rendered)."""
    found = parsed(folder)
    return dict(zip(found, as_rendered(found.values()), strict=True))


def test_up_matches_offline_render_then_no_changes_then_destroy(project: Project):
    project.select("dev")
    up = project.pulumi("up", "-s", "dev", "--yes", "--policy-pack", "policy", *policy_config("dev"))
    assert up.returncode == 0, up.stdout + up.stderr
    engine = rendered_files(project.root / "build" / "dev")
    offline = {render.manifest_path(m): m for m in render.render_stack_file(stack_file("dev"), "dev").manifests}
    # Same objects, same content, compared as parsed YAML (the provider orders keys its own way).
    assert sorted(engine) == sorted(offline)
    for path, manifest in offline.items():
        assert engine[path] == manifest, path
    outputs = json.loads(project.pulumi("stack", "output", "-s", "dev", "--json", check=True).stdout)
    assert outputs["totalDevices"] == 8 and outputs["kvBytesPerToken"] == 126_976

    # One pool at a time: the engine orders decode's update after prefill's (rollout.poolAtATime), through the
    # prefill pool's rolled-out barrier (a Stash that waits for every prefill Deployment: stacks/compose.py).
    state = json.loads(next((project.root / ".pulumi-state").rglob("dev.json")).read_text())
    by_name = {
        r["urn"].rsplit("::", 1)[1]: r
        for r in state["checkpoint"]["latest"]["resources"]
        if r["type"] == "kubernetes:apps/v1:Deployment"
    }
    [barrier] = [r for r in state["checkpoint"]["latest"]["resources"] if r["type"] == "pulumi:index:Stash"]
    assert barrier["urn"].endswith("::minimax-m27-prefill-rolled-out")
    assert barrier.get("dependencies") == [by_name["minimax-m27-prefill"]["urn"]], barrier
    assert barrier["urn"] in by_name["minimax-m27-decode"].get("dependencies", []), by_name["minimax-m27-decode"]
    # Day-1 weights: both engine pools come after the download Job (the provider waits for it to complete),
    # and the weights volume is kept on destroy like the compile caches.
    resources = state["checkpoint"]["latest"]["resources"]
    [job] = [r for r in resources if r["type"] == "kubernetes:batch/v1:Job"]
    for name in ("minimax-m27-prefill", "minimax-m27-decode"):
        assert job["urn"] in by_name[name].get("dependencies", []), by_name[name]
    [weights_pvc] = [
        r
        for r in resources
        if r["type"] == "kubernetes:core/v1:PersistentVolumeClaim" and r["urn"].endswith("minimax-m27-weights-pvc")
    ]
    assert weights_pvc.get("retainOnDelete") is True

    again = project.pulumi("up", "-s", "dev", "--yes", "--policy-pack", "policy", *policy_config("dev"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "+ " not in again.stdout.split("Resources:")[1] and "unchanged" in again.stdout
    preview = project.pulumi("preview", "-s", "dev", "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout + preview.stderr

    destroy = project.pulumi("destroy", "-s", "dev", "--yes")
    assert destroy.returncode == 0, destroy.stdout + destroy.stderr
    # storage.retainOnDelete (default true): the data volumes and their namespace stay; nothing else does.
    left = sorted(p.name for p in (project.root / "build" / "dev").rglob("*.yaml"))
    assert left == [
        "v1-namespace-default-rebel100.yaml",
        "v1-persistentvolumeclaim-rebel100-minimax-m27-decode-compile-cache.yaml",
        "v1-persistentvolumeclaim-rebel100-minimax-m27-prefill-compile-cache.yaml",
        "v1-persistentvolumeclaim-rebel100-model-weights.yaml",
    ], left


@pytest.fixture(scope="module")
def deployed(project: Project) -> Project:
    """dev deployed once: a state and a render that a refused change must leave as they are."""
    project.select("gate")
    (project.root / "Pulumi.gate.yaml").write_text(
        (project.root / "Pulumi.dev.yaml").read_text().replace("build/dev", "build/gate")
    )
    project.pulumi("up", "-s", "gate", "--yes", "--policy-pack", "policy", *policy_config("dev"), check=True)
    return project


def refused(project: Project, *config: tuple[str, str], level: str = "dev"):
    """Set config on the deployed stack, run `up`, and return (process, state changed, render changed)."""
    state, files = project.checkpoint("gate"), tree_digest(project.root / "build" / "gate")
    stack_yaml = (project.root / "Pulumi.gate.yaml").read_text()
    for key, value in config:
        project.pulumi("config", "set", "-s", "gate", "--path", key, "--", value, check=True)
    proc = project.pulumi(
        "up", "-s", "gate", "--yes", "--policy-pack", "policy", "--policy-pack-config", f"policy/config/{level}.json"
    )
    changed = (project.checkpoint("gate") != state, tree_digest(project.root / "build" / "gate") != files)
    (project.root / "Pulumi.gate.yaml").write_text(stack_yaml)
    return proc, changed


def test_config_gate_pp_with_dp(deployed: Project):
    proc, changed = refused(deployed, ("rebel100:prefill.dataParallelSize", "2"))
    assert proc.returncode != 0
    assert (
        "rebel100:prefill.pipelineParallelSize: pipeline parallel size 4 together with data parallel size 2"
        in proc.stdout + proc.stderr
    )
    assert changed == (False, False)


def test_config_gate_rds_budget(deployed: Project):
    proc, changed = refused(deployed, ("rebel100:kvTier.rdsMaxChunks", "4000"))
    assert proc.returncode != 0
    assert "RDS needs kvTier.rdsMaxChunks 4000" in proc.stdout + proc.stderr
    assert changed == (False, False)


def test_config_gate_refuses_an_override_of_a_generated_flag(deployed: Project):
    """The decode port set through extraArgs would pass the typed fields by; the gate reads overrides too."""
    proc, changed = refused(deployed, ("rebel100:decode.extraArgs[0]", "--port=8300"))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "rebel100:decode.extraArgs[0]: '--port=8300' redefines --port" in out and "Set decode.port instead" in out
    assert changed == (False, False)


def test_policy_rejects_what_the_gate_does_not_judge(deployed: Project):
    """Image hygiene of the images the gate's version facts do not read is the pack's alone: a :latest downloader
    image (its wait-for-weights init container runs in every engine pod) at the prod level is refused at apply time.
    (A :latest engine pin is the gate's since issue 38: refused before the program runs.)"""
    proc, changed = refused(deployed, ("rebel100:weights.downloaderImage", "python:latest"), level="prod")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "[mandatory]  image-tag-pinned" in out, out
    assert changed == (False, False)


def test_revision_bump_replaces_the_download_and_rolls_the_engines(deployed: Project):
    """A pinned revision is a new download Job (a replacement), then an update of both engine pools."""
    stack_yaml = (deployed.root / "Pulumi.gate.yaml").read_text()
    sha = "0123456789abcdef0123456789abcdef01234567"
    deployed.pulumi("config", "set", "-s", "gate", "--path", "rebel100:weights.revision", sha, check=True)
    preview = deployed.pulumi("preview", "-s", "gate", "--diff", "--policy-pack", "policy", *policy_config("dev"))
    (deployed.root / "Pulumi.gate.yaml").write_text(stack_yaml)
    out = preview.stdout
    assert preview.returncode == 0, out + preview.stderr
    assert "+-kubernetes:batch/v1:Job: (replace)" in out, out
    assert out.count("~ kubernetes:apps/v1:Deployment: (update)") == 2, out
    assert '"--revision"' in out or sha in out
    assert "[mandatory]" not in out


def test_up_against_s3_backend(project: Project):
    # Installed by `make venv` (moto[server] brings boto3): missing, this fails in CI instead of skipping.
    require(
        importable("boto3", "moto.server"), "boto3 or moto is not installed (requirements-dev.txt: run `make venv`)"
    )
    import boto3
    from moto.server import ThreadedMotoServer

    port = any_free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        credentials = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
        s3 = boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
        )
        s3.create_bucket(Bucket="pulumi-state")
        s3_project = Project(project.root, project.env["PATH"].split(":")[0])
        s3_project.env.update(credentials)
        s3_project.env["PULUMI_BACKEND_URL"] = (
            f"s3://pulumi-state?endpoint=127.0.0.1:{port}&disableSSL=true&s3ForcePathStyle=true&region=us-east-1"
        )
        s3_project.select("dev")
        up = s3_project.pulumi("up", "-s", "dev", "--yes", "--policy-pack", "policy", *policy_config("dev"))
        assert up.returncode == 0, up.stdout + up.stderr
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="pulumi-state").get("Contents", [])]
        checkpoint = [k for k in keys if k.endswith("/dev.json")]
        assert checkpoint, keys
        state = json.loads(s3.get_object(Bucket="pulumi-state", Key=checkpoint[0])["Body"].read())
        types = {r["type"] for r in state["checkpoint"]["latest"]["resources"]}
        assert "kubernetes:apps/v1:Deployment" in types
        s3_project.pulumi("destroy", "-s", "dev", "--yes", check=True)
    finally:
        server.stop()


def test_hf_token_is_a_secret_in_state_and_outputs(project: Project):
    """The token set with `config set --secret` is never in the checkpoint or an output; a render-mode stack does
    not render the Secret, whose data the provider would write to the render folder (docs/recovery.md)."""
    project.select("secret")
    (project.root / "Pulumi.secret.yaml").write_text(
        (project.root / "Pulumi.dev.yaml").read_text().replace("build/dev", "build/secret")
    )
    project.pulumi(
        "config", "set", "-s", "secret", "--secret", "rebel100:hfToken", "hf_e2e_not_a_real_token", check=True
    )
    assert "hf_e2e_not_a_real_token" not in (project.root / "Pulumi.secret.yaml").read_text()
    up = project.pulumi("up", "-s", "secret", "--yes", "--policy-pack", "policy", *policy_config("dev"), check=True)
    assert "the Secret hf-token is not rendered" in up.stdout, up.stdout[-3000:]
    state = next((project.root / ".pulumi-state").rglob("secret.json")).read_text()
    assert "hf_e2e_not_a_real_token" not in state
    outputs = project.pulumi("stack", "output", "-s", "secret", "--json", "--show-secrets", check=True).stdout
    assert "hf_e2e_not_a_real_token" not in outputs
    # The engines read it from the Secret the stack created, by reference.
    deployment = yaml.safe_load(next((project.root / "build" / "secret").rglob("*deployment*decode.yaml")).read_text())
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token", "optional": True}
    assert not list((project.root / "build" / "secret").rglob("v1-secret-rebel100-hf-token.yaml"))
    project.pulumi("destroy", "-s", "secret", "--yes", check=True)
