"""Faults in the middle of `scripts/up prod-4p4d` on the local cluster, and the next `scripts/up` recovering alone.

Each test starts a change that rolls the engines (a pod annotation; engines 2 s slow to become Ready, rolled one at a
time, so that "mid-update" is a window of tens of seconds, not luck), waits until the new prefill pod exists, breaks
something, and then checks what a user would: the interrupted `up` ended and left no process of its own running; the
next `scripts/up` (what `make up` runs) converges with no manual step; the objects in the namespace are the stack's
resources, no more (no orphan, no duplicate) and no fewer; the retained volumes are the same objects as before.
The module deploys its own copy of the project once (fixture `site`) and checks that precondition; every test
leaves the stack converged, which the next one checks again before its fault.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Callable

import pytest
import yaml

from host.ports import any_free_port
from tests.cluster.conftest import PROJECT_ROOT, LocalCluster
from tests.prerequisites import require
from tests.pulumi_project import Project, copy_project, toolchain_dir
from tests.signals import default_sigint

pytestmark = pytest.mark.cluster

STACK = "prod-4p4d"
NS = "rebel100"
ROLE = "llm-d.ai/role"
READY_DELAY = "rebel100.local/ready-delay"  # kwok's Running -> Ready delay (cluster/site/kwok-stages.yaml)
FAULT = "rebel100.local/fault"  # a pod annotation whose new value rolls the engines
# Each engine 2 s from Running to Ready: the render rolls one pod at a time (RollingUpdate, maxSurge 0), so an update
# of the 8 engines is a window of over 30 s (prefill's 4, then decode's 4, each also scheduled anew) for the faults
# to land in, which they do within a second or two of the first new pod. At 20 s a pod (enough when Recreate replaced
# a role's pods at once) every update took minutes and the module over half an hour; at 5 s, 17 minutes.
SLOW = "2s"
TOKEN = "hf_PLANTEDinTheFaultsStack93b1c"  # planted: the last test greps for it
SECRET_MARKER = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value in state
UP_TIMEOUT = 1200
# Objects in the namespace that are not the stack's: made by Kubernetes, or the site's pre-loaded weights.
NOT_THE_STACKS = {
    ("ConfigMap", "kube-root-ca.crt"),
    ("ServiceAccount", "default"),
    ("PersistentVolumeClaim", "model-weights"),
}


@dataclasses.dataclass
class Site:
    project: Project
    cluster: LocalCluster


@dataclasses.dataclass
class Run:
    """A `scripts/up` started in the background (its own session, as a terminal would give it a process group)."""

    proc: subprocess.Popen
    out: pathlib.Path
    err: pathlib.Path

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def wait(self, timeout: float = UP_TIMEOUT) -> int:
        return self.proc.wait(timeout=timeout)


def set_config(project: Project, key: str, value) -> None:
    path = project.root / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    if isinstance(value, dict) and isinstance(document["config"].get(key), dict):
        document["config"][key] = {**document["config"][key], **value}
    else:
        document["config"][key] = value
    path.write_text(yaml.safe_dump(document))


def up(project: Project) -> subprocess.CompletedProcess:
    """`scripts/up STACK` to its end; its output is also kept in fault-logs/ (the planted-token test reads it)."""
    proc = subprocess.run(
        ["scripts/up", STACK], cwd=project.root, env=project.env, capture_output=True, text=True, timeout=UP_TIMEOUT
    )
    logs = project.root / "fault-logs"
    logs.mkdir(exist_ok=True)
    (logs / f"up-{len(list(logs.glob('up-*')))}.log").write_text(proc.stdout + proc.stderr)
    return proc


def start_up(project: Project, name: str, env: dict | None = None) -> Run:
    logs = project.root / "fault-logs"
    logs.mkdir(exist_ok=True)
    out, err = logs / f"{name}.out", logs / f"{name}.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(
            ["scripts/up", STACK],
            cwd=project.root,
            env=env or project.env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=default_sigint,
        )
    return Run(proc, out, err)


def engines(cluster: LocalCluster) -> list[dict]:
    return [
        p
        for p in cluster.get("pods", namespace=NS)
        if ROLE in p["metadata"].get("labels", {}) and not p["metadata"].get("deletionTimestamp")
    ]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def wait_until(what: str, check: Callable[[], bool], run: Run | None = None, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if run is not None and run.proc.poll() is not None:
            raise AssertionError(f"scripts/up ended ({run.proc.returncode}) before {what}:\n{run.output()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(1)


def start_rollout(site: Site, tag: str, name: str | None = None, env: dict | None = None) -> Run:
    """Change the engines' pod annotation to `tag` and start `scripts/up`; return once the first new pod exists
    (the prefill Deployment was updated, decode not yet: the update is in the middle)."""
    set_config(site.project, "rebel100:engine", {"podAnnotations": {READY_DELAY: SLOW, FAULT: tag}})
    run = start_up(site.project, name or tag, env)
    wait_until(
        f"a pod with {FAULT}={tag}",
        lambda: any(p["metadata"].get("annotations", {}).get(FAULT) == tag for p in engines(site.cluster)),
        run,
    )
    return run


# --- processes --------------------------------------------------------------------------------------------------


def proc_stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, command name, start time) of a live process, None when it is gone."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[1]), comm, fields[19]) if fields[0] not in "ZX" else None


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """Every live process below `root`: pid -> (command name, start time)."""
    table = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))):
            table[int(entry.name)] = stat
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, comm, started) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = (comm, started)
                frontier.append(pid)
    return found


def still_running(processes: dict[int, tuple[str, str]]) -> dict[int, str]:
    """Those of `processes` that still run (the same process: pid and start time)."""
    return {
        pid: comm
        for pid, (comm, started) in processes.items()
        if (stat := proc_stat(pid)) is not None and stat[2] == started
    }


def the_update(run: Run) -> dict[int, tuple[str, str]]:
    """The processes of the running update: the pulumi CLI, language host, program, providers, policy pack."""
    found = descendants(run.proc.pid)
    assert any(comm.startswith("pulumi-resource") for comm, _ in found.values()), found  # comm: 15 chars
    return found


def cli_pid(run: Run) -> int:
    found = descendants(run.proc.pid)
    pids = [
        pid
        for pid, (comm, _) in found.items()
        if comm == "pulumi" and b"up" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    ]
    assert len(pids) == 1, found
    return pids[0]


# --- the stack against the cluster ----------------------------------------------------------------------------


def stack_objects(project: Project) -> set[tuple[str, str, str]]:
    """(apiVersion, kind, name) of every namespaced Kubernetes object in the stack's state."""
    proc = project.pulumi("stack", "export", "-s", STACK, check=True)
    found = set()
    for resource in json.loads(proc.stdout)["deployment"].get("resources", []):
        outputs = resource.get("outputs") or {}
        meta = outputs.get("metadata") or {}
        if resource["type"].startswith("kubernetes:") and meta.get("namespace") == NS:
            found.add((outputs["apiVersion"], outputs["kind"], meta["name"]))
    return found


