"""Where the time of the user's commands goes: `make bench` (not part of the tests).

Sections (each command a fresh process, as a user runs it; median of REPEATS runs, wall and CPU):
  floor     `python -m stacks check prod-4p4d` against the import floor: a process that only imports
            what check needed while its render ran under Pulumi's mock runtime (pulumi, the
            pulumi_kubernetes modules the stack uses, pulumi_policy, pydantic, yaml), and against the
            pure floor (pydantic, yaml: what it imports from outside now); then the modules check
            imports beyond the pure floor, per package.
  cluster   with the toolchain and the local control plane built: the PR check (`scripts/preview
            prod-4p4d`, the pack at the prod level) and a no-op `scripts/up prod-4p4d` (refresh
            included) on an instance of the local cluster of its own, on a copy of the project, with
            their parts timed apart (environment, CLI start, program, pack, provider) and the API
            requests the apiserver served during each (its `apiserver_request_total` counter).
  scale     (`--scale`) render and check of prod-4p4d and of generated stacks of 16, 64, 256 and 1024 pools,
            and with the toolchain, on each (render mode to a scratch folder: no pack, no cluster): the
            preview of the new stack, its first `up`, then with nothing to change a preview and a
            `pulumi up --skip-preview`, and the dependency edges its state records.
  requests  with the router programs, the simulator, the gateway role and the control plane built: requests/s and
            p50/p99 latency of decode-only completions through gateway role -> EPP -> P/D sidecar -> simulator, and of
            the same requests sent to a decode simulator directly (from inside the site's network), at 1 and 16
            concurrent clients, on a local site of its own; the difference is the routing overhead. Passes:
            saturated (engines answer at once), paced full (a 100 ms engine turn, 16 clients on the stack's 16
            decode ranks of one sequence), P/D requests (new long prompts: a prefill leg and a decode leg), then,
            on a second site, paced with room (two sequences per decode rank), held to the overhead targets.
  agentic   with the same programs: a coding agent's sessions (sitetests/agentic.py: 32 by default, a shared
            3000-token system prompt, a context growing every turn, tool pauses, streamed answers), one seeded trace
            replayed under each routing option on a site of its own (`--routing`: load only, the stack as rendered,
            the precise scorer, the oracle that pins each session through the router and straight to the engines;
            on request the others of `routing_options`), the engines' time to first token growing with what they
            have not cached; per option the engines' own hit rate, TTFT p50/p99, prompt tokens a second and the
            sessions that moved, then TTFT by turn.
Timings on a shared machine are noisy: the figures print the machine and its load (`uptime`).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import itertools
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Literal

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = (16, 64, 256, 1024)
# Above this many pools the plain preview (checkpoints serialised after every step, the square of the stack) is not
# run: 1024 pools would take minutes of it.
PLAIN_PREVIEW_MAX_POOLS = 256
NAN = float("nan")
PYTHON = sys.executable
# What `python -m stacks check` cannot do without: the SDKs, the pulumi_kubernetes modules the program
# uses, the pack's SDK, the schema and YAML libraries.
FLOOR_MODULES = (
    "pulumi",
    "pulumi_kubernetes.apps.v1",
    "pulumi_kubernetes.batch.v1",
    "pulumi_kubernetes.core.v1",
    "pulumi_kubernetes.meta.v1",
    "pulumi_kubernetes.networking.v1",
    "pulumi_kubernetes.policy.v1",
    "pulumi_kubernetes.rbac.v1",
    "pulumi_kubernetes.apiextensions",
    "pulumi_policy",
    "pydantic",
    "yaml",
)
FLOOR = [PYTHON, "-c", "import " + ", ".join(FLOOR_MODULES)]
# What check imports from outside since its render is pure (objects/, no Pulumi): the schema and YAML libraries.
PURE_FLOOR = [PYTHON, "-c", "import pydantic, yaml"]
CHECK = [PYTHON, "-m", "stacks", "check", "prod-4p4d"]
# The same check without the strict validator's remembered verdicts (stacks/validate.py): a first run, or a
# render changed in every object.
CHECK_COLD = ["env", "REBEL100_VALIDATE_CACHE=0", *CHECK]


# --- measuring -------------------------------------------------------------------------------


def run_once(command: list[str], cwd: pathlib.Path = ROOT, env: dict | None = None) -> tuple[float, float, float]:
    """(wall s, CPU s of the process and its children, peak MiB) of one run; exit 0 or 1 expected."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(command: list[str], repeats: int, **kwargs) -> tuple[float, float, float]:
    """Median wall s, median CPU s and the largest peak MiB of `repeats` runs."""
    runs = [run_once(command, **kwargs) for _ in range(repeats)]
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), max(r[2] for r in runs))


