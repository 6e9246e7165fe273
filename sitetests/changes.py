"""The changes an operator makes to a running stack, made on a served site under steady load (sitetests.load), each
returning what the load saw: tests/localsite/test_changes.py asserts on them, `make bench` (section `changes`) prints
them as a table.

- `rollout`: the stack's render with one setting of a role changed, applied as `up` applies it (every pod of the
  role replaced), waited for until the Deployment has rolled out and no pod of before is left;
- `scale`: a role's Deployment set to another number of pods as its HorizontalPodAutoscaler sets it (the scale
  subresource, which KEDA's HPA writes), waited for until exactly that many pods run, all Ready;
- `kill`: `kill -9` of one program of a pod (the EPP, an engine), waited for until the pod is Ready again.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.config import Router
from core.labels import ROLE_LABEL
from localsite.agent import is_ready
from sitetests.harness import ServedSite, stack_file_variant
from sitetests.load import SteadyLoad, Tally

ROLLOUT_TIMEOUT = 480.0  # four pods one at a time, each its 15 s preStop, its stop and its successor's start
WARM_UP = 2.0  # seconds of load before a change and after it
# A killed program restarted and its pod Ready again: the EPP's startup budget is 2 minutes (objects/router.py).
RESTART_TIMEOUT = 180.0
EPP_SELECTOR = "app.kubernetes.io/component=router"  # the EPP's Deployment and pods (objects/router.py)


def engine_change(section: dict) -> None:
    """An env var of the role's engines, new each time: every pod of the role replaced."""
    section["extraEnv"] = {**(section.get("extraEnv") or {}), "REBEL100_CHANGE": str(time.monotonic_ns())}


def epp_change(section: dict) -> None:
    """How often the EPP reads the engines' metrics, one ms more than it was: the EPP replaced."""
    current = section.get("refreshMetricsIntervalMs", Router().refresh_metrics_interval_ms)
    section["refreshMetricsIntervalMs"] = current + 1


# What a change of each role edits: its key in the stack file, the edit, and the selector of its Deployments and pods.
ROLES: dict[str, tuple[str, Callable[[dict], None], str]] = {
    "decode": ("decode", engine_change, f"{ROLE_LABEL}=decode"),
    "prefill": ("prefill", engine_change, f"{ROLE_LABEL}=prefill"),
    "epp": ("router", epp_change, EPP_SELECTOR),
}


@dataclass
class ChangeRun:
    """One change under load: the load's tally, when the change began and ended, and what it replaced."""

    kind: str
    tally: Tally
    began: float
    over: float
    before: set[str]
    after: set[str]
    marks: dict[str, float]  # named moments of the change (time.monotonic()), e.g. "not ready"

    @property
    def sent_during(self) -> int:
        return self.tally.sent(self.began, self.over)

    @property
    def met(self) -> int:
        """The requests in flight at some moment of the change (sent before it ended, ended after it began)."""
        return sum(1 for o in self.tally.outcomes if o.started < self.over and o.ended > self.began)


def pods(site: ServedSite, selector: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in site.get("pods", f"--selector={selector}")}


def role_pods(site: ServedSite, role: str) -> dict[str, dict]:
    """The pods of a role of ROLES (decode, prefill, epp)."""
    return pods(site, ROLES[role][2])


def pod_ready(site: ServedSite, name: str) -> bool:
    return is_ready(site.get("pod", name))


def apply_change(site: ServedSite, edits: dict[str, Callable[[dict], None]]) -> None:
    """The stack's render with each `rebel100:<key>` of `edits` changed by its edit, applied in one go (what one `up` of
    those changes applies). Changes add up: each edits the stack file the site was last deployed with."""

    def change(values: dict) -> None:
        for key, edit in edits.items():
            section = dict(values.get(f"rebel100:{key}") or {})
            edit(section)
            values[f"rebel100:{key}"] = section

    folder = site.folder / f"change-{'-'.join(edits)}-{time.monotonic_ns()}"
    folder.mkdir()
    site.config_file = stack_file_variant(site.stack, folder, change, base=site.config_file)
    site.render = folder / "render"
    site.deploy()


def rolled_out(site: ServedSite, old: set[str], selector: str) -> bool:
    """Every Deployment the selector names has all its pods of its new template and available, and no pod of before
    is left."""
    for found in site.get("deployments", f"--selector={selector}"):
        status, wanted = found.get("status") or {}, found["spec"].get("replicas", 1)
        if not (
            status.get("observedGeneration") == found["metadata"]["generation"]
            and status.get("updatedReplicas") == wanted
            and status.get("availableReplicas") == wanted
            and status.get("replicas") == wanted
        ):
            return False
    return not (old & set(pods(site, selector)))


def under_load(
    site: ServedSite, kind: str, selectors: list[str], change: Callable[[dict[str, float]], None], long_share: float
) -> ChangeRun:
    """`change` made under a steady load, with the pods the selectors name before and after it."""

    def named() -> set[str]:
        return {name for selector in selectors for name in pods(site, selector)}

    before = named()
    marks: dict[str, float] = {}
    with SteadyLoad(site, long_share=long_share) as load:
        time.sleep(WARM_UP)
        began = time.monotonic()
        change(marks)
        over = time.monotonic()
        time.sleep(WARM_UP)
    return ChangeRun(kind, load.tally, began, over, before, named(), marks)