def namespace_objects(cluster: LocalCluster, types: set[tuple[str, str]]) -> set[tuple[str, str, str]]:
    """(apiVersion, kind, name) of the namespace's objects of those types (group-qualified: two CRD groups
    may have a kind of one name), less those that are not the stack's."""
    found = set()
    for api_version, kind in sorted(types):
        group, _, version = api_version.rpartition("/")
        resource = f"{kind.lower()}.{version}.{group}" if group else kind.lower()
        for item in cluster.get(resource, namespace=NS):
            if not item["metadata"].get("deletionTimestamp") and (kind, item["metadata"]["name"]) not in NOT_THE_STACKS:
                found.add((api_version, kind, item["metadata"]["name"]))
    return found


def retained_volumes(cluster: LocalCluster) -> dict[str, str]:
    """PVC name -> uid: the same uid after a fault is the same volume, with its data."""
    return {c["metadata"]["name"]: c["metadata"]["uid"] for c in cluster.get("persistentvolumeclaims", namespace=NS)}


def assert_converged(site: Site, tag: str, volumes: dict[str, str]) -> None:
    project, cluster = site.project, site.cluster
    pods = engines(cluster)
    assert sorted(p["metadata"]["labels"][ROLE] for p in pods) == ["decode"] * 4 + ["prefill"] * 4
    assert all(ready(p) and p["metadata"]["annotations"].get(FAULT) == tag for p in pods), [
        (p["metadata"]["name"], p["metadata"]["annotations"].get(FAULT), ready(p)) for p in pods
    ]
    wanted = stack_objects(project)
    live = namespace_objects(cluster, {(api_version, kind) for api_version, kind, _ in wanted})
    assert live == wanted, {
        "orphans (in the cluster, not in the stack)": sorted(live - wanted),
        "missing (in the stack, not in the cluster)": sorted(wanted - live),
    }
    assert retained_volumes(cluster) == volumes
    preview = project.pulumi(
        "preview",
        "-s",
        STACK,
        "--expect-no-changes",
        "--refresh",
        "--policy-pack",
        "policy",
        "--policy-pack-config",
        "policy/config/prod.json",
    )
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-4000:]


