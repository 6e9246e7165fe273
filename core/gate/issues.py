"""What the gate reports: an Issue (key path, message, the pack's policy of the same rule) and the ConfigError carrying
every issue of one stack configuration.
"""

from __future__ import annotations

import dataclasses

from core.config import NAMESPACE


@dataclasses.dataclass(frozen=True)
class Issue:
    path: str
    message: str
    # The policy of the pack that judges the same rule on the render ("" for config-only rules).
    policy: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(ValueError):
    """Every problem of one stack configuration, reported together."""

    def __init__(self, issues: list[Issue], source: str = "stack configuration"):
        self.issues = issues
        self.source = source
        lines = [f"{source} is invalid ({len(issues)} problem{'s' if len(issues) != 1 else ''}):"]
        lines += [f"  - {issue}" for issue in issues]
        super().__init__("\n".join(lines))


def key(path: str) -> str:
    """`prefill.maxNumSeqs` -> `rebel100:prefill.maxNumSeqs`."""
    return f"{NAMESPACE}:{path}"
