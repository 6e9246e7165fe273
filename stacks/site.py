"""The site as a cluster reports it, read with kubectl: the inventory the placement check needs before
`up`, and where the engine pods and their devices ended up after it.

  preflight STACK   will every engine pod fit the site's nodes and devices? (core.placement)
  placement STACK   each engine pod, its node, and the devices (with NUMA node) its claim was allocated
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import subprocess
import sys
import threading
from typing import Any

from core.config import StackConfig
from core.labels import PART_OF_LABEL, ROLE_LABEL
from core.placement import NumaNode, SiteNode
from core.retained import Claim, claim_of

DRIVER_SELECTOR = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")


class SiteError(RuntimeError):
    """The cluster could not be read."""


def kubectl(kubeconfig: str | None, *args: str) -> Any:
    # A bound on each request: an API server that accepts connections but never answers (stopped, not
    # exited) is an error here, not a hang.
    command = [
        "kubectl",
        *(["--kubeconfig", kubeconfig] if kubeconfig else []),
        "--request-timeout=20s",
        *args,
        "-o",
        "json",
    ]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SiteError("kubectl is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise SiteError(f"`{' '.join(command)}` did not finish in 60 s") from None
    if proc.returncode != 0:
        raise SiteError(f"`{' '.join(command)}` failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def kubectl_all(kubeconfig: str | None, *reads: tuple[str, ...]) -> list[Any]:
    """Several reads at once, each in a kubectl of its own (one after the other they were a kubectl start each,
    0.2-0.4 s here): their results in the order asked; the first failed read, in that order, raises."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(reads)) as pool:
        futures = [pool.submit(kubectl, kubeconfig, *read) for read in reads]
    return [future.result() for future in futures]


def _drivers(classes: list[dict], name: str) -> set[str]:
    """Drivers a DeviceClass selects, read from its `device.driver == "..."` CEL selectors."""
    for device_class in classes:
        if device_class["metadata"]["name"] == name:
            return {
                match
                for selector in device_class.get("spec", {}).get("selectors") or []
                for match in DRIVER_SELECTOR.findall((selector.get("cel") or {}).get("expression", ""))
            }
    return set()


def _numa(device: dict, attribute: str) -> int:
    value = (device.get("attributes") or {}).get(attribute) or {}
    return int(value.get("int", 0))


def inventory(cfg: StackConfig, kubeconfig: str | None) -> list[SiteNode]:
    """Nodes with their labels and, per NUMA node, the NPUs and NICs their ResourceSlices publish."""
    nodes, slices, classes = (
        read["items"]
        for read in kubectl_all(kubeconfig, ("get", "nodes"), ("get", "resourceslices"), ("get", "deviceclasses"))
    )
    npu_drivers = _drivers(classes, cfg.hardware.npu_device_class)
    nic_drivers = _drivers(classes, cfg.hardware.nic_device_class)
    site = {
        n["metadata"]["name"]: SiteNode(n["metadata"]["name"], n["metadata"].get("labels") or {}, {}) for n in nodes
    }
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        node = site.get(spec.get("nodeName") or "")
        kind = "npus" if spec.get("driver") in npu_drivers else "nics" if spec.get("driver") in nic_drivers else None
        if node is None or kind is None:
            continue
        for device in spec.get("devices") or []:
            numa = node.numa.setdefault(_numa(device, cfg.hardware.numa_attribute), NumaNode(0, 0))
            setattr(numa, kind, getattr(numa, kind) + 1)
    return list(site.values())


def missing_weights_volume(cfg: StackConfig, kubeconfig: str | None) -> str | None:
    """With `weights.source: pvc` the engines mount an existing PVC: say so when the cluster has none."""
    if cfg.weights.source != "pvc":
        return None
    namespaces, claims = (
        read["items"]
        for read in kubectl_all(
            kubeconfig, ("get", "namespaces"), ("get", "persistentvolumeclaims", "-n", cfg.namespace)
        )
    )
    claims = claims if any(n["metadata"]["name"] == cfg.namespace for n in namespaces) else []
    if any(c["metadata"]["name"] == cfg.weights.pvc for c in claims):
        return None
    return (
        f"weights.source is pvc but namespace {cfg.namespace} has no PVC {cfg.weights.pvc}: every engine pod "
        f'would stay Pending (persistentvolumeclaim "{cfg.weights.pvc}" not found). Pre-load the volume '
        "(docs/model-weights.md), "
        f"or set weights.source download."
    )


