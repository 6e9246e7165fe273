"""What every component's objects are made of: a `Child` (a manifest and how Pulumi registers it),
object metadata, and the plain form a manifest is compared and written in."""

from __future__ import annotations

import dataclasses
from typing import Any

# The stack owns its objects: a field someone changed with kubectl (another server-side-apply field
# manager, e.g. `kubectl scale`) is taken back by the next `up` instead of failing it with a conflict.
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"


@dataclasses.dataclass(frozen=True)
class Child:
    """One object a component owns, and how Pulumi registers it."""

    resource_name: str  # the Pulumi resource name, made from the component's name
    manifest: dict[str, Any]  # the object as the API server reads it: apiVersion, kind, metadata, camelCase fields
    after: tuple[str, ...] = ()  # resource names of siblings it is created after
    retain_on_delete: bool = False  # a data volume: kept in the cluster when the stack deletes it
    timeout: str | None = None  # how long `up` waits for it to be created or updated (e.g. "2h")

    @property
    def kind(self) -> str:
        kind: str = self.manifest["kind"]
        return kind

    @property
    def name(self) -> str:
        name: str = self.manifest["metadata"]["name"]
        return name


def object_meta(
    name: str, namespace: str | None, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """Metadata of a top-level object: the patch-force annotation on every one of them."""
    return {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "annotations": {PATCH_FORCE_ANNOTATION: "true", **(annotations or {})},
    }


def cluster_scoped_name(namespace: str, stack_name: str, suffix: str) -> str:
    """The name of a stack's cluster-scoped object (a ClusterRole, a ClusterRoleBinding): the namespace in it too,
    since two stacks of one name in two namespaces share the cluster's names."""
    return f"{namespace}-{stack_name}-{suffix}"


def manifest(api_version: str, kind: str, metadata: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """An object in its plain form (see `plain`)."""
    obj: dict[str, Any] = plain({"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields})
    return obj


# Keys that lead an object when it is written (`name` first reads like hand-written YAML).
_LEADING_KEYS = ("apiVersion", "kind", "metadata", "name")


def plain(value: Any) -> Any:
    """Plain YAML-able data in a stable key order, None values left out, whole numbers as int (Pulumi's
    wire carries numbers as doubles): the form the render writes and the pack and tests compare."""
    if isinstance(value, dict):
        keys = [k for k in _LEADING_KEYS if k in value] + sorted(k for k in value if k not in _LEADING_KEYS)
        return {k: plain(value[k]) for k in keys if value[k] is not None}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
