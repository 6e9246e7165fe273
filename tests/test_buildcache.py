"""scripts/buildcache.py: the one cache folder, lock, stage and rename of the four build scripts.

The builds themselves (Go, pip) take minutes to an hour cold; these tests drive the helper with small fills of their
own in a cache folder of their own (XDG_CACHE_HOME), and the scripts only through their `--check`, which never builds.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

PROJECT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = PROJECT / "scripts"
HELPER = SCRIPTS / "buildcache.py"

# scripts/ is no package: the module is loaded from its file (registered first, as its dataclass needs).
_spec = importlib.util.spec_from_file_location("rebel100_buildcache", HELPER)
assert _spec and _spec.loader
buildcache = sys.modules.setdefault("rebel100_buildcache", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(buildcache)

# A fill that records each run in $RUNS, waits $DELAY seconds, then makes bin/tool; $FAIL makes it fail halfway.
FILL = r"""
echo "$$" >> "$RUNS"
mkdir -p "$BUILDCACHE_STAGE/bin"
echo half > "$BUILDCACHE_STAGE/bin/part"
sleep "${DELAY:-0}"
[ -z "${FAIL:-}" ] || exit "$FAIL"
printf '#!/bin/sh\necho tool\n' > "$BUILDCACHE_STAGE/bin/tool"
chmod +x "$BUILDCACHE_STAGE/bin/tool"
"""


def helper(cache: pathlib.Path, *args: str, env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(HELPER), "build", "--name", "t", "--prefix", "tool-r1", "--executable", "bin/tool", *args],
        env={**os.environ, "XDG_CACHE_HOME": str(cache), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def build(cache: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    proc = helper(cache, *args, "--", "sh", "-c", FILL, env={"RUNS": str(cache / "runs"), **env})
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def root(cache: pathlib.Path) -> pathlib.Path:
    return cache / "rebel100-stack"


def runs(cache: pathlib.Path) -> int:
    path = cache / "runs"
    return len(path.read_text().split()) if path.exists() else 0


def test_a_key_is_the_prefix_and_the_digest_of_the_inputs_in_their_order(tmp_path):
    """The digest the scripts had before the helper: `cat FILES | sha256sum | cut -c1-8` (install-pulumi's), which is
    the Python scripts' sha256 updated file after file."""
    first, second = tmp_path / "b.go", tmp_path / "a.py"
    first.write_text("package main\n")
    second.write_text("print(1)\n")
    shell = subprocess.run(
        ["sh", "-c", 'cat "$@" | sha256sum | cut -c1-8', "-", str(first), str(second)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert buildcache.key("tool-r1", [first, second]) == f"tool-r1-{shell}"
    assert buildcache.key("tool-r1", [second, first]) != f"tool-r1-{shell}"  # the order given, never re-sorted
    assert buildcache.key("tool-r1") == "tool-r1"
    cli = subprocess.run(
        [sys.executable, str(HELPER), "key", "tool-r1", str(first), str(second)], capture_output=True, text=True
    )
    assert cli.stdout == f"tool-r1-{shell}\n"


def test_the_language_hosts_key_is_the_one_install_pulumi_had(tmp_path):
    """install-pulumi's key was `pulumi-V-k8s-V-host-` and the digest of langhost/main.go then langhost/*.py in the
    shell's glob order; a changed key would rebuild the toolchain (15 min) on every machine with a warm cache."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PULUMI_INSTALL_SKIP_PATH": "1"}
    env.pop("PULUMI_VERSION", None), env.pop("K8S_PROVIDER_VERSION", None)
    proc = subprocess.run([str(SCRIPTS / "install-pulumi"), "--check"], env=env, capture_output=True, text=True)
    assert proc.returncode == 1
    digest = subprocess.run(
        ["bash", "-c", f"cd {SCRIPTS} && cat langhost/main.go langhost/*.py | sha256sum | cut -c1-8"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert f"not built: {root(tmp_path)}/pulumi-3.274.1-k8s-4.25.0-host-{digest}\n" in proc.stderr


@pytest.mark.parametrize(
    "command, folder",
    [
        (["cluster", "build", "--check"], "cluster-k8s-"),
        (["consumers", "build", "--check", "gateway"], "consumers-gateway-r1-"),
        (["consumers-engine", "--check"], "engine-consumers-lmcache-"),
        (["consumers-engine", "vllm", "--check"], "engine-consumers-vllm-"),
    ],
)
def test_a_scripts_check_only_looks(tmp_path, command, folder):
    """--check in an empty cache names the folder it looked for, exits 1 and leaves nothing behind (no lock, no
    folder)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run([str(SCRIPTS / command[0]), *command[1:]], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"{root(tmp_path)}/{folder}" in proc.stderr, proc.stderr
    assert not root(tmp_path).exists() or list(root(tmp_path).iterdir()) == []


def test_a_build_publishes_a_complete_folder_once(tmp_path):
    first = build(tmp_path)
    assert first.returncode == 0, first.stderr
    folder = root(tmp_path) / "tool-r1"
    assert first.stdout == f"{folder}\n"
    assert (folder / "bin" / "tool").is_file() and os.access(folder / "bin" / "tool", os.X_OK)
    again = build(tmp_path)
    assert again.stdout == f"{folder}\n" and runs(tmp_path) == 1, "a built folder is reused, not rebuilt"
    check = helper(tmp_path, "--check").communicate(timeout=30)
    assert check[0] == f"{folder}\n"
    leftovers = sorted(p.name for p in root(tmp_path).iterdir())
    assert leftovers == [".t.lock", "tool-r1"], "no work folder or stage is left"


def test_two_checkouts_building_at_once_build_once(tmp_path):
    """The second waits on the lock, then finds the first one's folder and reuses it."""
    env = {"RUNS": str(tmp_path / "runs"), "DELAY": "2"}
    procs = [helper(tmp_path, "--", "sh", "-c", FILL, env=env) for _ in range(2)]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert {out for out, _ in outputs} == {f"{root(tmp_path) / 'tool-r1'}\n"}
    assert runs(tmp_path) == 1


def test_a_killed_build_leaves_no_folder_that_looks_built(tmp_path):
    """Killed in the middle of its fill (the whole process group, as a runner kills a job): the key's folder does not
    exist, --check says not built, and the next build removes the dead one's work folder and builds."""
    proc = helper(
        tmp_path,
        "--",
        "sh",
        "-c",
        FILL,
        env={"RUNS": str(tmp_path / "runs"), "DELAY": "30"},
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while not list(root(tmp_path).glob(".t.work.*/stage/bin/part")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(root(tmp_path).glob(".t.work.*/stage/bin/part")), "the fill never started"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not (root(tmp_path) / "tool-r1").exists()
    assert helper(tmp_path, "--check").wait(timeout=30) == 1
    assert list(root(tmp_path).glob(".t.work.*")), "the killed build's work folder is still there"
    after = build(tmp_path)
    assert after.returncode == 0, after.stderr
    assert list(root(tmp_path).glob(".t.work.*")) == [], "the next build removed it"
    assert (root(tmp_path) / "tool-r1" / "bin" / "tool").exists()


def test_a_failed_build_publishes_nothing_and_says_so(tmp_path):
    failed = build(tmp_path, FAIL="3")
    assert failed.returncode == 3 and failed.stdout == ""
    assert sorted(p.name for p in root(tmp_path).iterdir()) == [".t.lock"]


def test_a_build_without_what_it_promised_publishes_nothing(tmp_path):
    proc = helper(tmp_path, "--path", "share/data", "--", "sh", "-c", FILL, env={"RUNS": str(tmp_path / "runs")})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == ""
    assert "finished without share/data" in err
    assert not (root(tmp_path) / "tool-r1").exists()


def test_an_unfinished_folder_of_the_key_is_replaced(tmp_path):
    """A folder an older recipe left unfinished (say bin/ without the tool) is not built: a build replaces it."""
    stale = root(tmp_path) / "tool-r1" / "bin"
    stale.mkdir(parents=True)
    (stale / "old").write_text("x")
    assert build(tmp_path).returncode == 0
    assert sorted(p.name for p in stale.iterdir()) == ["part", "tool"]


def test_a_resumed_build_keeps_what_a_failed_one_finished(tmp_path):
    """scripts/cluster's builds resume: the binaries an interrupted build finished are not built again."""
    cache = buildcache.Cache("tool-r1", "t", executables=("bin/a", "bin/b"), root=tmp_path)
    made = []

    def fill(stage: pathlib.Path, work: pathlib.Path, fail: bool) -> None:
        (stage / "bin").mkdir(exist_ok=True)
        for name in ("a", "b"):
            if not (stage / "bin" / name).exists():
                if fail and name == "b":
                    raise SystemExit(2)
                (stage / "bin" / name).write_text("")
                (stage / "bin" / name).chmod(0o755)
                made.append(name)

    with pytest.raises(SystemExit):
        cache.build(lambda stage, work: fill(stage, work, True), resume=True)
    assert not cache.built() and (tmp_path / ".tool-r1.stage" / "bin" / "a").exists()
    assert cache.build(lambda stage, work: fill(stage, work, False), resume=True) == tmp_path / "tool-r1"
    assert made == ["a", "b"] and cache.built()
    assert not (tmp_path / ".tool-r1.stage").exists()
