"""stacks.events: what a preview proposes (`python -m stacks up` runs the update only when the preview proposes
something). The lines are engine events as `pulumi preview --event-log` writes them (apitype.EngineEvent: one JSON
object per line); the Automation API's parsed events propose the same."""

from __future__ import annotations

import json

import pytest

from stacks.events import proposal, proposal_of_events


def summary(changes: dict, corrupt: bool = False) -> str:
    return json.dumps(
        {
            "sequence": 90,
            "timestamp": 1764556800,
            "summaryEvent": {
                "maybeCorrupt": corrupt,
                "durationSeconds": 3,
                "resourceChanges": changes,
                "PolicyPacks": {"rebel100-serving-policies": "v0.1.0"},
            },
        }
    )


def diagnostic(message: str, severity: str = "warning") -> str:
    return json.dumps(
        {
            "sequence": 2,
            "timestamp": 1764556797,
            "diagnosticEvent": {"message": message, "color": "never", "severity": severity},
        }
    )


PRELUDE = [
    json.dumps({"sequence": 0, "timestamp": 1764556797, "preludeEvent": {"config": {}}}),
    json.dumps(
        {
            "sequence": 1,
            "timestamp": 1764556797,
            "resourcePreEvent": {
                "metadata": {"op": "same", "urn": "urn:pulumi:prod-4p4d::rebel100-serving::pulumi:pulumi:Stack::x"}
            },
        }
    ),
]


def test_a_preview_of_unchanged_resources_proposes_nothing():
    found = proposal([*PRELUDE, summary({"same": 38})])
    assert found.nothing_to_do and found.changes == {}
    assert found.describe() == "nothing to change (38 unchanged)"


@pytest.mark.parametrize(
    "kind", ["create", "update", "delete", "replace", "create-replacement", "delete-replaced", "import", "discard"]
)
def test_every_other_step_is_a_change(kind):
    found = proposal([*PRELUDE, summary({"same": 37, kind: 1})])
    assert not found.nothing_to_do and found.changes == {kind: 1}
    assert found.describe() == f"1 to {kind}"


def test_refresh_and_read_steps_change_nothing():
    assert proposal([summary({"same": 30, "refresh": 8, "read": 1})]).nothing_to_do


def test_no_summary_is_not_nothing():
    """A preview cut short (or a log from something else) wrote no summary: the update runs."""
    for lines in ([], PRELUDE, ["not json", "[1, 2]", '"text"']):
        found = proposal(lines)
        assert not found.summarised and not found.nothing_to_do
        assert found.describe() == "the preview wrote no summary"


def test_pending_operations_of_an_interrupted_update_make_the_update_run():
    warning = (
        "Attempting to deploy or update resources with 1 pending operations from previous deployment.\n"
        "  * urn:pulumi:prod-4p4d::rebel100-serving::kubernetes:apps/v1:Deployment::d, interrupted while "
        "updating\n"
    )
    found = proposal([*PRELUDE, diagnostic(warning), summary({"same": 38})])
    assert found.pending and not found.nothing_to_do
    assert found.describe() == "the previous update left operations pending"


def test_a_possibly_corrupt_state_makes_the_update_run():
    found = proposal([summary({"same": 38}, corrupt=True)])
    assert not found.nothing_to_do and "corrupt" in found.describe()


def test_malformed_fields_are_read_safely():
    lines = [
        json.dumps({"summaryEvent": {"resourceChanges": {"same": "many", "update": None}}}),
        json.dumps({"summaryEvent": "x"}),
        json.dumps({"diagnosticEvent": ["x"]}),
        "{",
        "null",
    ]
    found = proposal(lines)
    assert found.summarised and not found.nothing_to_do  # "update" counted, whatever its count says


@pytest.mark.parametrize(
    "lines",
    [
        [*PRELUDE, summary({"same": 38})],
        [*PRELUDE, summary({"same": 36, "update": 2})],
        [
            *PRELUDE,
            diagnostic("Attempting to deploy or update resources with 1 pending operations from previous deployment"),
        ],
        [*PRELUDE, summary({"same": 38}, corrupt=True)],
        PRELUDE,
    ],
)
def test_the_automation_apis_events_propose_what_the_event_log_does(lines):
    """`python -m stacks up` reads the events the Automation API parses (pulumi.automation.EngineEvent) instead of an
    event log's lines: the same events give the same proposal."""
    from pulumi.automation import EngineEvent

    events = [EngineEvent.from_json(json.loads(line)) for line in lines]
    assert proposal_of_events(events) == proposal(lines)
