"""The first gate: parse the `rebel100:` config namespace and check the rules that relate fields.

`load_config(raw)` returns a `StackConfig` or raises `ConfigError` carrying every problem found,
each with the full key path, the value, the rule and the fix. Nothing is registered before this
returns, so a bad stack file changes nothing. Warnings (advice, not errors) come back separately.

The package: `issues.py` what the gate reports, `parse.py` the config namespace and pydantic's errors (with
did-you-mean), one module per topic of rules (`parallelism`, `kv_tier`, `wiring`, `ports`, `router`, `engine`,
`weights`, `autoscaling`, `images`, `rollout`, `alerts`), each a function (cfg, facts) -> issues; here their order, the
advice, and `validate`, which derives the facts once and passes them to every rule. `blame.py`: of two keys that
disagree, the one to report at.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pydantic

from core import rules
from core import weights as model_weights
from core.config import StackConfig
from core.derive import derive
from core.gate.alerts import rule_alerts
from core.gate.autoscaling import rule_autoscaling
from core.gate.engine import rule_engine_image, rule_groups, rule_lmcache_names, rule_overrides, rule_vllm_args
from core.gate.images import rule_images_dated
from core.gate.issues import ConfigError, Issue, key
from core.gate.kv_tier import rule_kv_tier
from core.gate.parallelism import (
    rule_block_and_memory,
    rule_devices_fit_node,
    rule_pipeline_and_experts,
    rule_pp_with_dp,
)
from core.gate.parse import _pydantic_issues, namespace_values
from core.gate.ports import rule_ports_distinct
from core.gate.rollout import (
    epp_certificate_advice,
    epp_drain_advice,
    rule_engine_grace,
    session_affinity_advice,
    token_load_advice,
)
from core.gate.router import (
    _sidecar_ssrf,
    rule_router_images,
    rule_router_plugin_parameters,
    rule_router_schema,
    rule_sidecar_ssrf,
)
from core.gate.weights import rule_weights
from core.gate.wiring import (
    reuse_units,
    rule_pd_wiring,
    rule_pool_endpoints,
    rule_precise_prefix_cache,
    rule_roles_agree,
)

RULES = (
    rule_overrides,
    rule_images_dated,
    rule_engine_image,
    rule_vllm_args,
    rule_lmcache_names,
    rule_groups,
    rule_pp_with_dp,
    rule_devices_fit_node,
    rule_pipeline_and_experts,
    rule_block_and_memory,
    rule_kv_tier,
    rule_roles_agree,
    rule_pd_wiring,
    rule_precise_prefix_cache,
    rule_pool_endpoints,
    rule_ports_distinct,
    rule_router_images,
    rule_router_plugin_parameters,
    rule_router_schema,
    rule_sidecar_ssrf,
    rule_autoscaling,
    rule_engine_grace,
    rule_alerts,
)


def warnings_for(cfg: StackConfig) -> list[Issue]:
    """Advice that does not stop a deployment."""
    advice = []
    facts = derive(cfg)
    if cfg.router.auto_tune:
        for (block, batched, sub_block), names in reuse_units(cfg, facts).items():
            problem = rules.autotune_block_unit(
                block,
                batched,
                sub_block,
                router_prefix="router.",
                engines=f"the {' and '.join(names)} engines",
                sub_block_name="engine.subBlockCache true",
                precise=cfg.router.prefix_cache == "precise",
            )
            if problem:
                advice.append(Issue(key("router.autoTune"), problem, "router-autotune-block-unit"))
    if cfg.topology == "pd":
        judged, _pool = _sidecar_ssrf(cfg, facts)
        problem = rules.sidecar_ssrf_capable(**judged, image_name="decode.sidecar.image")
        if problem:
            advice.append(Issue(key("decode.sidecar.image"), problem, "sidecar-ssrf-capable"))
    advice.extend(epp_drain_advice(cfg))
    advice.extend(session_affinity_advice(cfg))
    advice.extend(token_load_advice(cfg))
    advice.extend(epp_certificate_advice(cfg))
    settings = cfg.weights
    if settings.source == "download" and model_weights.needed_bytes(cfg.model.name, facts.weights.draft) is None:
        advice.append(
            Issue(
                key("weights.size"),
                f"the size of {cfg.model.name} (or its draft) is not in core.weights.MODEL_BYTES: "
                f"weights.size {settings.size} is not checked against it.",
            )
        )
    if settings.source == "pvc" and cfg.environment == "prod" and not model_weights.is_pinned(settings.revision):
        advice.append(
            Issue(
                key("weights.revision"),
                f"weights.revision {settings.revision!r} is not a commit id: the engines serve whatever "
                f"refs/{settings.revision} points at on the pre-loaded PVC {settings.pvc}. Set the commit "
                f"you loaded, so that the engines, the policy pack and a later bump name it.",
            )
        )
    return advice


def validate(cfg: StackConfig, *, hf_token_set: bool = False) -> list[Issue]:
    """Every cross-field rule; `hf_token_set`: the stack file sets the secret `rebel100:hfToken`."""
    issues: list[Issue] = []
    facts = derive(cfg)  # once: every rule reads the same derived facts
    for rule in RULES:
        issues.extend(rule(cfg, facts))
    issues.extend(rule_weights(cfg, facts, hf_token_set=hf_token_set))
    return issues


def plain_secret_issues(plain: Iterable[str]) -> list[Issue]:
    """A secret key (core.keys.SECRET_KEYS) written in plain text in the stack file: refused at its key with the
    command that stores it encrypted. The value is never part of the message (it is not even passed here)."""
    return [
        Issue(
            full,
            f"{full} is a secret but the stack file holds it in plain text (not `secure:`): anyone who can "
            f"read the file or its history has it, and it would be deployed as it is. Delete the line, "
            f"store the value encrypted with `pulumi config set --secret {full} <value>` (`-s STACK`), "
            f"and revoke the exposed one (the value is not shown here).",
        )
        for full in plain
    ]


def load_config(
    raw: dict[str, Any], source: str = "stack configuration", *, plain_secrets: Iterable[str] = ()
) -> StackConfig:
    """Parse and check one stack's config map; raise ConfigError with every problem at once. `plain_secrets`: the
    secret keys the stack file holds in plain text (core.keys.plain_secret_keys), refused first."""
    plain = plain_secret_issues(plain_secrets)
    try:
        cfg = StackConfig.model_validate(namespace_values(raw))
    except pydantic.ValidationError as error:
        raise ConfigError(plain + _pydantic_issues(error), source) from None
    issues = plain + validate(cfg, hf_token_set=key("hfToken") in raw)
    if issues:
        raise ConfigError(issues, source)
    return cfg


__all__ = [
    "RULES",
    "ConfigError",
    "Issue",
    "key",
    "load_config",
    "namespace_values",
    "plain_secret_issues",
    "rule_weights",
    "validate",
    "warnings_for",
]
