"""Reading pod templates: the template of any workload kind, its replicas and service account, and the P/D routing
sidecars it runs (their flags read with the program's defaults; a template's role is read from them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

from core.labels import ROLE_LABEL
from policy.read.flags import Flags, command_line, parse_flags, serve_argv
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


WORKLOAD_KINDS = ("Deployment", "StatefulSet")


def replicas(manifest: dict) -> int:
    """spec.replicas of a Deployment or StatefulSet (1 when unset, as the API server defaults it)."""
    value = (manifest.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def service_account(template: PodTemplate) -> str:
    """The ServiceAccount the pod runs as (`default` when the template names none)."""
    return template.spec.get("serviceAccountName") or template.spec.get("serviceAccount") or "default"


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