# --- the deployment the faults hit -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory, local_cluster: LocalCluster) -> Site:
    toolchain = require(toolchain_dir(), "no Pulumi toolchain (run `make toolchain`)")
    project = copy_project(tmp_path_factory.mktemp("cluster-faults") / "project", toolchain)
    project.env.update(
        KUBECONFIG=str(local_cluster.kubeconfig),
        PATH=f"{local_cluster.bin_dir}:{project.env['PATH']}",
        REBEL100_UNSCHEDULABLE_GRACE="15",
        REBEL100_UNREACHABLE_GRACE="30",
    )
    local_cluster.preload_weights()
    set_config(project, "rebel100:engine", {"podAnnotations": {READY_DELAY: "3s", FAULT: "deployed"}})
    project.select(STACK)
    project.pulumi("config", "set", "-s", STACK, "--secret", "rebel100:hfToken", TOKEN, check=True)
    site = Site(project, local_cluster)
    try:
        proc = up(project)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert_converged(site, "deployed", retained_volumes(local_cluster))  # the precondition of every test
        yield site
    finally:
        project.pulumi("destroy", "-s", STACK, "--yes", timeout=600)
        local_cluster.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=300, check=False)
        local_cluster.preload_weights()


# --- the faults ------------------------------------------------------------------------------------------------------


