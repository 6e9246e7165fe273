"""How the program's cost grows with the stack: `make bench` (not part of the tests).

Times `python -m stacks render` and `python -m stacks check` (each a fresh process, as a user runs
them) on prod-4p4d and on generated stacks of 16, 64 and 256 pools: prefill and decode split over
node groups (`placement.groups`), one pool per role and group, one pod per pool. Reports the median
wall time of REPEATS runs, the peak resident memory of the process, and the time per pool, whose
flatness across sizes is what "linear" means here. With `--pulumi` and the toolchain installed it
also times `pulumi preview` of the same stacks, to show the program's share of a real preview.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = (16, 64, 256)


def generated_stack(pools: int, folder: pathlib.Path) -> pathlib.Path:
    """A stack file with `pools` pools: pools/2 groups, each with one prefill and one decode pool."""
    groups = pools // 2
    config = yaml.safe_load((ROOT / "Pulumi.prod-4p4d.yaml").read_text())["config"]
    config["rebel100:placement"] = {"groups": groups}
    config["rebel100:prefill"] = {"replicas": groups}
    config["rebel100:decode"] = {**config.get("rebel100:decode", {}), "replicas": groups}
    config["rebel100:hardware"] = {"nodes": groups}
    path = folder / f"Pulumi.bench-{pools}.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def measure(command: list[str], repeats: int) -> tuple[float, float]:
    times, peaks = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        peaks.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise SystemExit(f"{' '.join(command)} failed: {proc.stderr.read().decode()}")
    return statistics.median(times), max(peaks)


def count_objects(folder: pathlib.Path) -> int:
    return sum(1 for _ in folder.rglob("*.yaml"))


def count_pools(folder: pathlib.Path) -> int:
    """Engine Deployments (prefill and decode pools) in a render."""
    return sum(1 for p in folder.rglob("apps_v1-deployment-*.yaml") if "-prefill" in p.name or "-decode" in p.name)


def toolchain() -> str | None:
    proc = subprocess.run([str(ROOT / "scripts" / "install-pulumi"), "--check"], capture_output=True, text=True)
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None


def preview_seconds(stack_path: pathlib.Path, scratch: pathlib.Path, bin_dir: str, repeats: int) -> float:
    """Median wall time of `pulumi preview` of the stack (no policy pack) on a copy of the project."""
    project = scratch / "project"
    if not project.exists():
        shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".git", ".venv", ".pulumi-*", "build", "tests", "benchmarks"))
        (project / ".venv").symlink_to(ROOT / ".venv")
        (project / "state").mkdir()
    name = stack_path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    target = project / f"Pulumi.{name}.yaml"
    if target != stack_path:
        lines = stack_path.read_text().splitlines(keepends=True)
        target.write_text("".join(line for line in lines if not line.startswith("encryptionsalt:")))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PULUMI_HOME": str(project / ".pulumi-home"),
           "PULUMI_BACKEND_URL": f"file://{project / 'state'}", "PULUMI_CONFIG_PASSPHRASE": "bench",
           "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true", "KUBECONFIG": ""}
    subprocess.run(["pulumi", "stack", "select", name, "--create", "--non-interactive"], cwd=project, env=env,
                   capture_output=True, check=True)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(["pulumi", "preview", "-s", name, "--non-interactive"], cwd=project, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"pulumi preview of {name} failed:\n{proc.stdout}\n{proc.stderr}")
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--no-pulumi", action="store_true", help="skip `pulumi preview` even when the toolchain is there")
    args = parser.parse_args()
    bin_dir = None if args.no_pulumi else toolchain()
    python = sys.executable
    has_check = (ROOT / "stacks" / "check.py").exists()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        cases = [("prod-4p4d", ROOT / "Pulumi.prod-4p4d.yaml")]
        cases += [(f"{n} pools", generated_stack(n, scratch)) for n in args.sizes]
        for label, path in cases:
            out = scratch / f"render-{label.replace(' ', '-')}"
            render_s, render_mib = measure([python, "-m", "stacks", "render", "--config-file", str(path), "--out", str(out)], args.repeats)
            check_s, check_mib = (measure([python, "-m", "stacks", "check", "--config-file", str(path)], args.repeats)
                                  if has_check else (float("nan"), float("nan")))
            preview_s = preview_seconds(path, scratch, bin_dir, args.repeats) if bin_dir else float("nan")
            rows.append((label, count_pools(out), count_objects(out), render_s, render_mib, check_s, check_mib, preview_s))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"median of {args.repeats} runs, each a fresh process")
    print(f"{'stack':<11}{'pools':>6}{'objects':>9}{'render s':>10}{'peak MiB':>10}{'check s':>9}{'peak MiB':>10}"
          f"{'preview s':>11}{'program share':>15}")
    for label, pools, objects, render_s, render_mib, check_s, check_mib, preview_s in rows:
        # The offline render is the program's own work (imports, config gate, registering every resource).
        share = f"{100 * min(render_s / preview_s, 1):.0f}%" if preview_s == preview_s else "-"
        print(f"{label:<11}{pools:>6}{objects:>9}{render_s:>10.2f}{render_mib:>10.0f}{check_s:>9.2f}{check_mib:>10.0f}"
              f"{preview_s:>11.2f}{share:>15}")
    generated = [r for r in rows if r[0] != "prod-4p4d"]
    # Linear growth = a constant cost per extra pool on top of a fixed start-up (interpreter, imports).
    for (_, p0, _, t0, _, c0, _, v0), (_, p1, _, t1, _, c1, _, v1) in zip(generated, generated[1:]):
        print(f"growth {p0:>3} -> {p1:>3} pools, ms per extra pool: render {1000 * (t1 - t0) / (p1 - p0):.1f}, "
              f"check {1000 * (c1 - c0) / (p1 - p0):.1f}, preview {1000 * (v1 - v0) / (p1 - p0):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
