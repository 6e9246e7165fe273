"""Rules of the gate on the weights: the volume's size, pinned revisions, a token for gated weights."""

from __future__ import annotations

from collections.abc import Iterable

from core import rules, sizing, weights
from core.config import StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key


def rule_weights(cfg: StackConfig, facts: StackFacts, *, hf_token_set: bool = False) -> Iterable[Issue]:
    """A download fits its volume, is pinned in prod, and has its token when the repositories are gated."""
    settings = cfg.weights
    if settings.source != "download":
        return
    draft = facts.weights.draft
    needed = weights.needed_bytes(cfg.model.name, draft)
    if needed is not None:
        problem = rules.weights_volume_fits(
            int(sizing.parse_quantity(settings.size)),
            needed,
            weights.HEADROOM,
            size_name="weights.size",
            size_text=settings.size,
            what=" + ".join([cfg.model.name] + ([draft] if draft else [])),
        )
        if problem:
            yield Issue(key("weights.size"), problem)
    if cfg.environment == "prod":
        pinned = [("weights.revision", settings.revision, cfg.model.name)]
        if draft:
            pinned.append(("weights.draftRevision", settings.draft_revision, draft))
        for name, revision, repository in pinned:
            problem = rules.revision_pinned(revision, revision_name=name, repository=repository)
            if problem:
                yield Issue(key(name), problem)
    problem = rules.gated_download_token(
        settings.gated,
        hf_token_set or settings.token_secret_exists,
        secret=cfg.hf_token_secret,
        token_name=key("hfToken"),
        exists_name="weights.tokenSecretExists",
    )
    if problem:
        yield Issue(key("weights.gated"), problem)