def interleaved(commands: dict[str, list[str]], repeats: int, **kwargs) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) of each command, run in turns so that a burst of load hits them alike."""
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            runs[name].append(run_once(command, **kwargs))
    return {
        name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for name, rs in runs.items()
    }


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def header(title: str) -> None:
    print(f"\n== {title} ({load()})")


# --- check against the import floor ----------------------------------------------------------


def imported(command: list[str]) -> dict[str, int]:
    """Module -> its own import time in µs (`-X importtime`) of one run of `command`."""
    proc = subprocess.run([command[0], "-X", "importtime", *command[1:]], cwd=ROOT, capture_output=True, text=True)
    modules = {}
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, _, name = line.removeprefix("import time:").split("|")
            modules[name.strip()] = int(self_us)
    return modules


def floor_section(repeats: int) -> None:
    header(f"`python -m stacks check prod-4p4d` against the import floor, median of {repeats}")
    run_once(CHECK)  # the verdicts of this render remembered, as after any earlier check of it
    times = interleaved(
        {
            "floor": FLOOR,
            "pure floor (pydantic, yaml)": PURE_FLOOR,
            "check": CHECK,
            "check, no remembered verdicts": CHECK_COLD,
        },
        repeats,
    )
    for name, (wall, cpu) in times.items():
        print(f"{name:<30} wall {wall:6.2f} s   cpu {cpu:6.2f} s")
    for name in ("check", "check, no remembered verdicts"):
        for floor_name in ("floor", "pure floor (pydantic, yaml)"):
            print(
                f"{name} / {floor_name}: wall {times[name][0] / times[floor_name][0]:.2f}x, "
                f"cpu {times[name][1] / times[floor_name][1]:.2f}x"
            )
    floor, check = imported(PURE_FLOOR), imported(CHECK)
    pulumi_modules = [name for name in check if name.split(".")[0] in ("pulumi", "pulumi_kubernetes", "pulumi_policy")]
    extra = {name: us for name, us in check.items() if name not in floor}
    by_package = collections.Counter()
    for name, us in extra.items():
        by_package[name.split(".")[0]] += us
    print(
        f"modules: pure floor {len(floor)}, check {len(check)} (Pulumi SDK modules: {len(pulumi_modules)}); "
        f"{len(extra)} beyond the pure floor, their own import time {sum(extra.values()) / 1000:.0f} ms (one run):"
    )
    for package, us in by_package.most_common(12):
        count = sum(1 for name in extra if name.split(".")[0] == package)
        print(f"  {package:<28} {count:4} modules {us / 1000:7.1f} ms")


# --- preview and no-op up on the local cluster ------------------------------------------------


def checked_dir(*command: str) -> str | None:
    proc = subprocess.run(list(command), capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if proc.returncode == 0 and lines and os.path.isdir(lines[-1]) else None


def free_base_port() -> int:
    """A base port with the 6 ports after it free, below the ephemeral range (see scripts/cluster)."""
    sys.path.insert(0, str(ROOT))  # the project's host package (this file runs as a script)
    from host.ports import first_free_block

    found = first_free_block(range(23400, 32000, 10), 6)
    if found is None:
        raise SystemExit("no free ports for a local cluster")
    return found


def copy_project(scratch: pathlib.Path) -> pathlib.Path:
    project = scratch / "project"
    shutil.copytree(
        ROOT,
        project,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".pulumi-*", ".cluster", "build", "tests", "benchmarks", "__pycache__"
        ),
    )
    (project / ".venv").symlink_to(ROOT / ".venv")
    for stack_file in project.glob("Pulumi.*.yaml"):  # its own passphrase: drop the recorded salts
        lines = stack_file.read_text().splitlines(keepends=True)
        stack_file.write_text("".join(line for line in lines if not line.startswith("encryptionsalt:")))
    return project


def api_requests(kubectl: str, kubeconfig: str) -> int:
    """Requests the apiserver has served so far (sum of apiserver_request_total)."""
    text = subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "get", "--raw", "/metrics"], capture_output=True, text=True, check=True
    ).stdout
    return int(
        sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("apiserver_request_total{"))
    )


def counted(command: list[str], repeats: int, project: pathlib.Path, env: dict, kubectl: str, kubeconfig: str):
    """Median wall and CPU of `command`, and the API requests of one run (the last; the count of a
    run includes the kubectl call that reads the counter, 1 request)."""
    runs, requests = [], 0
    for _ in range(repeats):
        before = api_requests(kubectl, kubeconfig)
        runs.append(run_once(command, cwd=project, env=env))
        requests = api_requests(kubectl, kubeconfig) - before - 1
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), requests


def counted_in_turns(
    commands: dict[str, tuple[list[str], dict]], repeats: int, project: pathlib.Path, kubectl: str, kubeconfig: str
) -> dict[str, tuple[float, float, int]]:
    """`counted` of several commands (each with its environment), run in turns so that a burst of load hits them
    alike: a wrapper and the bare CLI it drives are compared within one run."""
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    requests: dict[str, int] = {}
    for _ in range(repeats):
        for name, (command, env) in commands.items():
            before = api_requests(kubectl, kubeconfig)
            runs[name].append(run_once(command, cwd=project, env=env))
            requests[name] = api_requests(kubectl, kubeconfig) - before - 1
    return {
        name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs), requests[name])
        for name, rs in runs.items()
    }


# The generated stack the PR check is also timed on (render mode: no cluster of 128 nodes needed), with the pack.
PR_CHECK_POOLS = 256


def cluster_section(repeats: int, bin_dir: str, cluster_bin: str) -> None:
    header(f"PR check and no-op up of prod-4p4d on a local cluster of its own, median of {repeats}")
    with tempfile.TemporaryDirectory(prefix="rebel100-bench-") as scratch_name:
        scratch = pathlib.Path(scratch_name)
        project = copy_project(scratch)
        cluster_dir = scratch / "cluster"
        start = subprocess.run(
            [str(ROOT / "scripts" / "cluster"), "start", "--dir", str(cluster_dir), "--port", str(free_base_port())],
            capture_output=True,
            text=True,
        )
        if start.returncode != 0:
            raise SystemExit(f"scripts/cluster start failed:\n{start.stderr}")
        kubeconfig = start.stdout.strip().splitlines()[-1]
        kubectl = os.path.join(cluster_bin, "kubectl")
        try:
            env = {
                **os.environ,
                "KUBECONFIG": kubeconfig,
                "PATH": f"{cluster_bin}:{os.environ['PATH']}",
                "PULUMI_HOME": str(project / ".pulumi-home"),
                "PULUMI_CONFIG_PASSPHRASE": "bench",
            }
            env.pop("PULUMI_BACKEND_URL", None)
            first = subprocess.run(["scripts/up", "prod-4p4d"], cwd=project, env=env, capture_output=True, text=True)
            if first.returncode != 0:
                raise SystemExit(f"scripts/up prod-4p4d failed:\n{first.stdout}\n{first.stderr}")
            pulumi_env = ". scripts/pulumi-env && "
            pack = "--policy-pack policy --policy-pack-config policy/config/prod.json"
            # What scripts/preview and scripts/up's preview set (PULUMI_SKIP_CHECKPOINTS, GOGC); the bare CLI rows get
            # them too, so that the ratio is the wrapper's own cost.
            as_wrapper = wrapper_settings()
            skip = {**env, **as_wrapper}
            # A generated stack of PR_CHECK_POOLS pools, rendered to a folder (no cluster), previewed new.
            big = generated_stack(PR_CHECK_POOLS, project).name.removeprefix("Pulumi.").removesuffix(".yaml")
            render_env = {**env, "KUBECONFIG": ""}
            headline = {
                "PR check: scripts/preview prod-4p4d": (["scripts/preview", "prod-4p4d"], env),
                "  bare CLI: pulumi preview with the pack": (
                    ["bash", "-c", f"{pulumi_env}pulumi preview -s prod-4p4d --non-interactive {pack}"],
                    skip,
                ),
                "no-op up: scripts/up prod-4p4d": (["scripts/up", "prod-4p4d"], env),
                "  bare CLI: preview --refresh with the pack": (
                    ["bash", "-c", f"{pulumi_env}pulumi preview -s prod-4p4d --refresh --non-interactive {pack}"],
                    skip,
                ),
                f"PR check, {PR_CHECK_POOLS} pools: scripts/preview": (["scripts/preview", big], render_env),
                f"  bare CLI, {PR_CHECK_POOLS} pools: pulumi preview with the pack": (
                    ["bash", "-c", f"{pulumi_env}pulumi preview -s {big} --non-interactive {pack}"],
                    {**render_env, **as_wrapper},
                ),
            }
            subprocess.run(
                ["bash", "-c", f"{pulumi_env}pulumi stack select {big} --create --non-interactive"],
                cwd=project,
                env=render_env,
                capture_output=True,
                check=True,
            )
            parts = {
                "  . scripts/pulumi-env (toolchain, backend)": ["bash", "-c", pulumi_env + "true"],
                "  pulumi CLI start (pulumi stack ls)": ["bash", "-c", pulumi_env + "pulumi stack ls >/dev/null"],
                "  the objects alone (stacks render, no Pulumi)": [
                    PYTHON,
                    "-m",
                    "stacks",
                    "render",
                    "prod-4p4d",
                    "--out",
                    str(scratch / "render"),
                ],
                "  secrets check (stacks secrets)": [PYTHON, "-m", "stacks", "secrets", "prod-4p4d"],
                # What the language host runs in the virtualenv (scripts/langhost): About (once per command) and the
                # installed packages with their plugin files (GetRequiredPackages, once per pass).
                "  about.py (language host, About)": [PYTHON, "-c", (ROOT / "scripts/langhost/about.py").read_text()],
                "  packages.py (language host, per pass)": [
                    PYTHON,
                    "-c",
                    (ROOT / "scripts/langhost/packages.py").read_text(),
                ],
                # The program's imports (the Pulumi SDK, the provider SDK's Provider, the components and the config
                # schema), without running it.
                "  the program's imports": [PYTHON, "-c", "import stacks.compose, stacks.program"],
                # The pack's imports and policies, without serving (policy/__main__.py serves until the engine
                # stops it).
                "  the pack's start (imports, policies)": [
                    PYTHON,
                    "-c",
                    "import pulumi_policy; from policy import catalog, pack; pack.policies()",
                ],
                "  preview without the pack": [
                    "bash",
                    "-c",
                    pulumi_env + "pulumi preview -s prod-4p4d --non-interactive",
                ],
                "  preview --refresh without the pack": [
                    "bash",
                    "-c",
                    pulumi_env + "pulumi preview -s prod-4p4d --refresh --non-interactive",
                ],
                "  preflight (stacks preflight)": [PYTHON, "-m", "stacks", "preflight", "prod-4p4d"],
                "  placement (stacks placement)": [PYTHON, "-m", "stacks", "placement", "prod-4p4d"],
            }
            print(f"{'command':<62}{'wall s':>8}{'cpu s':>8}{'API requests':>14}")
            found = counted_in_turns(headline, repeats, project, kubectl, kubeconfig)
            for label, (wall, cpu, requests) in found.items():
                print(f"{label:<62}{wall:>8.2f}{cpu:>8.2f}{requests:>14}")
            labels = list(found)
            for wrapper, bare in zip(labels[::2], labels[1::2], strict=True):
                (w_wall, w_cpu, _), (b_wall, b_cpu, _) = found[wrapper], found[bare]
                print(
                    f"  the wrapper's overhead, {wrapper.split(':')[0]} / its bare CLI: wall {w_wall / b_wall:.2f}x, "
                    f"cpu {w_cpu / b_cpu:.2f}x"
                )
            for label, command in parts.items():
                wall, cpu, requests = counted(command, repeats, project, env, kubectl, kubeconfig)
                print(f"{label:<62}{wall:>8.2f}{cpu:>8.2f}{requests:>14}")
        finally:
            subprocess.run([str(ROOT / "scripts" / "cluster"), "stop", "--dir", str(cluster_dir)], capture_output=True)


# --- scale -----------------------------------------------------------------------------------


def wrapper_settings() -> dict[str, str]:
    """The environment scripts/preview and scripts/up's preview give the CLI beyond the user's (stacks/deploy/)."""
    sys.path.insert(0, str(ROOT))  # the project's packages (this file runs as a script)
    from stacks.deploy.cli import go_gc_env

    return {"PULUMI_SKIP_CHECKPOINTS": "true", **go_gc_env()}


def generated_stack(pools: int, folder: pathlib.Path) -> pathlib.Path:
    """A stack file with `pools` pools: pools/2 groups, each with one prefill and one decode pool; rendered to
    build/bench-<pools> of the project it runs in (render mode: the engine's work without a cluster)."""
    groups = pools // 2
    config = yaml.safe_load((ROOT / "Pulumi.prod-4p4d.yaml").read_text())["config"]
    config["rebel100:placement"] = {"groups": groups}
    config["rebel100:prefill"] = {"replicas": groups}
    config["rebel100:decode"] = {**config.get("rebel100:decode", {}), "replicas": groups}
    config["rebel100:hardware"] = {"nodes": groups}
    config["rebel100:renderDirectory"] = f"build/bench-{pools}"
    path = folder / f"Pulumi.bench-{pools}.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def count_objects(folder: pathlib.Path) -> int:
    return sum(1 for _ in folder.rglob("*.yaml"))


def count_pools(folder: pathlib.Path) -> int:
    """Engine Deployments (prefill and decode pools) in a render."""
    return sum(1 for p in folder.rglob("apps_v1-deployment-*.yaml") if "-prefill" in p.name or "-decode" in p.name)


@dataclasses.dataclass
class EngineScale:
    """The engine's part of one stack: (median wall s, median CPU s of the whole process tree) of each command,
    and what its state holds. CPU is what to compare on a loaded machine: load stretches the wall time."""

    resources: int = 0  # in the state after the first up, the stack and the provider included
    edges: int = 0  # dependency edges in that state (each resource's `dependencies`)
    # the new stack, as scripts/preview and scripts/up run it (PULUMI_SKIP_CHECKPOINTS)
    preview: tuple[float, float] = (NAN, NAN)
    # the same with the CLI's defaults (a checkpoint serialised per step)
    plain_preview: tuple[float, float] = (NAN, NAN)
    first_up: tuple[float, float] = (NAN, NAN)  # one run, not a median: creates everything (setup for the next two)
    noop_preview: tuple[float, float] = (NAN, NAN)  # deployed, nothing to change: the pass of a no-op scripts/up
    noop_up: tuple[float, float] = (NAN, NAN)  # `pulumi up --yes --skip-preview`, nothing to change (checkpoints on)


def scale_project(scratch: pathlib.Path) -> pathlib.Path:
    project = scratch / "project"
    if not project.exists():
        copy_project(scratch)
        (project / "state").mkdir()
    return project


def engine_scale(
    stack_path: pathlib.Path, scratch: pathlib.Path, bin_dir: str, repeats: int, pools: int
) -> EngineScale:
    """The engine's part of the stack on a copy of the project (file backend of its own, render mode, no pack)."""
    project = scale_project(scratch)
    name = stack_path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    lines = stack_path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("encryptionsalt:")]
    (project / f"Pulumi.{name}.yaml").write_text("".join(kept))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PULUMI_HOME": str(project / ".pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{project / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "bench",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "KUBECONFIG": "",
    }
    env.pop("PULUMI_SKIP_CHECKPOINTS", None)
    skip = {**env, "PULUMI_SKIP_CHECKPOINTS": "true"}  # what scripts/preview and scripts/up's preview set
    pulumi = ["pulumi", "-s", name, "--non-interactive"]
    subprocess.run(
        ["pulumi", "stack", "select", name, "--create", "--non-interactive"],
        cwd=project,
        env=env,
        capture_output=True,
        check=True,
    )
    found = EngineScale()
    found.preview = measure(["pulumi", "preview", *pulumi[1:]], repeats, cwd=project, env=skip)[:2]
    if pools <= PLAIN_PREVIEW_MAX_POOLS:
        found.plain_preview = measure(["pulumi", "preview", *pulumi[1:]], repeats, cwd=project, env=env)[:2]
    # The first up creates every object; its checkpoints are of no use to a benchmark (the state is thrown away).
    found.first_up = run_once(["pulumi", "up", "--yes", "--skip-preview", *pulumi[1:]], cwd=project, env=skip)[:2]
    state = json.loads(next((project / "state").rglob(f"{name}.json")).read_text())
    resources = state["checkpoint"]["latest"]["resources"]
    found.resources = len(resources)
    found.edges = sum(len(r.get("dependencies") or []) for r in resources)
    found.noop_preview = measure(
        ["pulumi", "preview", "--expect-no-changes", *pulumi[1:]], repeats, cwd=project, env=skip
    )[:2]
    found.noop_up = measure(["pulumi", "up", "--yes", "--skip-preview", *pulumi[1:]], repeats, cwd=project, env=env)[:2]
    return found


