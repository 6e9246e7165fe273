"""Changes a live stack cannot take: its retained volumes, as the cluster holds them, against the stack file.

The data volumes (each role's compile cache, the weights PVC of a download) and their Namespace are
retained (`storage.retainOnDelete`): Pulumi never deletes them, so a change that would replace one
leaves the old volume, with its data, behind, and a PVC's spec is immutable apart from a larger size on
a StorageClass that allows expansion, so the API server refuses an in-place change at apply, half way
through an update. `python -m stacks preflight` asks these questions before anything is applied and
names the object, the field and the way forward. Pure: the live volumes come in as data
(`stacks.site.live_claims` reads them with kubectl).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core.config import StackConfig
from core.labels import PART_OF_LABEL, compile_cache_pvc_name
from core.sizing import parse_quantity

MIGRATION = "docs/recovery.md, Changing a retained volume"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim's fields that matter here, as the stack would create it or as it is live."""

    namespace: str
    name: str
    storage_class: str | None  # None: the cluster's default (wanted), or none set (live)
    size: str
    access_modes: tuple[str, ...]
    part_of: str | None = None  # the stack that made it (app.kubernetes.io/part-of), live only


@dataclasses.dataclass(frozen=True)
class WantedClaim:
    claim: Claim
    name_key: str | None  # the stack file key that names it, when there is one
    size_key: str


def wanted_claims(cfg: StackConfig) -> list[WantedClaim]:
    """The PVCs the stack creates: one compile cache per engine role, and the weights volume of a download."""

    def claim(name: str, size: str) -> Claim:
        return Claim(cfg.namespace, name, cfg.storage.storage_class, size, ("ReadWriteMany",))

    found = [
        WantedClaim(
            claim(compile_cache_pvc_name(cfg.name, role), cfg.storage.compile_cache_size),
            None,
            "storage.compileCacheSize",
        )
        for role, _ in cfg.engine_roles()
    ]
    if cfg.weights.source == "download":
        found.append(WantedClaim(claim(cfg.weights.pvc, cfg.weights.size), "weights.pvc", "weights.size"))
    return found


def claim_of(obj: dict[str, Any]) -> Claim:
    """A live PVC (a `kubectl get pvc -o json` item) as a Claim."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return Claim(
        meta.get("namespace", ""),
        meta.get("name", ""),
        spec.get("storageClassName"),
        str(((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")),
        tuple(spec.get("accessModes") or ()),
        (meta.get("labels") or {}).get(PART_OF_LABEL),
    )


def claim_refusals(wanted: WantedClaim, live: Claim | None, *, stack: str, expandable: bool) -> list[str]:
    """What the API server would refuse (or Pulumi would leave behind) when the stack applies `wanted` over
    the live PVC of the same name; empty when it can take it. `expandable`: the live StorageClass allows
    volume expansion."""
    if live is None:
        return []
    want = wanted.claim
    where = f"PersistentVolumeClaim {want.namespace}/{want.name}"
    if live.part_of != stack:
        owner = f"stack {live.part_of!r}'s" if live.part_of else "not made by a stack (pre-loaded?)"
        forward = (
            (
                f"give the stack's volume a new name ({wanted.name_key}: {want.name}-2), or use the existing "
                f"one as it is (weights.source: pvc)"
            )
            if wanted.name_key == "weights.pvc"
            else f"remove or rename the existing PVC first ({MIGRATION})"
        )
        return [
            f"{where} already exists and is {owner}: the stack would create a PVC of that name, which the API "
            f"server refuses (a PVC's spec is immutable) and which would put this stack in charge of a volume it "
            f"did not make. Way forward: {forward}."
        ]
    problems = []
    migrate = f"or move the data to a new volume ({MIGRATION})"
    if want.storage_class is not None and want.storage_class != live.storage_class:
        problems.append(
            f"{where}: spec.storageClassName is {live.storage_class!r} and storage.storageClass asks "
            f"for {want.storage_class!r}; a PVC's StorageClass is immutable and this volume is retained, "
            f"so the change can only be refused by the API server or leave the old volume behind. Way "
            f"forward: keep storage.storageClass: {live.storage_class}, {migrate}."
        )
    if set(want.access_modes) != set(live.access_modes):
        problems.append(
            f"{where}: spec.accessModes is {list(live.access_modes)} and the stack asks for "
            f"{list(want.access_modes)}; access modes are immutable. Way forward: "
            f"{migrate.removeprefix('or ')}."
        )
    have, asked = parse_quantity(live.size), parse_quantity(want.size)
    if asked < have:
        problems.append(
            f"{where}: {wanted.size_key} {want.size} is smaller than the live {live.size}; a PVC never "
            f"shrinks. Way forward: keep {wanted.size_key}: {live.size}, {migrate}."
        )
    elif asked > have and not expandable:
        problems.append(
            f"{where}: {wanted.size_key} {want.size} is larger than the live {live.size}, and its "
            f"StorageClass {live.storage_class!r} does not allow volume expansion "
            f"(allowVolumeExpansion). Way forward: keep {wanted.size_key}: {live.size}, {migrate}."
        )
    return problems


def moved_namespace(cfg: StackConfig, stack_claims: list[Claim]) -> str | None:
    """The stack's retained volumes live in another namespace than `namespace` asks for: changing it would
    start the stack empty in the new one and leave them (and the old Namespace) behind."""
    elsewhere = sorted({c.namespace for c in stack_claims if c.part_of == cfg.name and c.namespace != cfg.namespace})
    if not elsewhere:
        return None
    names = ", ".join(f"{c.namespace}/{c.name}" for c in stack_claims if c.namespace in elsewhere)
    return (
        f"namespace is {cfg.namespace!r}, but this stack's retained volumes live in {', '.join(elsewhere)} "
        f"({names}): the Namespace is retained with them, so the change would leave them behind and start "
        f"the stack empty (compile caches, downloaded weights). Way forward: keep namespace: {elsewhere[0]}, "
        f"or move the data first ({MIGRATION})."
    )


def live_stack_refusals(cfg: StackConfig, live: list[Claim], expandable_classes: set[str]) -> list[str]:
    """Every change to the retained volumes the live stack cannot take (see claim_refusals, moved_namespace)."""
    by_name = {(c.namespace, c.name): c for c in live}
    problems = [p for p in [moved_namespace(cfg, live)] if p]
    for wanted in wanted_claims(cfg):
        current = by_name.get((wanted.claim.namespace, wanted.claim.name))
        expandable = current is not None and current.storage_class in expandable_classes
        problems += claim_refusals(wanted, current, stack=cfg.name, expandable=expandable)
    return problems
