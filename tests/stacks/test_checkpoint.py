"""stacks/checkpoint.py and `python -m stacks checkpoint`: a damaged file-backend checkpoint, its last good copy among
the ones Pulumi keeps (.bak, backups/, history/), and the restore (tests/e2e/test_checkpoint.py: with the real CLI)."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import subprocess
import sys

import pytest

from core.stackfile import PROJECT_ROOT
from stacks.checkpoint import StackState, explain

PROJECT = "rebel100-serving"
STACK = "prod-4p4d"


def checkpoint(resources: int, stack: str = STACK) -> bytes:
    latest = {"manifest": {"version": "v3.274.1"}, "resources": [{"urn": f"urn:{i}"} for i in range(resources)]}
    return json.dumps(
        {"version": 3, "checkpoint": {"stack": f"organization/{PROJECT}/{stack}", "latest": latest}}
    ).encode()


def write(path: pathlib.Path, content: bytes, mtime_s: int) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))
    return path


@pytest.fixture()
def state(tmp_path) -> StackState:
    return StackState(tmp_path, PROJECT, STACK)


def stacks(state: StackState) -> pathlib.Path:
    return state.root / ".pulumi" / "stacks" / PROJECT


def backups(state: StackState) -> pathlib.Path:
    return state.root / ".pulumi" / "backups" / PROJECT / STACK


def history(state: StackState) -> pathlib.Path:
    return state.root / ".pulumi" / "history" / PROJECT / STACK


def test_a_checkpoint_that_loads_or_none_is_not_damaged(state):
    assert state.damage() is None  # a new stack: nothing to restore
    write(stacks(state) / f"{STACK}.json", checkpoint(3), 100)
    assert state.damage() is None
    assert explain(state, "scripts/up x --restore-checkpoint") is None


@pytest.mark.parametrize(
    "content, problem",
    [
        (checkpoint(47)[:200], "is not valid JSON, truncated or garbled"),
        (b"", "is empty"),
        (b"[1, 2]", "not a Pulumi checkpoint"),
        (checkpoint(2, stack="dev"), "the checkpoint of another stack ('organization/rebel100-serving/dev')"),
    ],
)
def test_what_is_wrong_with_a_damaged_checkpoint(state, content, problem):
    write(stacks(state) / f"{STACK}.json", content, 100)
    assert problem in state.damage()


def test_the_last_good_copy_is_the_newest_that_loads(state):
    write(stacks(state) / f"{STACK}.json", checkpoint(47)[:100], 500)
    write(stacks(state) / f"{STACK}.json.bak", checkpoint(46)[:100], 490)  # newest copy, damaged too
    write(backups(state) / f"{STACK}.480.json", checkpoint(45), 480)  # the newest that loads
    write(history(state) / f"{STACK}-470.checkpoint.json", checkpoint(44), 470)
    write(history(state) / f"{STACK}-470.history.json", b"{}", 475)  # not a checkpoint copy
    write(backups(state) / f"{STACK}.485.json.attrs", b"{}", 485)  # blob attributes, not a copy
    good = state.last_good()
    assert good.path == backups(state) / f"{STACK}.480.json" and good.resources == 45


def test_gzipped_copies_are_read(state):
    write(stacks(state) / f"{STACK}.json.gz", gzip.compress(checkpoint(47))[:40], 500)
    write(backups(state) / f"{STACK}.480.json.gz", gzip.compress(checkpoint(45)), 480)
    assert "cannot be read" in state.damage() or "truncated" in state.damage()
    assert state.last_good().resources == 45


def test_restore_puts_the_good_copy_in_place_and_keeps_the_damaged_one(state):
    damaged = checkpoint(47)[:200]
    write(stacks(state) / f"{STACK}.json", damaged, 500)
    write(stacks(state) / f"{STACK}.json.attrs", b'{"md5": "of the damaged one"}', 500)
    good = write(backups(state) / f"{STACK}.480.json", checkpoint(45), 480)
    write(backups(state) / f"{STACK}.480.json.attrs", b'{"md5": "of the good one"}', 480)
    kept = state.restore(state.last_good())
    assert (stacks(state) / f"{STACK}.json").read_bytes() == good.read_bytes()
    assert (stacks(state) / f"{STACK}.json.attrs").read_bytes() == b'{"md5": "of the good one"}'
    assert kept.parent == state.root / "damaged" and kept.read_bytes() == damaged
    assert good.exists() and state.damage() is None
    assert [p.name for p in stacks(state).iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_the_message_names_the_damaged_file_the_copy_and_the_command(state):
    write(stacks(state) / f"{STACK}.json", checkpoint(47)[:200], 500)
    write(backups(state) / f"{STACK}.480.json", checkpoint(45), 480)
    message = explain(state, "scripts/up prod-4p4d --local-cluster --restore-checkpoint", relative_to=state.root)
    assert message.startswith(
        f"the checkpoint of stack 'prod-4p4d', .pulumi/stacks/{PROJECT}/{STACK}.json, is not valid JSON"
    )
    assert (
        f"The last good copy is .pulumi/backups/{PROJECT}/{STACK}/{STACK}.480.json (written 1970-01-01 00:08:00 "
        f"UTC, 45 resources)" in message
    )
    assert message.endswith("\n    scripts/up prod-4p4d --local-cluster --restore-checkpoint")


def test_without_a_good_copy_it_says_so_and_restores_nothing(state, tmp_path):
    write(stacks(state) / f"{STACK}.json", b"{", 500)
    write(stacks(state) / f"{STACK}.json.bak", b"", 490)
    assert state.last_good() is None
    assert "No copy of it that loads is left" in explain(state, "scripts/up x --restore-checkpoint")


def cli(*args: str, backend: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PULUMI_BACKEND_URL": backend}
    return subprocess.run(
        [sys.executable, "-m", "stacks", "checkpoint", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )


def test_the_command_line(state):
    backend = f"file://{state.root}?no_tmp_dir=true"
    assert cli(STACK, backend=backend).returncode == 0  # nothing there: a new stack
    write(stacks(state) / f"{STACK}.json", checkpoint(47)[:200], 500)
    proc = cli(STACK, backend=backend)
    assert proc.returncode == 1 and "No copy of it that loads is left" in proc.stderr
    write(backups(state) / f"{STACK}.480.json", checkpoint(45), 480)
    proc = cli(STACK, backend=backend)
    assert proc.returncode == 1 and proc.stderr.strip().endswith(f"scripts/up {STACK} --restore-checkpoint")
    proc = cli(STACK, "--restore", backend=backend)
    assert proc.returncode == 0 and "restored from" in proc.stderr, proc.stderr
    assert state.damage() is None
    proc = cli(STACK, backend="s3://bucket")
    assert proc.returncode == 2 and "not a file backend" in proc.stderr and "Traceback" not in proc.stderr