def scale_section(repeats: int, sizes: list[int], bin_dir: str | None) -> None:
    header(f"render and check as stacks grow, and the engine's preview and no-op up, median of {repeats}")
    rows = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = pathlib.Path(scratch_name)
        cases = [("prod-4p4d", ROOT / "Pulumi.prod-4p4d.yaml", 2)] + [
            (f"{n} pools", generated_stack(n, scratch), n) for n in sizes
        ]
        for label, path, pools in cases:
            out = scratch / f"render-{label.replace(' ', '-')}"
            render_s, _, render_mib = measure(
                [PYTHON, "-m", "stacks", "render", "--config-file", str(path), "--out", str(out)], repeats
            )
            check_s, _, check_mib = measure([PYTHON, "-m", "stacks", "check", "--config-file", str(path)], repeats)
            engine = EngineScale()
            if bin_dir and label != "prod-4p4d":
                engine = engine_scale(path, scratch, bin_dir, repeats, pools)
            rows.append((label, count_pools(out), count_objects(out), render_s, render_mib, check_s, check_mib, engine))
            print(f"  {label}: done ({load()})", flush=True)
    print(
        f"{'stack':<11}{'pools':>6}{'objects':>8}{'render s':>9}{'MiB':>5}{'check s':>8}{'MiB':>5}"
        f"{'resources':>10}{'edges':>7}{'/res':>6}"
    )
    for label, pools, objects, render_s, render_mib, check_s, check_mib, e in rows:
        per = e.edges / e.resources if e.resources else NAN
        print(
            f"{label:<11}{pools:>6}{objects:>8}{render_s:>9.2f}{render_mib:>5.0f}{check_s:>8.2f}{check_mib:>5.0f}"
            f"{e.resources:>10}{e.edges:>7}{per:>6.2f}"
        )
    generated = [r for r in rows if r[0] != "prod-4p4d"]
    commands = [
        ("preview", "preview (new stack, as scripts/preview runs it)"),
        ("plain_preview", "plain preview (the CLI's defaults)"),
        ("first_up", "first up (one run)"),
        ("noop_preview", "no-op preview (deployed, nothing to change)"),
        ("noop_up", "no-op up (pulumi up --skip-preview)"),
    ]
    print(f"{'wall s / cpu s':<46}" + "".join(f"{f'{r[1]} pools':>16}" for r in generated))
    for field, label in commands:
        print(
            f"{label:<46}"
            + "".join(f"{getattr(r[7], field)[0]:>8.2f}{getattr(r[7], field)[1]:>8.2f}" for r in generated)
        )

    def growth(e0, e1, extra_pools: int, field: str) -> str:
        (w0, u0), (w1, u1) = getattr(e0, field), getattr(e1, field)
        return f"{1000 * (w1 - w0) / extra_pools:.0f}/{1000 * (u1 - u0) / extra_pools:.0f}"

    def cost_per_resource(e, field: str) -> str:
        wall, cpu = getattr(e, field)
        return f"{1000 * wall / e.resources:.1f}/{1000 * cpu / e.resources:.1f}"

    # Linear growth = a constant cost per extra pool on top of a fixed start-up (interpreter, imports, CLI).
    for (_, p0, _, t0, _, c0, _, e0), (_, p1, _, t1, _, c1, _, e1) in itertools.pairwise(generated):
        per_pool = functools.partial(growth, e0, e1, p1 - p0)  # this pair's, bound now
        print(
            f"growth {p0:>4} -> {p1:>4} pools, ms per extra pool: render {1000 * (t1 - t0) / (p1 - p0):.1f}, "
            f"check {1000 * (c1 - c0) / (p1 - p0):.1f}; wall/cpu: preview {per_pool('preview')} "
            f"(plain {per_pool('plain_preview')}), no-op preview {per_pool('noop_preview')}, "
            f"no-op up {per_pool('noop_up')}"
        )
    for _, pools, _, _, _, _, _, e in generated:
        if e.resources:
            per_resource = functools.partial(cost_per_resource, e)
            print(
                f"ms per resource at {pools:>4} pools ({e.resources} resources), wall/cpu: preview "
                f"{per_resource('preview')}, no-op preview {per_resource('noop_preview')}, "
                f"no-op up {per_resource('noop_up')}"
            )