def live_claims(cfg: StackConfig, kubeconfig: str | None) -> tuple[list[Claim], set[str]]:
    """(the PVCs of the stack's namespace and this stack's PVCs in any namespace, the StorageClasses that
    allow volume expansion): what core.retained checks a change of the retained volumes against."""
    in_namespace, of_stack, classes = (
        read["items"]
        for read in kubectl_all(
            kubeconfig,
            ("get", "persistentvolumeclaims", "-n", cfg.namespace),
            ("get", "persistentvolumeclaims", "-A", "-l", f"{PART_OF_LABEL}={cfg.name}"),
            ("get", "storageclasses"),
        )
    )
    found = {}
    for item in in_namespace + of_stack:
        claim = claim_of(item)
        found[(claim.namespace, claim.name)] = claim
    expandable = {c["metadata"]["name"] for c in classes if c.get("allowVolumeExpansion")}
    return list(found.values()), expandable


@dataclasses.dataclass(frozen=True)
class EnginePlacement:
    pod: str
    role: str
    node: str
    phase: str
    devices: list[str]  # "driver/pool/device (NUMA n)"


def placement(cfg: StackConfig, kubeconfig: str | None) -> list[EnginePlacement]:
    """Where the engine pods run and which devices their claims were allocated, read back from the cluster."""
    pods, claims, slices = (
        read["items"]
        for read in kubectl_all(
            kubeconfig,
            ("get", "pods", "-n", cfg.namespace, "-l", f"{PART_OF_LABEL}={cfg.name},{ROLE_LABEL}"),
            ("get", "resourceclaims", "-n", cfg.namespace),
            ("get", "resourceslices"),
        )
    )
    claims = {c["metadata"]["name"]: c for c in claims}
    numa_of: dict[tuple[str, str, str], int] = {}
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        for device in spec.get("devices") or []:
            key = (spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), device.get("name", ""))
            numa_of[key] = _numa(device, cfg.hardware.numa_attribute)
    rows = []
    for pod in sorted(
        pods, key=lambda p: (p["metadata"]["labels"].get(ROLE_LABEL, ""), p["spec"].get("nodeName") or "")
    ):
        devices = []
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            claim = claims.get(status.get("resourceClaimName") or "")
            results = (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices", {}).get(
                "results"
            ) or []
            for result in results:
                key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
                devices.append(f"{result.get('request')}: {key[2]} (NUMA {numa_of.get(key, '?')})")
        rows.append(
            EnginePlacement(
                pod["metadata"]["name"],
                pod["metadata"]["labels"].get(ROLE_LABEL, "?"),
                pod["spec"].get("nodeName") or "-",
                (pod.get("status") or {}).get("phase", "?"),
                devices,
            )
        )
    return rows


def format_placement(rows: list[EnginePlacement]) -> str:
    lines = [f"{'pod':<44}{'role':<9}{'node':<18}{'phase':<10}devices"]
    for row in rows:
        numas = sorted({d.rsplit("(NUMA ", 1)[-1].rstrip(")") for d in row.devices})
        summary = f"{len(row.devices)} devices, NUMA {'/'.join(numas)}" if row.devices else "none allocated"
        lines.append(f"{row.pod:<44}{row.role:<9}{row.node:<18}{row.phase:<10}{summary}")
        lines += [f"{'':<44}  {device}" for device in row.devices]
    return "\n".join(lines)


def unschedulable(cfg: StackConfig, kubeconfig: str | None, *, created_after: str = "") -> dict[str, str]:
    """Pods of the stack the scheduler has marked Unschedulable, with its message; with `created_after` (an RFC 3339
    UTC time, as the API writes creationTimestamp), only pods created since then."""
    pods = kubectl(kubeconfig, "get", "pods", "-n", cfg.namespace, "-l", f"{PART_OF_LABEL}={cfg.name}")["items"]
    found = {}
    for pod in pods:
        if pod["metadata"].get("creationTimestamp", "") < created_after:
            continue
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
            ):
                found[pod["metadata"]["name"]] = condition.get("message", "")
    return found


