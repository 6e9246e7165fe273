"""A damaged checkpoint with the real CLI on a render-mode stack (no cluster needed): `scripts/up` names the last good
copy Pulumi's file backend kept and the command that restores it, changes nothing, and that command restores and
deploys (stacks/checkpoint.py; docs/recovery.md, A damaged checkpoint)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.pulumi_project import Project

pytestmark = pytest.mark.e2e

STACK = "ckpt"


def up(project: Project, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(project.root / "scripts" / "up"), STACK, *flags],
        cwd=project.root,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def urns(project: Project) -> list[str]:
    exported = project.pulumi("stack", "export", "-s", STACK, check=True)
    return sorted(r["urn"] for r in json.loads(exported.stdout)["deployment"]["resources"])


def test_a_truncated_checkpoint_is_named_with_its_last_good_copy_and_restored_by_one_command(project: Project):
    (project.root / f"Pulumi.{STACK}.yaml").write_text(
        (project.root / "Pulumi.dev.yaml").read_text().replace("build/dev", f"build/{STACK}")
    )
    first = up(project)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    deployed = urns(project)
    state = project.root / ".pulumi-state" / ".pulumi"
    checkpoint = state / "stacks" / "rebel100-serving" / f"{STACK}.json"
    # What Pulumi 3.274 keeps beside the checkpoint (pkg/backend/diy/state.go).
    assert checkpoint.with_name(f"{STACK}.json.bak").is_file()
    backups = sorted((state / "backups" / "rebel100-serving" / STACK).glob(f"{STACK}.*.json"))
    assert len(backups) == 1 and backups[0].read_bytes() == checkpoint.read_bytes()
    assert list((state / "history" / "rebel100-serving" / STACK).glob(f"{STACK}-*.checkpoint.json"))

    damaged = checkpoint.read_bytes()[:5000]  # a write cut off: the file ends in the middle of the JSON
    checkpoint.write_bytes(damaged)
    refused = up(project)
    assert refused.returncode != 0
    assert "failed to load checkpoint" in refused.stderr  # Pulumi's own words, then ours
    assert (
        f"error: the checkpoint of stack '{STACK}', .pulumi-state/.pulumi/stacks/rebel100-serving/{STACK}.json, "
        f"is not valid JSON"
    ) in refused.stderr, refused.stderr
    assert (
        f"The last good copy is .pulumi-state/.pulumi/backups/rebel100-serving/{STACK}/{backups[0].name}"
        in refused.stderr
    )
    command = refused.stderr.strip().splitlines()[-1].strip()
    assert command == f"scripts/up {STACK} --restore-checkpoint"
    assert "Traceback" not in refused.stderr
    assert checkpoint.read_bytes() == damaged  # nothing was changed

    restored = up(project, *command.split()[2:])
    assert restored.returncode == 0, restored.stdout[-3000:] + restored.stderr[-3000:]
    assert "checkpoint restored from .pulumi-state/.pulumi/backups/" in restored.stderr
    assert urns(project) == deployed
    assert [p.read_bytes() for p in (project.root / ".pulumi-state" / "damaged").iterdir()] == [damaged]
    again = up(project)
    assert again.returncode == 0 and "checkpoint" not in again.stderr, again.stderr[-3000:]
