"""What a preview proposes, read from the engine's own events: those the Automation API hands over
(`proposal_of_events`, what `python -m stacks up` reads) or the lines of a `pulumi preview --event-log FILE`
(`proposal`).

scripts/up previews a cluster stack first (with `--refresh` and the policy pack) and runs the update only when
the preview proposes a change: a no-op `up` is then one pass of the engine instead of two (`pulumi up` runs
its update after the preview even when nothing changes). Anything this cannot read as "nothing to do" (no
summary, a step that changes something, operations an interrupted update left pending, a state the engine
calls possibly corrupt) means the update runs, as it always did.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

# Step kinds that leave the stack's resources as they are; every other kind (create, update, delete,
# replace, create-replacement, delete-replaced, import, discard, ...) is a change.
UNCHANGING_STEPS = frozenset({"same", "read", "refresh"})
# The engine's warning when the previous update was interrupted with operations in flight
# (pkg/resource/deploy/deployment_executor.go, printPendingOperationsWarning).
PENDING_WARNING = "pending operations from previous deployment"


@dataclasses.dataclass(frozen=True)
class Proposal:
    """The preview's summary: steps by kind, and what makes an update necessary anyway."""

    steps: dict[str, int]
    summarised: bool  # the engine wrote its summary event (a preview that ran to its end)
    pending: bool  # the previous update left operations pending: the update resolves them
    maybe_corrupt: bool

    @property
    def changes(self) -> dict[str, int]:
        return {kind: n for kind, n in sorted(self.steps.items()) if n and kind not in UNCHANGING_STEPS}

    @property
    def nothing_to_do(self) -> bool:
        return self.summarised and not self.changes and not self.pending and not self.maybe_corrupt

    def describe(self) -> str:
        if not self.summarised:
            return "the preview wrote no summary"
        if self.pending:
            return "the previous update left operations pending"
        if self.maybe_corrupt:
            return "the engine reports the state as possibly corrupt"
        if self.changes:
            return ", ".join(f"{n} to {kind}" for kind, n in self.changes.items())
        return f"nothing to change ({self.steps.get('same', 0)} unchanged)"


def proposal(lines: Iterable[str]) -> Proposal:
    """The Proposal of an event log's lines (one engine event as JSON per line; other lines are skipped)."""
    summaries: list[tuple[bool, dict]] = []
    diagnostics: list[str] = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        summary = event.get("summaryEvent")
        if isinstance(summary, dict):
            changes = summary.get("resourceChanges") or {}
            summaries.append((bool(summary.get("maybeCorrupt")), changes if isinstance(changes, dict) else {}))
        diagnostic = event.get("diagnosticEvent")
        if isinstance(diagnostic, dict):
            diagnostics.append(str(diagnostic.get("message", "")))
    return _tally(summaries, diagnostics)


def proposal_of_events(events: Iterable[Any]) -> Proposal:
    """The Proposal of the engine's events as Pulumi's Automation API hands them to `python -m stacks up`
    (`pulumi.automation.EngineEvent`: `summary_event`, `diagnostic_event`), read by attribute: this module imports no
    Pulumi SDK."""
    summaries: list[tuple[bool, dict]] = []
    diagnostics: list[str] = []
    for event in events:
        summary = getattr(event, "summary_event", None)
        if summary is not None:
            changes = {getattr(kind, "value", kind): n for kind, n in (summary.resource_changes or {}).items()}
            summaries.append((bool(summary.maybe_corrupt), changes))
        diagnostic = getattr(event, "diagnostic_event", None)
        if diagnostic is not None:
            diagnostics.append(str(diagnostic.message or ""))
    return _tally(summaries, diagnostics)


def _tally(summaries: list[tuple[bool, dict]], diagnostics: list[str]) -> Proposal:
    steps: dict[str, int] = {}
    for _, changes in summaries:
        for kind, n in changes.items():
            steps[str(kind)] = steps.get(str(kind), 0) + (n if isinstance(n, int) else 1)
    return Proposal(
        steps=steps,
        summarised=bool(summaries),
        pending=any(PENDING_WARNING in message for message in diagnostics),
        maybe_corrupt=any(corrupt for corrupt, _ in summaries),
    )