def rollout(site: ServedSite, *roles: str, long_share: float = 0.25) -> ChangeRun:
    """One `up` that changes a setting of each of `roles` (ROLES), replacing every pod of them, under load: the roles
    roll at once, each its own Deployment's way, as an `up` of several settings rolls them."""
    changed = {role: ROLES[role] for role in roles}
    selectors = [selector for _key, _edit, selector in changed.values()]

    def change(marks: dict[str, float]) -> None:
        old = {name for selector in selectors for name in pods(site, selector)}
        apply_change(site, {key: edit for key, edit, _selector in changed.values()})
        site.wait_for(
            f"every pod of {', '.join(roles)} replaced and available",
            lambda: all(rolled_out(site, old, selector) for selector in selectors),
            ROLLOUT_TIMEOUT,
        )

    return under_load(site, f"{'+'.join(roles)} rollout", selectors, change, long_share)


def scaled_to(site: ServedSite, selector: str, replicas: int) -> bool:
    """The Deployment runs exactly `replicas` pods, all Ready, and no pod of it is still terminating."""
    found = pods(site, selector)
    return len(found) == replicas and all(
        not p["metadata"].get("deletionTimestamp") and pod_ready(site, name) for name, p in found.items()
    )


def scale(site: ServedSite, role: str, replicas: int, long_share: float = 0.25) -> ChangeRun:
    """The role's Deployment scaled to `replicas` under load, through the scale subresource as the HPA does when KEDA's
    signal asks for it (scale-in: pods deleted with their preStop and grace period; scale-out: new pods picked once
    Ready). KEDA's own decision is tests/localsite/test_autoscaling.py's."""
    _key, _edit, selector = ROLES[role]
    (deployment,) = site.get("deployments", f"--selector={selector}")

    def change(marks: dict[str, float]) -> None:
        name = deployment["metadata"]["name"]
        site.kubectl("scale", f"deployment/{name}", f"--replicas={replicas}", f"--namespace={site.namespace}")
        site.wait_for(f"{role} at {replicas} Ready pods", lambda: scaled_to(site, selector, replicas), ROLLOUT_TIMEOUT)

    return under_load(site, f"{role} scaled to {replicas}", [selector], change, long_share)


def program_pid(site: ServedSite, pod: str, container: str) -> int:
    pid = site.served()[pod]["programs"][container]["pid"]
    if not pid:
        raise AssertionError(f"{container} of {pod} does not run: {site.served()[pod]}")
    return pid


# Run inside a pod's network namespace: the certificate its server at 127.0.0.1:PORT presents (base64 DER), offering
# h2 as the gateway's gRPC client does; the certificate is not checked, as the gateway does not check it.
SERVED_CERTIFICATE = """
import base64, socket, ssl, sys
context = ssl.create_default_context()
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
context.set_alpn_protocols(["h2"])
with context.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)) as tls:
    print(base64.b64encode(tls.getpeercert(binary_form=True)).decode())
"""


def served_certificate(site: ServedSite, pod: str, container: str, port: int) -> bytes:
    """The DER certificate `container` of `pod` serves on `port` (TLS), read from inside the pod's network."""
    netns = f"--net=/proc/{program_pid(site, pod, container)}/ns/net"
    proc = subprocess.run(
        ["nsenter", netns, "--", sys.executable, "-c", SERVED_CERTIFICATE, str(port)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode != 0:
        raise AssertionError(f"no TLS handshake with {container} of {pod} on :{port}: {proc.stderr.strip()}")
    return base64.b64decode(proc.stdout)


def restarts(site: ServedSite, pod: str, container: str) -> int:
    """The container's restartCount as the site's agent reports it in the pod's status."""
    status = site.get("pod", pod)["status"]
    for entry in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if entry["name"] == container:
            return entry.get("restartCount", 0)
    return 0


def kill(site: ServedSite, role: str, container: str, long_share: float = 0.0) -> ChangeRun:
    """`kill -9` of `container`'s program in the first pod of `role`, under load, until the site has restarted it
    and the pod is Ready again (marks: "killed", "ready again")."""
    _key, _edit, selector = ROLES[role]
    victim = sorted(pods(site, selector))[0]

    def change(marks: dict[str, float]) -> None:
        before = restarts(site, victim, container)
        marks["killed"] = time.monotonic()
        os.kill(program_pid(site, victim, container), signal.SIGKILL)
        site.wait_for(
            f"{container} of {victim} restarted and the pod Ready again",
            lambda: restarts(site, victim, container) > before and pod_ready(site, victim),
            RESTART_TIMEOUT,
        )
        marks["ready again"] = time.monotonic()

    run = under_load(site, f"{role} {container} kill -9", [selector], change, long_share)
    run.before = {victim}
    return run
