"""Rules of the gate on rollouts: a stopping engine pod finishes the requests it started before the kubelet kills it.

The EPP's side needs no rule here: its grace period is derived from router.drainSeconds (core.sizing.
epp_grace_seconds), so the render cannot give it one too short; the pack judges a hand-edited EPP
(`epp-grace-covers-drain`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from core import routing, rules
from core.config import Router, StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key
from core.versions import router as router_versions


def rule_engine_grace(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """The engine pods' grace period covers their preStop sleep and their drain (`--shutdown-timeout`)."""
    rollout = cfg.rollout
    problem = rules.grace_covers_drain(
        rollout.termination_grace_period_seconds,
        rollout.pre_stop_seconds,
        rollout.drain_seconds,
        grace_name="rollout.terminationGracePeriodSeconds",
        pre_stop_name="rollout.preStopSeconds",
        drain_name="rollout.drainSeconds",
    )
    if problem:
        yield Issue(key("rollout.terminationGracePeriodSeconds"), problem, "engine-grace-covers-drain")


def epp_drain_advice(cfg: StackConfig) -> Iterable[Issue]:
    """Advice: router.drainSeconds set for an EPP pin without `--drain-timeout` (it stops at once on SIGTERM)."""
    if "drain_seconds" not in cfg.router.model_fields_set or routing.epp_drain_seconds(cfg.router) is not None:
        return
    since = router_versions.EPP_FLAGS[router_versions.DRAIN_TIMEOUT_FLAG].since
    yield Issue(
        key("router.drainSeconds"),
        f"router.drainSeconds {cfg.router.drain_seconds} is set, but {cfg.router.image} (router.image) has no "
        f"{router_versions.DRAIN_TIMEOUT_FLAG} (first in {since}): on SIGTERM it refuses new ext_proc streams at "
        f"once, so the requests the gateway sends it before it sees the pod go fail, and the setting has no effect. "
        f"Pin {since} or later for a drain, or remove the setting.",
    )


def epp_certificate_advice(cfg: StackConfig) -> Iterable[Issue]:
    """Advice: a prod stack whose EPP makes its own certificate at every start (router.certificate epp)."""
    if cfg.environment != "prod" or cfg.router.certificate != "epp":
        return
    yield Issue(
        key("router.certificate"),
        "router.certificate epp: every start of the EPP (a rollout, a crash, a node drain) makes a self-signed "
        "RSA-4096 key before its ext_proc port listens, 2.4-21.5 s on a 2-core node (docs/performance.md). "
        f"{routing.without_epp(cfg.router.failure_mode)} Set router.certificate "
        "stack (the default): the stack makes the certificate once and the EPP reads it at its start.",
    )


def _weight_the_render_drops(settings: Router, field: str, rendered: Callable[[Router], int]) -> int | None:
    """The weight `field` was given in the stack file when the render leaves its scorer out (`rendered` gives 0 for
    this pin), else None: a default the pin cannot use is no one's choice, a value set by hand is."""
    weight: int = getattr(settings, field)
    if field not in settings.model_fields_set or not weight or rendered(settings):
        return None
    return weight


def session_affinity_advice(cfg: StackConfig) -> Iterable[Issue]:
    """Advice: router.sessionAffinityWeight set for an EPP pin that cannot keep a session a client names."""
    settings = cfg.router
    weight = _weight_the_render_drops(settings, "session_affinity_weight", routing.session_affinity_weight)
    if weight is None:
        return
    since = router_versions.SESSION_ID_STRATEGY.since
    yield Issue(
        key("router.sessionAffinityWeight"),
        f"router.sessionAffinityWeight {weight} is set, but {settings.image} "
        f"(router.image) cannot keep a session a client names (agent-identity and session-affinity-scorer's "
        f"session_id strategy, first in {since}): the render leaves session affinity out, so the next turn of a "
        f"session shorter than a router block goes by load. Pin {since} or later, or remove the setting.",
    )


def token_load_advice(cfg: StackConfig) -> Iterable[Issue]:
    """Advice: router.prefillTokenLoadScorerWeight set for an EPP pin without token-load-scorer (P/D: AGG's own
    token-load-scorer is another matter)."""
    settings = cfg.router
    weight = _weight_the_render_drops(settings, "prefill_token_load_scorer_weight", routing.prefill_token_load_weight)
    if weight is None or cfg.topology != "pd":
        return
    since = router_versions.PLUGIN_TYPES["token-load-scorer"].since
    yield Issue(
        key("router.prefillTokenLoadScorerWeight"),
        f"router.prefillTokenLoadScorerWeight {weight} is set, but "
        f"{settings.image} (router.image) has no token-load-scorer (first in {since}): the render leaves it out, so "
        f"sessions that begin at once spread over the prefill engines by a queue read up to a scrape before. Pin "
        f"{since} or later, or remove the setting.",
    )