# --- the request path ---------------------------------------------------------------------------

REQUESTS_PER_CLIENT = 50
PACED_TTFT_S = 0.1  # a short completion's time to first token on a loaded engine, order of magnitude
PACED_TTFT = f"{PACED_TTFT_S * 1000:.0f}ms"  # as the simulator's admin API takes it
PACED_REQUESTS_PER_CLIENT = 40
# Issue 23's targets for what routing adds to a request at 16 concurrent clients, over the simulator called directly.
TARGET_OVERHEAD_P50_MS = 5.0
TARGET_OVERHEAD_P99_MS = 25.0
# Sequences per decode rank in the pass "with room": twice what 16 clients need of the 16 ranks, so two requests the
# router puts on one rank both run at once and the pass measures the hops, not a queue behind the router's pick.
ROOM_MAX_NUM_SEQS = 2


def drive(
    send, clients: int, per_client: int, slow_after: float = float("inf")
) -> tuple[float, float, float, int, int]:
    """(requests/s, p50 ms, p99 ms, failures, answers slower than `slow_after` seconds) of `clients` threads, each
    sending `per_client` requests in turn on a connection of its own (send(conn_slot, i) -> status)."""
    import concurrent.futures

    latencies: list[float] = []
    failures = 0

    def client(slot: int) -> tuple[list[float], int]:
        own, bad = [], 0
        for i in range(per_client):
            t0 = time.perf_counter()
            status = send(slot, i)
            own.append(time.perf_counter() - t0)
            bad += status != 200
        return own, bad

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for own, bad in pool.map(client, range(clients)):
            latencies += own
            failures += bad
    wall = time.perf_counter() - start
    latencies.sort()

    def pct(q: float) -> float:
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    return len(latencies) / wall, pct(0.50), pct(0.99), failures, sum(x > slow_after for x in latencies)


def met_another(answers: list[tuple[float, float, str]], slow_after: float) -> int:
    """How many of the (start, end, rank) answers slower than `slow_after` seconds shared their rank with another
    answer in flight: two requests the router put on one rank, of which the one that reached the engine second waited
    (it may have been sent first). These are the waits the router's pick made, rather than the CPU."""
    by_rank: dict[str, list[tuple[float, float]]] = {}
    for start, end, rank in answers:
        by_rank.setdefault(rank, []).append((start, end))
    met = 0
    for spans in by_rank.values():
        for i, (start, end) in enumerate(spans):
            if end - start > slow_after:
                met += any(s < end and start < e for j, (s, e) in enumerate(spans) if j != i)
    return met


