"""Kubernetes label selectors, as the API server matches them: what the policy pack reads of a manifest and the local
site's kubelet and Prometheus of a live pod."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selects(match_labels: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """A non-empty equality selector matches labels that contain all its pairs."""
    return bool(match_labels) and all(labels.get(k) == str(v) for k, v in match_labels.items())


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """A Kubernetes LabelSelector (matchLabels and matchExpressions); an empty selector matches everything."""
    if not all(labels.get(k) == str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = (
            expression.get("key"),
            expression.get("operator"),
            [str(v) for v in expression.get("values") or []],
        )
        present = key in labels
        if (
            (operator == "In" and labels.get(key) not in values)
            or (operator == "NotIn" and present and labels[key] in values)
            or (operator == "Exists" and not present)
            or (operator == "DoesNotExist" and present)
        ):
            return False
    return True