def cancel_update(pid: int, *, again_after: float = 30.0) -> None:
    """Cancel `pulumi up` as Ctrl-C does (SIGINT: it finishes the steps in flight and unlocks the stack); when
    it is still running `again_after` seconds later (a step waiting on a cluster that does not answer),
    interrupt it again, which makes Pulumi stop at once (the next `scripts/up` clears what it left)."""
    import os
    import signal
    import time

    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + again_after
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(1.0)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)


def watch(
    cfg: StackConfig,
    kubeconfig: str | None,
    *,
    pid: int,
    grace_seconds: float,
    unreachable_seconds: float = 60.0,
    interval: float = 5.0,
    stopped: threading.Event | None = None,
) -> int:
    """Beside a running `pulumi up` (process `pid`): when a pod of the stack has been Unschedulable for
    `grace_seconds`, name it and the scheduler's reason, and cancel the update (SIGINT, as Ctrl-C does)
    instead of letting the provider wait out the engines' hours-long rollout timeout. Likewise when the
    cluster's API server has not answered for `unreachable_seconds` (the provider retries for as long as the
    engines' budget). 0 when `up` ended by itself (or `stopped` was set: `python -m stacks up` runs this in a thread
    beside the update), 3 when it was cancelled for a pod, 4 for the API server."""
    import datetime
    import os
    import time

    # Only pods this update creates: a pod left Pending by an earlier, cancelled update is replaced by this one (or,
    # when its Deployment does not change, not waited for), so it must not cancel the update that fixes it. The
    # margin allows for a cluster clock a little behind this host's.
    started = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=10)
    created_after = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    first_seen: dict[str, float] = {}
    unreachable_since: float | None = None
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return 0
        if stopped is not None and stopped.is_set():
            return 0
        now = time.monotonic()
        try:
            pending = unschedulable(cfg, kubeconfig, created_after=created_after)
            unreachable_since = None
        except SiteError as error:
            pending = {}
            unreachable_since = now if unreachable_since is None else unreachable_since
            if now - unreachable_since >= unreachable_seconds:
                print(
                    f"error: the cluster is unreachable: its API server has not answered for {unreachable_seconds:g} s "
                    f"({str(error).splitlines()[-1][:300]})",
                    file=sys.stderr,
                )
                print(
                    "error: cancelling `pulumi up` (start the API server again, then run scripts/up again: it "
                    "resumes the update)",
                    file=sys.stderr,
                )
                cancel_update(pid)
                return 4
        first_seen = {pod: first_seen.get(pod, now) for pod in pending}
        stuck = {pod: pending[pod] for pod, since in first_seen.items() if now - since >= grace_seconds}
        if stuck:
            for pod, message in sorted(stuck.items()):
                print(
                    f"error: pod {cfg.namespace}/{pod} has been unschedulable for {grace_seconds:g} s: {message}",
                    file=sys.stderr,
                )
            print(
                "error: cancelling `pulumi up` (the scheduler will not place these pods; see `python -m stacks "
                "preflight`)",
                file=sys.stderr,
            )
            cancel_update(pid)
            return 3
        if stopped is not None:
            stopped.wait(interval)
        else:
            time.sleep(interval)


def preflight(name: str, cfg: StackConfig, kubeconfig: str | None) -> int:
    """`python -m stacks preflight` of a loaded stack (what `python -m stacks up` runs before its preview): will
    every engine pod fit the site, and can the live stack's retained volumes take the change? 0 yes, 1 no (each
    problem printed), 2 an unreadable cluster."""
    from core.placement import place
    from core.retained import live_stack_refusals

    try:
        nodes = inventory(cfg, kubeconfig)
        no_weights = missing_weights_volume(cfg, kubeconfig)
        claims, expandable = live_claims(cfg, kubeconfig)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    placed, problems = place(cfg, nodes)
    problems += [no_weights] if no_weights else []
    # Changes the live stack cannot take (its retained volumes), refused before anything is applied.
    problems += live_stack_refusals(cfg, claims, expandable)
    for problem in problems:
        print(f"error: stack {name!r}: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"placement of stack {name!r}: all {len(placed)} engine pods fit the site's {len(nodes)} nodes")
    return 0