class RequestPaths:
    """The routed path (gateway role -> EPP -> P/D sidecar -> simulator) and a decode simulator called directly (from
    inside the site's network) of one served site, driven by the same clients."""

    def __init__(self, site, sim_binary: str):
        self.site = site
        # The decode simulators' ranks, in pod-major order so consecutive clients land on different pods (the ports
        # are the rendered ones the site records, not a second copy of the sidecar's offset and the rank count).
        self.decode_ranks = sorted((port, ip) for ip, port in site.engine_ranks(sim_binary, "decode"))
        self.counter = itertools.count()
        self.answers: list[tuple[float, float, str]] = []  # (start, end, rank) of each routed answer of a pass

    def routed(self, gateway: list, slot: int, i: int) -> int:
        from sitetests.harness import completion

        # Short and new: decode-only (below the decider's threshold), nothing cached to favour a pod.
        start = time.perf_counter()
        answer = self.site.post("/completions", completion(f"q{next(self.counter)}"), conn=gateway[slot])
        self.answers.append((start, time.perf_counter(), answer.destination))
        return answer.status

    def simulator(self, direct: list, slot: int, i: int) -> int:
        from sitetests.harness import completion

        conn = direct[slot]
        body = json.dumps(completion(f"q{next(self.counter)}"))
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status

    def overhead(self, per_client: int, slow_after: float = float("inf")) -> dict[int, tuple[float, float]]:
        """Print both paths at 1 and 16 clients; return clients -> (p50, p99) the routed path adds, in ms."""
        rows = {}
        for clients in (1, 16):
            direct = [
                self.site.connection_in_site(*reversed(self.decode_ranks[i % len(self.decode_ranks)]))
                for i in range(clients)
            ]
            gateway = [self.site.gateway_connection() for _ in range(clients)]
            paths = (
                ("simulator directly", functools.partial(self.simulator, direct)),
                ("gateway -> EPP -> sidecar -> sim", functools.partial(self.routed, gateway)),
            )
            for name, send in paths:
                drive(send, clients, 5)  # warm connections and caches
                self.answers.clear()
                rows[name, clients] = drive(send, clients, per_client, slow_after)
                rps, p50, p99, bad, slow = rows[name, clients]
                paced = slow_after < float("inf")
                waited = f"{slow:>7}" if paced else f"{'-':>7}"
                met = f"{met_another(self.answers, slow_after):>5}" if paced and self.answers else f"{'-':>5}"
                print(f"{name:<34} {clients:>7} {rps:>8.1f} {p50:>8.2f} {p99:>8.2f} {bad:>6} {waited} {met}")
            for conn in gateway + direct:
                conn.close()
        added = {}
        for clients in (1, 16):
            (_, d50, d99, _, _), (_, g50, g99, _, _) = (
                rows["simulator directly", clients],
                rows["gateway -> EPP -> sidecar -> sim", clients],
            )
            added[clients] = (g50 - d50, g99 - d99)
            print(f"routing overhead at {clients:>2} clients: p50 {g50 - d50:.2f} ms, p99 {g99 - d99:.2f} ms")
        return added

    def paced(self, sim_binary: str) -> dict[int, tuple[float, float]]:
        """overhead() with every engine rank answering after PACED_TTFT."""
        self.site.set_engine_latency(sim_binary, PACED_TTFT)
        try:
            return self.overhead(PACED_REQUESTS_PER_CLIENT, slow_after=1.5 * PACED_TTFT_S)
        finally:
            self.site.set_engine_latency(sim_binary, "0s")


def site_programs(section: str, extra: tuple[str, ...] = ()) -> tuple[Any, str] | None:
    """The local site's programs (and the `extra` ones) with the stack their router generation serves, or None once
    the section is said to be skipped and why."""
    sys.path.insert(0, str(ROOT))  # the project's packages (this file runs as a script)
    from localsite import binaries

    try:
        found = binaries.find()
        for name in extra:
            binaries.program(name)
    except binaries.Missing as err:
        print(f"\n== {section}: skipped ({err})")
        return None
    return found, binaries.stack_for(found.programs.epp)


def requests_section() -> None:
    import uuid

    if (site := site_programs("requests")) is None:
        return
    found, stack = site
    from core.stackfile import load_stack, stack_file
    from sitetests.harness import ServedSite, completion, stack_file_variant

    sim = found.programs.sim
    seqs = load_stack(stack_file(stack), stack).decode.max_num_seqs  # as rendered: the full pass's slots per rank
    header(f"requests: stack {stack}, gateway role -> EPP -> P/D sidecar -> simulator vs the simulator directly")
    # waited: answers slower than 1.5 engine turns (paced passes); met: of those, the routed ones that shared their rank
    # with another request in flight, i.e. the router's pick rather than the CPU (direct clients own a rank).
    columns = (
        f"{'path':<34} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'failed':>6} {'waited':>7} {'met':>5}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-requests.") as tmp, ServedSite(pathlib.Path(tmp), stack) as site:
        paths = RequestPaths(site, sim)
        print(columns)
        print("-- saturated: engines answer at once, the clients keep both cores busy")
        paths.overhead(REQUESTS_PER_CLIENT)
        # With an engine's time to first token the same 16 clients send what 16 users' requests cost, and the
        # overhead is what routing adds to a request rather than a queue for the two cores (docs/performance.md).
        print(
            f"-- paced, full: every engine rank answers after {PACED_TTFT} (the simulator's time-to-first-token); "
            f"16 clients on the stack's {len(paths.decode_ranks)} decode ranks of {seqs} sequence(s) each"
        )
        paths.paced(sim)
        pd = drive(
            lambda slot, i: site.post("/completions", completion(uuid.uuid4().hex + " " + "word " * 400)).status,
            1,
            REQUESTS_PER_CLIENT,
        )
        print(
            f"P/D (new 2 KB prompts), 1 client: {pd[0]:.1f} req/s, p50 {pd[1]:.2f} ms, p99 {pd[2]:.2f} ms, "
            f"{pd[3]} failed"
        )
    # The same stack with room on every decode rank: two requests the router puts on one rank in the same instant
    # both run, so what is left over the simulator called directly is what the hops cost a request.
    with tempfile.TemporaryDirectory(prefix="bench-requests.") as tmp:
        folder = pathlib.Path(tmp)
        # ROOM_MAX_NUM_SEQS sequences per decode rank (`decode.maxNumSeqs`), everything else as the stack has it.
        room = stack_file_variant(stack, folder, lambda v: v["rebel100:decode"].update(maxNumSeqs=ROOM_MAX_NUM_SEQS))
        with ServedSite(folder, stack, config_file=room) as site:
            paths = RequestPaths(site, sim)
            print(
                f"-- paced, with room: the same, decode.maxNumSeqs {ROOM_MAX_NUM_SEQS} "
                f"({ROOM_MAX_NUM_SEQS * len(paths.decode_ranks)} decode slots for 16 clients)"
            )
            p50, p99 = paths.paced(sim)[16]
    met = p50 <= TARGET_OVERHEAD_P50_MS and p99 <= TARGET_OVERHEAD_P99_MS
    print(
        f"target at 16 clients, with room (overhead p50 <= {TARGET_OVERHEAD_P50_MS:g} ms, p99 <= "
        f"{TARGET_OVERHEAD_P99_MS:g} ms): {'met' if met else 'not met'} (p50 {p50:.2f} ms, p99 {p99:.2f} ms)"
    )


