"""Reading pod templates: the template of any workload kind, its replicas and service account, and the P/D routing
sidecars it runs (their flags read with the program's defaults; a template's role is read from them)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from typing import Any

from core.cmdline import Flags, parse_flags
from core.labels import ROLE_LABEL
from core.selectors import label_selector_matches
from core.versions import image_name
from core.versions import router as router_versions
from policy.read.flags import command_line, serve_argv
from policy.read.objects import namespace_of, resource_id

# --- pod templates -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PodTemplate:
    """The pod template of a workload (or a bare Pod) together with the object that owns it."""

    owner: dict
    metadata: dict
    spec: dict

    @property
    def resource(self) -> str:
        return resource_id(self.owner)

    @property
    def namespace(self) -> str:
        return namespace_of(self.owner)

    @property
    def labels(self) -> dict:
        return self.metadata.get("labels") or {}

    @property
    def annotations(self) -> dict:
        return self.metadata.get("annotations") or {}

    def containers(self, init: bool = True) -> list[dict]:
        """Containers, then init containers (native sidecars are init containers)."""
        items = list(self.spec.get("containers") or [])
        return items + list(self.spec.get("initContainers") or []) if init else items

    @property
    def role(self) -> str | None:
        """`prefill` / `decode` from the llm-d role label; a pod with a routing sidecar is a decode pod."""
        role = self.labels.get(ROLE_LABEL)
        if role:
            return role
        return "decode" if routing_sidecars(self) else None


def _template_paths(manifest: dict) -> list[list[str]]:
    kind = manifest.get("kind")
    if kind == "Pod":
        return [[]]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"):
        return [["spec", "template"]]
    if kind == "CronJob":
        return [["spec", "jobTemplate", "spec", "template"]]
    if kind == "LeaderWorkerSet":
        return [["spec", "leaderWorkerTemplate", "leaderTemplate"], ["spec", "leaderWorkerTemplate", "workerTemplate"]]
    return []


def pod_templates(manifests: Iterable[dict]) -> Iterator[PodTemplate]:
    for manifest in manifests:
        for path in _template_paths(manifest):
            node: Any = manifest
            for part in path:
                node = (node or {}).get(part) if isinstance(node, dict) else None
            if isinstance(node, dict) and isinstance(node.get("spec"), dict):
                yield PodTemplate(owner=manifest, metadata=node.get("metadata") or {}, spec=node["spec"])


def monitor_covers(monitor: dict, template: PodTemplate) -> bool:
    """The PodMonitor's namespaces and selector take in the pod template."""
    spec = monitor.get("spec") or {}
    namespaces = spec.get("namespaceSelector") or {}
    in_scope = namespaces.get("any") or template.namespace in (namespaces.get("matchNames") or [namespace_of(monitor)])
    return bool(in_scope) and label_selector_matches(spec.get("selector") or {}, template.labels)


def epp_image(manifests: Iterable[dict], namespace: str) -> str | None:
    """The image of the first EPP container (an image named as the llm-d router's EPP) of a pod template in the
    namespace, None when there is none."""
    for template in pod_templates(manifests):
        if template.namespace != namespace:
            continue
        for container in template.containers():
            image = str(container.get("image", ""))
            if image_name(image) in router_versions.EPP_IMAGE_NAMES:
                return image
    return None


WORKLOAD_KINDS = ("Deployment", "StatefulSet")


def replicas(manifest: dict) -> int:
    """spec.replicas of a Deployment or StatefulSet (1 when unset, as the API server defaults it)."""
    value = (manifest.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def service_account(template: PodTemplate) -> str:
    """The ServiceAccount the pod runs as (`default` when the template names none)."""
    return template.spec.get("serviceAccountName") or template.spec.get("serviceAccount") or "default"


# --- termination ---------------------------------------------------------------------------

KUBERNETES_DEFAULT_GRACE_S = 30  # a pod's terminationGracePeriodSeconds when unset
# A preStop exec that sleeps: `sleep N` (N seconds, or GNU sleep's N with a unit), alone or in a shell script.
_SLEEP = re.compile(r"(?:^|[\s;&|(])sleep\s+(\d+)([smh]?)(?=$|[\s;&|)])")
_SLEEP_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


GRACE_FIELD = "spec.template.spec.terminationGracePeriodSeconds"


def grace_period(template: PodTemplate) -> tuple[int | None, str]:
    """The pod's terminationGracePeriodSeconds (Kubernetes' 30 when unset; None when unreadable), and what to say
    before a message about it ("" when it is set)."""
    value = template.spec.get("terminationGracePeriodSeconds")
    if value is None:
        return KUBERNETES_DEFAULT_GRACE_S, f"{GRACE_FIELD} is unset, so Kubernetes' {KUBERNETES_DEFAULT_GRACE_S}: "
    try:
        return int(value), ""
    except (TypeError, ValueError):
        return None, ""


def pre_stop_seconds(container: dict) -> int:
    """How long a container's preStop hook holds it before SIGTERM: a sleep action's seconds, or the `sleep N` of an
    exec command (summed in a shell script). 0 without a preStop, or with one whose duration cannot be read here (an
    httpGet): such a hook is not counted."""
    hook = ((container.get("lifecycle") or {}).get("preStop")) or {}
    sleep = hook.get("sleep") or {}
    if "seconds" in sleep:
        try:
            return max(int(sleep["seconds"]), 0)
        except (TypeError, ValueError):
            return 0
    command = [str(word) for word in (hook.get("exec") or {}).get("command") or []]
    if command and command[0].rsplit("/", 1)[-1] == "sleep":
        command = [" ".join(["sleep", *command[1:]])]
    return sum(int(n) * _SLEEP_UNITS[unit] for word in command for n, unit in _SLEEP.findall(word))


# --- routing sidecar -----------------------------------------------------------------------

SIDECAR_DEFAULTS: dict[str, Any] = {
    "--port": 8000,
    "--vllm-port": 8001,
    "--data-parallel-size": 1,
    "--kv-connector": "nixlv2",
}


@dataclasses.dataclass(frozen=True)
class Sidecar:
    """The llm-d routing sidecar of a decode pod (Go flags; defaults of llm-d-routing-sidecar)."""

    template: PodTemplate
    container: dict
    flags: Flags

    @property
    def name(self) -> str:
        return self.container.get("name", "?")

    def integer(self, flag: str) -> int | None:
        return self.flags.integer(flag, SIDECAR_DEFAULTS[flag])

    @property
    def connector(self) -> str:
        return self.flags.text("--kv-connector") or self.flags.text("--connector") or SIDECAR_DEFAULTS["--kv-connector"]


def routing_sidecars(template: PodTemplate) -> list[Sidecar]:
    found = []
    for container in template.containers():
        if serve_argv(container) is not None:
            continue
        flags = parse_flags(command_line(container), go_style=True)
        image = str(container.get("image", ""))
        if (
            "--vllm-port" in flags.values
            or "routing-sidecar" in image
            or "disagg-sidecar" in image
            or container.get("name") == "routing-proxy"
        ):
            found.append(Sidecar(template, container, flags))
    return found