def test_sigkill_of_the_cli_mid_update(site: Site):
    """kill -9 of `pulumi` (a CI timeout, an OOM kill): scripts/up ends what the CLI started; the next
    scripts/up clears the lock the dead process left, resolves its pending operations and converges."""
    volumes = retained_volumes(site.cluster)
    run = start_rollout(site, "sigkill")
    update = the_update(run)
    os.kill(cli_pid(run), signal.SIGKILL)
    assert run.wait() != 0, "scripts/up ended 0 after the signal:\n" + run.output()[-3000:]
    assert still_running(update) == {}, "processes of the killed update still run"
    again = up(site.project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "was locked by a pulumi that is gone" in again.stderr and "clearing the lock" in again.stderr, again.stderr
    assert_converged(site, "sigkill", volumes)


def test_sigkill_of_up_and_the_cli_leaves_nothing_behind_the_next_up(site: Site):
    """Both scripts/up and `pulumi` killed at once (a runner killing the job's processes): the plugins they
    started are orphans until the next scripts/up, which ends them (the dead update's session) and converges."""
    volumes = retained_volumes(site.cluster)
    run = start_rollout(site, "sigkill-all")
    update = the_update(run)
    cli = cli_pid(run)  # found through scripts/up, so before it is killed (its children are then init's)
    os.kill(run.proc.pid, signal.SIGKILL)
    os.kill(cli, signal.SIGKILL)
    run.wait()
    again = up(site.project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "left by an earlier `pulumi up` that was killed" in again.stderr, again.stderr
    assert still_running(update) == {}, "processes of the killed update still run"
    assert_converged(site, "sigkill-all", volumes)


def test_ctrl_c_mid_update(site: Site):
    """Ctrl-C in a terminal (SIGINT to the foreground process group): one line, the update cancelled with no
    Python traceback, nothing of it left running; the next scripts/up converges."""
    volumes = retained_volumes(site.cluster)
    run = start_rollout(site, "ctrl-c")
    update = the_update(run)
    os.killpg(run.proc.pid, signal.SIGINT)
    assert run.wait() != 0, "scripts/up ended 0 after the signal:\n" + run.output()[-3000:]
    lines = [line for line in run.stderr().splitlines() if line.startswith("up: interrupted")]
    assert len(lines) == 1, run.stderr()[-3000:]
    no_traceback(run.output())
    assert still_running(update) == {}, "processes of the interrupted update still run"
    again = up(site.project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert_converged(site, "ctrl-c", volumes)


def test_sigint_of_the_cli_mid_update(site: Site):
    """SIGINT to `pulumi` itself: Pulumi cancels and stops its language host with SIGINT to the host's process
    group; the program ignores it and is ended by the host (scripts/langhost), so no KeyboardInterrupt traceback."""
    volumes = retained_volumes(site.cluster)
    run = start_rollout(site, "sigint")
    update = the_update(run)
    os.kill(cli_pid(run), signal.SIGINT)
    assert run.wait() != 0, "scripts/up ended 0 after the signal:\n" + run.output()[-3000:]
    no_traceback(run.output())
    assert still_running(update) == {}, "processes of the interrupted update still run"
    again = up(site.project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert_converged(site, "sigint", volumes)


def test_two_ups_at_once(site: Site):
    """The second is refused at once, naming the first (user, host, pid); the first completes."""
    volumes = retained_volumes(site.cluster)
    first = start_rollout(site, "two-ups", name="two-ups-first")
    pid = cli_pid(first)
    second = up(site.project)
    assert second.returncode != 0
    assert "is locked by a running pulumi" in second.stderr and f"pid {pid}," in second.stderr, second.stderr
    assert "clearing the lock" not in second.stderr
    assert first.wait() == 0, first.output()[-3000:]
    assert_converged(site, "two-ups", volumes)


def test_api_server_stopped_mid_update(site: Site):
    """The watch says the cluster is unreachable and ends the update within REBEL100_UNREACHABLE_GRACE (30 s here,
    60 s by default) plus Pulumi's cancellation; after the restart the next scripts/up converges."""
    volumes = retained_volumes(site.cluster)
    run = start_rollout(site, "apiserver")
    update = the_update(run)
    stopped = time.monotonic()
    subprocess.run(
        [
            str(PROJECT_ROOT / "scripts" / "cluster"),
            "component",
            "stop",
            "kube-apiserver",
            "--dir",
            str(site.cluster.dir),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        status = run.wait(timeout=600)
        took = time.monotonic() - stopped
    finally:
        subprocess.run(
            [
                str(PROJECT_ROOT / "scripts" / "cluster"),
                "component",
                "start",
                "kube-apiserver",
                "--dir",
                str(site.cluster.dir),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    assert status != 0, "scripts/up ended 0 with the API server stopped:\n" + run.output()[-3000:]
    assert "the cluster is unreachable" in run.stderr(), run.stderr()[-3000:]
    print(f"API server stopped: scripts/up ended after {took:.0f} s")
    assert still_running(update) == {}, "processes of the cancelled update still run"
    again = up(site.project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert_converged(site, "apiserver", volumes)


def test_the_watch_cancels_an_unschedulable_update_then_a_fixed_file_converges(site: Site):
    """A CPU request no node has (the placement check counts devices, not CPUs): the new prefill pod stays
    Pending, the watch cancels the update naming it; the stack file fixed, the next scripts/up converges."""
    volumes = retained_volumes(site.cluster)
    set_config(site.project, "rebel100:prefill", {"resources": {"cpu": "200", "memory": "256Gi"}})
    set_config(site.project, "rebel100:engine", {"podAnnotations": {READY_DELAY: SLOW, FAULT: "unschedulable"}})
    cancelled = up(site.project)
    assert cancelled.returncode != 0
    assert "has been unschedulable for 15 s" in cancelled.stderr and "Insufficient cpu" in cancelled.stderr, (
        cancelled.stderr[-3000:]
    )
    set_config(site.project, "rebel100:prefill", {"resources": {"cpu": "32", "memory": "256Gi"}})
    again = up(site.project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert_converged(site, "unschedulable", volumes)


def test_s3_backend_stopped_mid_update(site: Site, tmp_path):
    """The stack moved to an S3 backend (moto's server on 127.0.0.1), which is stopped in the middle of an
    update and started again: the update fails, the last checkpoint is still readable, the next scripts/up
    converges (clearing the lock the failed update could not delete)."""
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    port = any_free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    exported = tmp_path / "state.json"
    exported.write_text(site.project.pulumi("stack", "export", "-s", STACK, check=True).stdout)
    s3 = copy.copy(site.project)
    s3.env = {
        **site.project.env,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "PULUMI_BACKEND_URL": (
            f"s3://pulumi-state?endpoint=127.0.0.1:{port}&disableSSL=true&s3ForcePathStyle=true&region=us-east-1"
        ),
    }
    try:
        boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket="pulumi-state")
        s3.pulumi("stack", "select", STACK, "--create", check=True)
        s3.pulumi("stack", "import", "-s", STACK, "--file", str(exported), check=True)
        on_s3 = Site(s3, site.cluster)
        volumes = retained_volumes(site.cluster)
        run = start_rollout(on_s3, "s3", env=s3.env)
        update = the_update(run)
        server.stop()
        try:
            status = run.wait(timeout=600)
        finally:
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)  # the same in-process store
            server.start()
        assert status != 0, run.output()[-3000:]
        no_traceback(run.output())
        assert still_running(update) == {}, "processes of the failed update still run"
        checkpoint = json.loads(s3.pulumi("stack", "export", "-s", STACK, check=True).stdout)
        assert checkpoint["deployment"]["resources"], "the last checkpoint is not readable"
        again = up(s3)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert_converged(on_s3, "s3", volumes)
        exported.write_text(s3.pulumi("stack", "export", "-s", STACK, check=True).stdout)
        site.project.pulumi("stack", "import", "-s", STACK, "--file", str(exported), check=True)  # back for teardown
    finally:
        server.stop()


def test_the_planted_token_is_only_ciphertext(site: Site):
    """After every fault above, the token set with `config set --secret` is in the cluster's Secret (where the
    engines read it) and nowhere in plain text: not in the stack file, any checkpoint or backup of the state,
    nor the output of any `scripts/up` of this module."""
    secret = site.cluster.get("secret/hf-token", namespace=NS)
    assert base64.b64decode(secret["data"]["token"]).decode() == TOKEN
    encoded = base64.b64encode(TOKEN.encode()).decode()
    files = [
        p for folder in (".pulumi-state", "fault-logs") for p in (site.project.root / folder).rglob("*") if p.is_file()
    ]
    files.append(site.project.root / f"Pulumi.{STACK}.yaml")
    leaks = [str(p) for p in files if TOKEN in (text := p.read_bytes().decode("utf-8", "replace")) or encoded in text]
    assert leaks == []
    checkpoint = next(p for p in (site.project.root / ".pulumi-state").rglob(f"{STACK}.json"))
    assert SECRET_MARKER in checkpoint.read_text()
