"""Reading any manifest: findings, resource ids, namespaces, kinds, API groups, name lists (label selectors:
core/selectors.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

# --- findings ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Finding:
    """What a rule found wrong: the resource (`Kind/namespace/name`) and the message (field, values,
    rule, fix). The enforcement level is not the rule's to decide: it comes from the pack's config."""

    resource: str
    message: str

    @property
    def text(self) -> str:
        """The message with the resource in front, as Pulumi shows it."""
        kind, _, rest = self.resource.partition("/")
        return f"{kind} {rest}: {self.message}"


def resource_id(manifest: dict) -> str:
    """`Kind/namespace/name` (`Kind/name` for cluster-scoped objects)."""
    metadata = manifest.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "?")
    kind = manifest.get("kind", "?")
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def namespace_of(manifest: dict) -> str:
    return (manifest.get("metadata") or {}).get("namespace") or "default"


def of_kind(manifests: Iterable[dict], kind: str) -> list[dict]:
    return [m for m in manifests if m.get("kind") == kind]


def find(manifests: Iterable[dict], kind: str, namespace: str, name: str) -> dict | None:
    for manifest in manifests:
        if (
            manifest.get("kind") == kind
            and namespace_of(manifest) == namespace
            and (manifest.get("metadata") or {}).get("name") == name
        ):
            return manifest
    return None


def api_group(api_version: str) -> str:
    """`inference.networking.k8s.io/v1` -> `inference.networking.k8s.io`; `v1` -> `` (core)."""
    return api_version.rpartition("/")[0]


def name_list(names: Iterable[str], limit: int = 3) -> str:
    """`a, b, c and 5 more`: messages stay readable for stacks of many pools."""
    names = sorted(set(names))
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


def show_labels(labels: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(labels.items())) + "}"
