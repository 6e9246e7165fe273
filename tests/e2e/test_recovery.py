"""scripts/up and a stack lock left behind, with the real CLI on a render-mode stack (no cluster needed).

Pulumi's diy backend records who holds a lock (user, host, pid, time: pkg/backend/diy/lock.go). A lock whose
`pulumi` is gone from this host is cleared and the update runs; a lock of a live `pulumi` here, or of another
host, is named and left alone. tests/cluster/test_faults.py makes real dead locks (kill -9 mid-update).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.pulumi_project import Project, dead_pid

pytestmark = pytest.mark.e2e

STACK = "recovery"


def up(project: Project) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(project.root / "scripts" / "up"), STACK],
        cwd=project.root,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def deployed(project: Project) -> Project:
    (project.root / f"Pulumi.{STACK}.yaml").write_text(
        (project.root / "Pulumi.dev.yaml").read_text().replace("build/dev", f"build/{STACK}")
    )
    first = up(project)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert project.lock_dir(STACK).is_dir() and not list(
        project.lock_dir(STACK).iterdir()
    )  # where Pulumi locks this stack
    return project


def test_a_lock_of_a_pulumi_gone_from_this_host_is_cleared(deployed: Project):
    deployed.plant_lock(STACK, os.uname().nodename, dead_pid())
    proc = up(deployed)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "was locked by a pulumi that is gone (someone@" in proc.stderr and "clearing the lock" in proc.stderr
    assert not list(deployed.lock_dir(STACK).iterdir())


def test_a_lock_of_another_host_is_named_and_left_alone(deployed: Project):
    lock = deployed.plant_lock(STACK, "ci-runner-7", dead_pid())
    try:
        proc = up(deployed)
        assert proc.returncode != 0
        assert "is locked by someone@ci-runner-7 (pid" in proc.stderr and "another host" in proc.stderr, proc.stderr
        assert f"pulumi cancel -s {STACK} --yes" in proc.stderr
        assert lock.exists()
    finally:
        lock.unlink(missing_ok=True)


def test_a_lock_of_a_live_pulumi_is_named_and_left_alone(deployed: Project, tmp_path):
    holder = tmp_path / "pulumi"  # a process named pulumi that holds no lock of its own: it only waits
    shutil.copy(shutil.which("sleep"), holder)
    live = subprocess.Popen([str(holder), "600"])
    lock = deployed.plant_lock(STACK, os.uname().nodename, live.pid)
    try:
        proc = up(deployed)
        assert proc.returncode != 0
        assert f"is locked by a running pulumi (someone@{os.uname().nodename}, pid {live.pid}," in proc.stderr, (
            proc.stderr
        )
        assert lock.exists() and live.poll() is None
    finally:
        live.kill()
        live.wait()
        lock.unlink(missing_ok=True)
