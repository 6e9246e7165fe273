"""core/selectors.py: label selectors as apimachinery's labels.Selector reads them (the policy pack matches manifests
with them, the local site live pods)."""

import pytest

from core.selectors import label_selector_matches, selects

LABELS = {"app": "engine", "tier": "1"}


@pytest.mark.parametrize(
    "selector, matches",
    [
        ({}, True),  # an empty selector selects everything
        ({"matchLabels": {"app": "engine"}}, True),
        ({"matchLabels": {"app": "router"}}, False),
        ({"matchLabels": {"tier": 1}}, True),  # a label value is a string: 1 is "1"
        ({"matchLabels": {"app": "engine", "zone": "a"}}, False),  # every pair
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["router", "engine"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["router"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["engine"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["router"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),  # absent: not in
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
        (
            {
                "matchLabels": {"app": "engine"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": [1]},
                    {"key": "zone", "operator": "DoesNotExist"},
                ],
            },
            True,
        ),
        (
            {
                "matchExpressions": [
                    {"key": "app", "operator": "Exists"},
                    {"key": "tier", "operator": "NotIn", "values": ["1"]},
                ]
            },
            False,
        ),  # every expression
    ],
)
def test_a_label_selector_as_the_api_server_reads_it(selector, matches):
    assert label_selector_matches(selector, LABELS) is matches


@pytest.mark.parametrize(
    "match_labels, matches",
    [
        ({}, False),  # an empty equality selector (a Service's, a pool's matchLabels) selects nothing
        ({"app": "engine"}, True),
        ({"tier": 1}, True),  # a label value is a string: 1 is "1"
        ({"app": "engine", "zone": "a"}, False),  # every pair
        ({"app": "router"}, False),
    ],
)
def test_an_equality_selector(match_labels, matches):
    assert selects(match_labels, LABELS) is matches