def autoscaling_section(cycles: int) -> None:
    """Issue 24, item 5: how fast the real KEDA and HPA scale decode on the local site (sitetests/scaling.py: both
    roles on engineQueue, target 1, 1-4 pods, no scale-down window), `cycles` rounds of load then idle."""
    import statistics as stats

    sys.path.insert(0, str(ROOT))  # the project's packages (this file runs as a script)
    from localsite.autoscaler import SiteAutoscaling

    if (site := site_programs("autoscaling", tuple(SiteAutoscaling.PROGRAMS))) is None:
        return
    _found, stack = site
    from sitetests import scaling
    from sitetests.harness import ServedSite

    header(
        f"autoscaling: stack {stack}, both roles on engineQueue (target 1, 1-4 pods), {scaling.CLIENTS} clients of "
        f"short prompts, engines answering after 400 ms; KEDA {scaling.AUTOSCALING['pollingIntervalSeconds']} s "
        "polling, Prometheus 5 s scrape, the HPA's 15 s sync"
    )
    with tempfile.TemporaryDirectory(prefix="bench-autoscaling.") as tmp:
        folder = pathlib.Path(tmp)
        stack_file = scaling.autoscaled_stack_file(stack, folder)
        with ServedSite(folder, stack, sim_args=scaling.SIM_ARGS, config_file=stack_file) as site:
            scaling.wait_until_active(site)
            runs = []
            for n in range(cycles):
                cycle = scaling.decode_cycle(site)
                runs.append(cycle)
                times = (
                    f"replicas raised {cycle.scaled_up:5.1f} s, a new pod serving {cycle.new_pod_serving:5.1f} s, "
                    f"4 pods {cycle.at_maximum:5.1f} s after the load started"
                )
                after = f"back to 1 {cycle.scaled_down:5.1f} s after it stopped"
                print(f"cycle {n + 1}: {times}; {after} ({cycle.answers} answered, {cycle.failed} refused)")
    for name in ("scaled_up", "new_pod_serving", "at_maximum", "scaled_down"):
        values = [getattr(c, name) for c in runs]
        print(f"{name:16} median {stats.median(values):5.1f} s, min {min(values):5.1f}, max {max(values):5.1f}")


def changes_section() -> None:
    """Issue 36: requests failed during a change, on the stack that ships (the router programs' generation), 16
    clients without pause (sitetests.changes, the scenarios tests/localsite/test_changes.py asserts on)."""
    if (site := site_programs("changes")) is None:
        return
    _found, stack = site
    from sitetests import changes, load
    from sitetests.harness import ServedSite

    header(
        f"changes under load: stack {stack}, {load.CLIENTS} clients without pause (streamed and not; a quarter new "
        "long prompts in the rollouts), engines 100 ms + 10 ms a token; the site's kubelet at a tenth of the render's "
        "timings"
    )
    columns = ("sent", "during", *load.OUTCOMES)
    print(f"{'change':28} {'took':>6} " + " ".join(f"{c:>7}" for c in columns))
    with tempfile.TemporaryDirectory(prefix="bench-changes.") as tmp:
        sim_args = ("--time-to-first-token=100ms", "--inter-token-latency=10ms")
        with ServedSite(pathlib.Path(tmp), stack, sim_args=sim_args) as site:
            roles = ("decode", "prefill", "epp")
            # Each role alone, then one `up` of all three (what tests/localsite/test_changes.py asserts on).
            runs = [changes.rollout(site, role) for role in roles] + [changes.rollout(site, *roles)]
            decode_pods = len(changes.role_pods(site, "decode"))
            runs += [changes.scale(site, "decode", n) for n in (decode_pods // 2, decode_pods)]
            runs += [changes.kill(site, "epp", "epp"), changes.kill(site, "decode", "vllm")]
            for run in runs:
                values = (run.tally.sent(), run.sent_during, *run.tally.summary().values())
                line = f"{run.kind:28} {run.over - run.began:5.1f}s " + " ".join(f"{v:7}" for v in values)
                if (killed := run.marks.get("killed")) is not None:  # the bound: the requests held at the kill
                    ready = run.marks["ready again"] - killed
                    line += f"  ({run.tally.in_flight(killed)} in flight at the kill, Ready again {ready:.1f} s)"
                print(line)


@dataclasses.dataclass(frozen=True)
class RoutingOption:
    """One way of routing the agentic trace: a change to the stack's config (None: as the stack file has it), or an
    oracle, which pins each session (sitetests/agentic.py `pins`) through the router or straight to the engines."""

    name: str
    edit: Any = None  # config mapping -> None, as stack_file_variant takes it
    # "routed": through the gateway and an EPP that keeps the pinned endpoints; "direct": to the engines, no router
    oracle: Literal["", "routed", "direct"] = ""


def _router(values: dict, **changes) -> None:
    values.setdefault("rebel100:router", {}).update(changes)


def _edit_all(edits: tuple[Any, ...], values: dict) -> None:
    for edit in edits:
        edit(values)


def routing_options(reuse_unit: int, router_block: int) -> dict[str, RoutingOption]:
    """The agentic section's options by name, for a stack whose engines reuse prefixes in `reuse_unit`-token
    units and whose router scores prefixes in `router_block`-token blocks."""
    from localsite.programs import sim_block_size

    return {
        option.name: option
        for option in (
            RoutingOption("load-only", lambda v: _router(v, prefixCache="none", sessionAffinityWeight=0)),
            # The render: the engines' KV block (4096), written out (docs/decisions.md), and session affinity.
            RoutingOption("as-rendered"),
            # The render without session affinity: a session shorter than a router block goes by load.
            RoutingOption("no-session", lambda v: _router(v, sessionAffinityWeight=0)),
            # The render with upstream's no-hit-lru-scorer (weight 1): a request no endpoint holds a prefix of goes to
            # the endpoint that took one least recently.
            RoutingOption("no-hit-lru", lambda v: _router(v, noHitLruScorerWeight=1)),
            # The render with the EPP's own in-flight count in the prefill profile too: sessions that arrive at once
            # spread over the prefill engines by the picks already made, not by a queue read up to 50 ms before.
            RoutingOption("prefill-inflight", lambda v: _router(v, prefillActiveRequestScorerWeight=1)),
            # The render without token-load-scorer in the prefill profile (the render before it, docs/decisions.md):
            # sessions that arrive at once spread over the prefill engines by a queue read up to a scrape before.
            RoutingOption("no-token-load", lambda v: _router(v, prefillTokenLoadScorerWeight=0)),
            # The reference design's blockSizeTokens with autoTune off: the unit the engines reuse (512 tokens).
            RoutingOption("reuse-unit", lambda v: _router(v, autoTune=False, blockSizeTokens=reuse_unit)),
            # The reference design's autoTune: the block the engines report (Rebel100's 4096; the site's
            # simulators report 128).
            RoutingOption("autotune", lambda v: _router(v, autoTune=True)),
            # The render with P/D only where more than a router block is not cached (the render: 16 tokens): a
            # turn's new context, shorter than a block, is computed by the decode engine that holds the session.
            RoutingOption("pd-threshold", lambda v: _router(v, nonCachedTokens=router_block)),
            # The engines' own KV events: the router's blocks must divide the blocks the engines announce, the
            # site's simulators' (programs.sim_block_size of the reuse unit; it divides Rebel100's 4096 too).
            RoutingOption(
                "precise", lambda v: _router(v, prefixCache="precise", blockSizeTokens=sim_block_size(reuse_unit))
            ),
            # The oracle on the routed options' path: the same gateway, sidecar and EPP (scraping, scoring, deciding
            # P/D as rendered), the EPP keeping only the endpoints each session is pinned to.
            RoutingOption("oracle-routed", oracle="routed"),
            # The oracle without the router (the only oracle of the figures before 2026-12-07 10:00 UTC): from inside
            # the site to the pinned decode rank's sidecar; against oracle-routed, what the router's path costs here.
            RoutingOption("oracle", oracle="direct"),
        )
    }


PLOT_COLOURS = ("#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#7f7f7f", "#9467bd", "#8c564b")


def ttft_plot(by_turn: dict[str, tuple[float, ...]], title: str) -> str:
    """An SVG line chart of TTFT p50 (s) per turn, one line per option: the agentic section's plot (no plotting
    library: a few dozen lines of SVG are all it needs)."""
    width, height, left, right, top, bottom = 640, 360, 56, 150, 36, 44
    turns = max(len(values) for values in by_turn.values())
    finite = [v for values in by_turn.values() for v in values if v == v]
    top_value = max(finite, default=1.0) * 1.1 or 1.0

    def x(turn: int) -> float:
        return left + (width - left - right) * (turn / max(turns - 1, 1))

    def y(value: float) -> float:
        return top + (height - top - bottom) * (1 - value / top_value)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
        f'<text x="{left}" y="20" font-size="13">{title}</text>',
        f'<line x1="{left}" y1="{y(0):.1f}" x2="{width - right}" y2="{y(0):.1f}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{y(0):.1f}" stroke="black"/>',
        f'<text x="{(left + width - right) / 2:.0f}" y="{height - 8}" text-anchor="middle">turn</text>',
        f'<text x="14" y="{top - 8}">TTFT p50 (s)</text>',
    ]
    for turn in range(turns):
        parts.append(f'<text x="{x(turn):.1f}" y="{y(0) + 16:.1f}" text-anchor="middle">{turn + 1}</text>')
    for step in range(5):
        value = top_value * step / 4
        parts.append(f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.1f}</text>')
    for i, (name, values) in enumerate(by_turn.items()):
        colour = PLOT_COLOURS[i % len(PLOT_COLOURS)]
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in enumerate(values) if v == v)
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{width - right + 10}" y="{top + 18 * i + 8}" fill="{colour}">{name}</text>')
    return "\n".join([*parts, "</svg>", ""])


