"""Engines serve what their weights volume holds.

A download Job (or a weights PVC) records what it puts on the volume in annotations
(`rebel100.ai/model`, `rebel100.ai/model-revision`, and for an EAGLE-3 draft `rebel100.ai/draft-model`,
`rebel100.ai/draft-revision`). An engine that mounts that claim must serve the same model id (its first
positional argument) at the same revision (`--revision`, `main` when absent), and its speculative draft
at the draft's revision: with HF_HUB_OFFLINE the engine can read nothing else, and a hand edit of one
side is the silent mix this rule refuses.
"""

from __future__ import annotations

from core import rules, weights
from policy.facts import Facts
from policy.read.engines import Engine, engines
from policy.read.objects import Finding, namespace_of, resource_id
from policy.read.pods import PodTemplate, pod_templates

UNSET_REVISION = "main"  # vLLM's and huggingface_hub's default revision


def _claims(spec: dict) -> set[str]:
    return {
        str((volume.get("persistentVolumeClaim") or {}).get("claimName"))
        for volume in spec.get("volumes") or []
        if isinstance(volume, dict) and volume.get("persistentVolumeClaim")
    }


def _holders(manifests: list[dict]) -> dict[tuple[str, str], list[tuple[str, dict]]]:
    """(namespace, claim) -> [(object, its weights annotations)]: the annotated Jobs that fill the claim, else the
    claim's own annotations (a pre-loaded PVC someone annotated, or the stack's when its Job is not in the set)."""
    held: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for template in pod_templates(manifests):
        notes = (template.owner.get("metadata") or {}).get("annotations") or {}
        if weights.MODEL_ANNOTATION in notes:
            for claim in _claims(template.spec):
                held.setdefault((template.namespace, claim), []).append((template.resource, notes))
    for manifest in manifests:
        notes = (manifest.get("metadata") or {}).get("annotations") or {}
        key = (namespace_of(manifest), str((manifest.get("metadata") or {}).get("name")))
        if manifest.get("kind") == "PersistentVolumeClaim" and weights.MODEL_ANNOTATION in notes and key not in held:
            held[key] = [(resource_id(manifest), notes)]
    return held


def _draft(engine: Engine) -> tuple[str, str] | None:
    spec = engine.flags.json("--speculative-config")
    if not isinstance(spec, dict) or not spec.get("model"):
        return None
    return str(spec["model"]), str(spec.get("revision") or UNSET_REVISION)


def _engine_claims(template: PodTemplate, engine: Engine) -> set[str]:
    """Claims the engine container mounts (a pod may mount a claim only in another container)."""
    names = {str(m.get("name")) for m in engine.container.get("volumeMounts") or []}
    volumes = [v for v in template.spec.get("volumes") or [] if isinstance(v, dict) and v.get("name") in names]
    return _claims({"volumes": volumes})


def engine_weights_match(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Each engine's model, revision and draft equal what the download Job (or PVC) of its volume holds."""
    held = _holders(manifests)
    found = []
    for engine in engines(manifests):
        for claim in sorted(_engine_claims(engine.template, engine)):
            for holder, notes in held.get((engine.template.namespace, claim), []):
                by = f"{holder}, annotations {weights.MODEL_ANNOTATION} and {weights.REVISION_ANNOTATION}"
                checks = [
                    rules.weights_match(
                        "model",
                        f"{engine.model}@{engine.flags.text('--revision') or UNSET_REVISION}",
                        f"{notes.get(weights.MODEL_ANNOTATION)}@"
                        f"{notes.get(weights.REVISION_ANNOTATION, UNSET_REVISION)}",
                        held_by=by,
                    )
                ]
                draft = _draft(engine)
                if draft is not None and weights.DRAFT_ANNOTATION in notes:
                    checks.append(
                        rules.weights_match(
                            "draft",
                            f"{draft[0]}@{draft[1]}",
                            f"{notes[weights.DRAFT_ANNOTATION]}@"
                            f"{notes.get(weights.DRAFT_REVISION_ANNOTATION, UNSET_REVISION)}",
                            held_by=(
                                f"{holder}, annotations {weights.DRAFT_ANNOTATION} and "
                                f"{weights.DRAFT_REVISION_ANNOTATION}"
                            ),
                        )
                    )
                elif draft is not None:
                    checks.append(
                        rules.weights_match("draft", f"{draft[0]}@{draft[1]}", "no draft model", held_by=holder)
                    )
                found += [
                    Finding(engine.resource, f"container {engine.name} (claim {claim}): {problem}")
                    for problem in checks
                    if problem
                ]
    return found
