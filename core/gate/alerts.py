"""Rules of the gate on the stack's alerts (core/alerts.py): every engine series an alert reads is one the pinned engine
image serves.

The EPP's counters need no check here: the render names them by the pinned EPP's generation (core/versions/router.py),
and a pin of no generation is older than a feature its render uses, which router-images-have-features refuses. The pack
judges them (policy/alerting.py): a PrometheusRule edited by hand may name another generation's counter.
"""

from __future__ import annotations

from collections.abc import Iterable

from core import alerts, rules
from core.config import StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key
from core.versions import engine as engine_versions

POLICY = "alerts-served"


def rule_alerts(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """The rendered alerts read engine series the pinned image serves: an alert on a series nobody serves stays silent
    through its fault."""
    if not alerts.rendered(cfg):
        return
    readers: dict[str, list[alerts.Alert]] = {}
    for alert in alerts.alerts(cfg):
        for read in alert.reads:
            if read.source == alerts.ENGINE:
                readers.setdefault(read.series, []).append(alert)
    for series, found in readers.items():
        feature = engine_versions.METRICS[series]
        problem = rules.alert_series_served(
            [a.name for a in found],
            series,
            alerts.served_as(series, cfg.engine.image),
            image=f"engine.image {cfg.engine.image}",
            fix=(
                f"Pin engine.image {feature.since} or later ({feature.source}), or set observability.alerts.enabled "
                f"false (no alerts at all)."
            ),
        )
        if problem:
            yield Issue(key("engine.image"), problem, POLICY)