# The issue's four, its oracle on the routed options' path and straight to the engines; `--routing` adds the others.
AGENTIC_OPTIONS = ("load-only", "as-rendered", "precise", "oracle-routed", "oracle")
ORACLES = ("oracle-routed", "oracle")


def _record_json(option: str, record: Any) -> dict[str, Any]:
    """A request of the agentic section as JSON: its option, then its Record's fields (null for a time it never
    reached, where the Record holds NaN)."""
    fields = dataclasses.asdict(record)
    return {"option": option, **{k: None if isinstance(v, float) and v != v else v for k, v in fields.items()}}


def agentic_section(
    sessions: int,
    options: list[str],
    seed: int,
    plot: pathlib.Path | None = None,
    turns: int | None = None,
    records: pathlib.Path | None = None,
    scrape_ms: int | None = None,
) -> None:
    """Issue 37: a coding agent's sessions (sitetests/agentic.py) replayed the same under each routing option, each
    on a site of its own (every engine's cache empty at the start), the engines' time to first token growing with
    the tokens they have not cached."""
    if (site := site_programs("agentic")) is None:
        return
    found, stack = site
    from core import routing
    from core.derive import derive
    from core.stackfile import load_stack, stack_file
    from localsite.programs import SIM_DEFAULT_KV_BLOCKS, sim_block_size, sim_cache_blocks
    from sitetests import agentic
    from sitetests.harness import ServedSite, stack_file_variant

    cfg = load_stack(stack_file(stack), stack)
    facts = derive(cfg)
    timing = agentic.SimTiming.of(cfg)
    trace = agentic.Trace.make(seed, sessions, turns or agentic.TURNS)
    router_block = routing.block_tokens(cfg.router)
    known = routing_options(facts.prefix_reuse_unit, router_block)
    if unknown := [name for name in options if name not in known]:
        print(f"agentic: no routing option {', '.join(unknown)}; the options are {', '.join(known)}")
        return
    block = sim_block_size(facts.prefix_reuse_unit)
    tiered = sim_cache_blocks(block, facts.lmcache_env)
    cache = (
        f"{tiered} a prefill rank (its RDS tier), {SIM_DEFAULT_KV_BLOCKS} a decode rank"
        if tiered is not None
        else f"{SIM_DEFAULT_KV_BLOCKS} a rank"
    )
    header(
        f"agentic: stack {stack}, {trace.sessions} sessions x {len(trace.added[0])} turns (seed {seed}): a "
        f"{agentic.SYSTEM_TOKENS}-token system prompt, {agentic.ADDED_TOKENS[0]}-{agentic.ADDED_TOKENS[1]} tokens "
        f"added a turn, {agentic.TOOL_PAUSE_S[0]:g}-{agentic.TOOL_PAUSE_S[1]:g} s tool pauses, "
        f"{agentic.ANSWER_TOKENS}-token streamed answers; engines: TTFT {timing.prefill_overhead_ms:g} ms + uncached "
        f"tokens at {timing.prefill_tokens_per_s:g} tokens/s (+ {timing.transfer_us_per_token:.1f} us a prompt "
        f"token of KV transfer on P/D; prefill shared by {timing.shared_by}); simulated KV blocks of {block} tokens, "
        f"{cache}"
    )
    columns = (
        f"{'option':<13} {'requests':>8} {'failed':>6} {'hit rate':>8} {'TTFT p50':>9} {'TTFT p99':>9} "
        f"{'tokens/s':>9} {'moved':>5}"
    )
    # Every option's site, the oracle's too, with the EPP scraping at this interval: how much of a routed request's
    # time is the scrape's share of the site's two cores (docs/performance.md), not the routing.
    site_edit = (lambda v: _router(v, refreshMetricsIntervalMs=scrape_ms)) if scrape_ms else None
    if scrape_ms:
        print(f"every option's EPP scrapes every {scrape_ms} ms (router.refreshMetricsIntervalMs)")
    rows: dict[str, Any] = {}
    for name in options:
        option = known[name]
        with tempfile.TemporaryDirectory(prefix="bench-agentic.") as tmp:
            folder = pathlib.Path(tmp)
            edits = tuple(e for e in (site_edit, option.edit) if e is not None)
            config_file = stack_file_variant(stack, folder, functools.partial(_edit_all, edits)) if edits else None
            sim_args = (*agentic.ENGINE_MODE, *timing.sim_args())
            pinned = option.oracle == "routed"
            with ServedSite(
                folder,
                stack,
                sim_args=sim_args,
                config_file=config_file,
                render_edit=agentic.pin_in_router if pinned else None,
                probe_headers=agentic.pin_every_engine if pinned else None,
            ) as site:
                prefill = site.engine_ranks(found.programs.sim, "prefill")
                decode = site.engine_ranks(found.programs.sidecar, "decode")
                if option.oracle == "direct":
                    target = agentic.pinned_target(site, decode, prefill)
                elif pinned:
                    target = agentic.router_pinned_target(site.base_url, decode, prefill)
                else:
                    target = agentic.gateway_target(site.base_url)
                before = agentic.cache_counters(site, prefill)  # the site's own first answer
                run = agentic.replay(trace, target)
                after = agentic.cache_counters(site, prefill)
                if pinned and (off := agentic.off_pins([r for r in run.records if not r.error], decode, prefill)):
                    print(f"{name}: {len(off)} requests answered off their pins, not an oracle (first: {off[0]})")
        row = agentic.summarize(run, after[0] - before[0], after[1] - before[1])
        rows[name] = row
        if records is not None:
            with records.open("a") as out:
                out.writelines(json.dumps(_record_json(name, r)) + "\n" for r in run.records)
        if len(rows) == 1:
            print(columns)
        print(
            f"{name:<13} {row.requests:>8} {row.failed:>6} {row.hit_rate:>8.1%} {row.ttft_p50:>8.2f}s "
            f"{row.ttft_p99:>8.2f}s {row.tokens_per_s:>9.0f} {len(row.moved):>5}"
        )
        for record in [r for r in run.records if r.error][:3]:
            print(f"  failed: session {record.session} turn {record.turn}: {record.error[:200]}")
    print("TTFT p50 by turn (s):")
    print(f"{'option':<13} " + " ".join(f"{t + 1:>6}" for t in range(len(trace.added[0]))))
    for name, row in rows.items():
        print(f"{name:<13} " + " ".join(f"{v:>6.2f}" for v in row.ttft_by_turn))
    below = trace.below_one_block(router_block)
    print(f"sessions whose first prompt is shorter than a router block ({router_block}): {below}")
    for name, row in rows.items():
        print(f"{name:<13} moved: {list(row.moved)}")
    print("sessions each prefill engine computed the first turn of, most first:")
    for name, row in rows.items():
        print(f"{name:<13} {list(row.placed)}")
    if plot is not None:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        title = f"TTFT p50 by turn, {trace.sessions} coding-agent sessions, stack {stack} ({when})"
        plot.write_text(ttft_plot({name: row.ttft_by_turn for name, row in rows.items()}, title))
        print(f"plot: {plot}")
    for oracle_name in [name for name in ORACLES if name in rows]:
        oracle = rows[oracle_name]
        for name, row in [(name, row) for name, row in rows.items() if name not in ORACLES]:
            print(
                f"{name}: {row.hit_rate / oracle.hit_rate:.0%} of {oracle_name}'s hit rate, TTFT p50 "
                f"{row.ttft_p50 / oracle.ttft_p50:.2f}x {oracle_name}'s"
            )
    if all(name in rows for name in ORACLES):
        routed, direct = (rows[name] for name in ORACLES)
        print(f"the router's path here: oracle-routed's TTFT p50 {routed.ttft_p50 / direct.ttft_p50:.2f}x oracle's")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--sections",
        nargs="*",
        default=["floor", "cluster", "requests", "changes", "autoscaling", "agentic"],
        choices=["floor", "cluster", "scale", "requests", "changes", "autoscaling", "agentic"],
    )
    parser.add_argument("--sessions", type=int, default=32, help="coding-agent sessions of the agentic section")
    parser.add_argument("--seed", type=int, default=37, help="the agentic section's trace")
    parser.add_argument(
        "--turns", type=int, help="turns of each session of the agentic section (default: sitetests/agentic.py TURNS)"
    )
    parser.add_argument("--plot", type=pathlib.Path, help="write the agentic section's TTFT by turn here (SVG)")
    parser.add_argument(
        "--scrape-ms",
        type=int,
        help="the agentic section's sites with the EPP scraping at this interval (router.refreshMetricsIntervalMs)",
    )
    parser.add_argument(
        "--records",
        type=pathlib.Path,
        help="append each request of the agentic section here, one JSON object a line (its option, then Record)",
    )
    parser.add_argument(
        "--routing",
        nargs="*",
        default=list(AGENTIC_OPTIONS),
        help="the agentic section's routing options, in order",
    )
    parser.add_argument("--cycles", type=int, default=3, help="rounds of load and idle in the autoscaling section")
    parser.add_argument("--scale", action="store_true", help="also the scale section (several minutes)")
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    args = parser.parse_args()
    sections = set(args.sections) | ({"scale"} if args.scale else set())
    bin_dir = checked_dir(str(ROOT / "scripts" / "install-pulumi"), "--check")
    cluster_bin = checked_dir(str(ROOT / "scripts" / "cluster"), "build", "--check")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, each command a fresh process"
    )
    if "floor" in sections:
        floor_section(args.repeats)
    if "cluster" in sections:
        if bin_dir and cluster_bin:
            cluster_section(args.repeats, bin_dir, cluster_bin)
        else:
            print(
                "\n== cluster: skipped, needs the toolchain (`make toolchain`) and the local control plane "
                "(`scripts/cluster build`)"
            )
    if "scale" in sections:
        scale_section(args.repeats, args.sizes, bin_dir)
    if "requests" in sections:
        if cluster_bin:
            requests_section()
        else:
            print("\n== requests: skipped, needs the local control plane (`scripts/cluster build`)")
    if "changes" in sections:
        if cluster_bin:
            changes_section()
        else:
            print("\n== changes: skipped, needs the local control plane (`scripts/cluster build`)")
    if "agentic" in sections:
        if cluster_bin:
            agentic_section(args.sessions, args.routing, args.seed, args.plot, args.turns, args.records, args.scrape_ms)
        else:
            print("\n== agentic: skipped, needs the local control plane (`scripts/cluster build`)")
    if "autoscaling" in sections:
        if cluster_bin:
            autoscaling_section(args.cycles)
        else:
            print("\n== autoscaling: skipped, needs the local control plane (`scripts/cluster build`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
