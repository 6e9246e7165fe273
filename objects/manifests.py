"""What every component's objects are made of: a `Child` (a manifest and how Pulumi registers it),
object metadata, and the plain form a manifest is compared and written in."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
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
    keep_inputs: tuple[str, ...] = ()  # fields set at its creation and kept after (Pulumi's ignoreChanges)

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


# --- generic pieces of Kubernetes objects ---------------------------------------------------------------------

NON_ROOT_UID = 65532


def match_labels(labels: dict[str, str]) -> dict[str, Any]:
    return {"matchLabels": labels}


def volume_claim(
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    size: str,
    storage_class: str | None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ReadWriteMany PersistentVolumeClaim (the compile cache, the downloaded weights)."""
    return manifest(
        "v1",
        "PersistentVolumeClaim",
        object_meta(name, namespace, labels, annotations),
        spec={
            "accessModes": ["ReadWriteMany"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    )


# Where a container finds the API's credentials (client-go's in-cluster config reads the token and ca.crt here).
API_TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


API_TOKEN_SECONDS = 3600  # the kubelet renews a projected token at 80% of its life; client-go re-reads the file


def api_token_volume(name: str) -> dict[str, Any]:
    """What the kubelet mounts for an automounted token, as a volume one container can mount alone: the pod's
    ServiceAccount token, the cluster's CA and the namespace."""
    return {
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": API_TOKEN_SECONDS}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ]
        },
    }


def restricted_security_context() -> dict[str, Any]:
    """Containers that need nothing special (EPP, routing sidecar): the `restricted` profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": NON_ROOT_UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def pod_security_context() -> dict[str, Any]:
    return {"seccompProfile": {"type": "RuntimeDefault"}}


def container_ports(named: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in named]


def disruption_budget(
    *, name: str, namespace: str, labels: dict[str, str], selector: dict[str, str], max_unavailable: int
) -> dict[str, Any]:
    """Voluntary evictions (drains, upgrades) take at most max_unavailable pods of a pool at a time."""
    return manifest(
        "policy/v1",
        "PodDisruptionBudget",
        object_meta(name, namespace, labels),
        spec={"maxUnavailable": max_unavailable, "selector": match_labels(selector)},
    )


# --- what a ServiceAccount may do through the API ----------------------------------------------------------------

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"


def role_and_binding(
    account: Child, metadata: dict[str, Any], rules: list[dict[str, Any]], *, role: str, binding: str
) -> list[Child]:
    """A Role with `rules` and the RoleBinding that grants them to `account` (a ServiceAccount's `Child`), both of
    `metadata`; a ClusterRole and ClusterRoleBinding where `metadata` has no namespace. Pulumi names `role` and
    `binding`, the binding after the account and the role."""
    kind = "Role" if metadata["namespace"] is not None else "ClusterRole"
    subject = {"kind": "ServiceAccount", "name": account.name, "namespace": account.manifest["metadata"]["namespace"]}
    return [
        Child(role, manifest(RBAC_API_VERSION, kind, metadata, rules=rules)),
        Child(
            binding,
            manifest(
                RBAC_API_VERSION,
                f"{kind}Binding",
                metadata,
                roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": metadata["name"]},
                subjects=[subject],
            ),
            after=(account.resource_name, role),
        ),
    ]
