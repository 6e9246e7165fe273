"""Rules of the gate on the router: the EPP and sidecar pins, their SSRF protection, plugin parameters and the
rendered EndpointPickerConfig against the pinned schema.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any

from core import labels, routing, rules, serving
from core.config import Router, StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key
from core.versions import Feature, epp_schema, image_version, missing_features
from core.versions import router as router_versions


def rendered_sidecar_args(cfg: StackConfig, facts: StackFacts) -> list[str]:
    """The decode sidecar's flags as objects.stack renders them (the pool it allowlists is the stack's own)."""
    return serving.sidecar_args(
        cfg.decode, facts.decode, pool_namespace=cfg.namespace, pool_name=labels.inference_pool_name(cfg.name)
    )


def rule_router_images(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """The EPP and sidecar pins know every feature their render uses (the facts: core/versions/router.py); the
    features are read from the render itself, so a plugin or flag added to the render is judged too."""
    epp = cfg.router.image
    used = router_versions.epp_features_used(routing.endpoint_picker_config(cfg.router, cfg.topology, cfg.model.name))
    chosen = cfg.router.config_api_version
    if chosen is not None and chosen in router_versions.API_VERSIONS:
        # An apiVersion set beside the pin is the key the file most likely got wrong: told there, naming the pin.
        feature = router_versions.API_VERSIONS[chosen]
        generation = router_versions.generation(image_version(epp))
        problem = rules.api_version_read(
            chosen,
            feature.since,
            feature.source,
            epp,
            image_version(epp),
            generation.api_version if generation else None,
            consumer=router_versions.EPP,
            api_name="router.configApiVersion",
            image_name="router.image",
        )
        if problem:
            yield Issue(key("router.configApiVersion"), problem, "router-images-have-features")
            used = [f for f in used if f is not feature]
    problem = rules.image_has_features(epp, image_version(epp), used, image_name="router.image")
    if problem:
        yield Issue(key("router.image"), problem, "router-images-have-features")
    if cfg.topology != "pd":
        return
    sidecar = cfg.decode.sidecar.image
    problem = rules.image_has_features(
        sidecar,
        image_version(sidecar),
        router_versions.sidecar_features_used(rendered_sidecar_args(cfg, facts)),
        image_name="decode.sidecar.image",
    )
    if problem:
        yield Issue(key("decode.sidecar.image"), problem, "router-images-have-features")


def _sidecar_ssrf(cfg: StackConfig, facts: StackFacts) -> tuple[dict[str, Any], str | None]:
    """What the SSRF rules judge of the rendered sidecar: its image and version, whether the protection is on and
    which pool it allowlists, the pool that fronts it, whether the pin can protect."""
    image = cfg.decode.sidecar.image
    flags = router_versions.sidecar_flags(rendered_sidecar_args(cfg, facts))
    return dict(
        image=image,
        pinned=image_version(image),
        protected=router_versions.ssrf_protection_on(flags),
        can_protect=router_versions.sidecar_can_protect(image_version(image)),
        since=router_versions.SSRF_ALLOWLIST.since,
    ), router_versions.ssrf_pool(flags)


def rule_sidecar_ssrf(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """The P/D sidecar runs with SSRF protection from the stack's own InferencePool wherever its pin can."""
    if cfg.topology != "pd":
        return
    judged, pool = _sidecar_ssrf(cfg, facts)
    own = f"{cfg.namespace}/{labels.inference_pool_name(cfg.name)}"
    problem = rules.sidecar_ssrf_protection(**judged, pool=pool, fronting=[own], fix_pool=own)
    if problem:
        yield Issue(key("decode.sidecar.image"), problem, "sidecar-ssrf-protection")


def _router_field(settings: Router, problem: epp_schema.Problem) -> str:
    """The field a problem of the rendered EndpointPickerConfig comes from: a `router.pluginParameters` entry, the
    router field that generates that parameter, or else the image (the program at that version reads it so)."""
    if problem.plugin_type and problem.parameter:
        params = typing.cast(dict[str, Any], settings.plugin_parameters.get(problem.plugin_type, {}))  # an object
        if problem.parameter in params:
            return f"router.pluginParameters.{problem.plugin_type}.{problem.parameter}"
        return routing.parameter_fields(settings).get((problem.plugin_type, problem.parameter), "router.image")
    return "router.image"


def rule_router_plugin_parameters(cfg: StackConfig, _facts: StackFacts) -> Iterable[Issue]:
    """`router.pluginParameters` adds to what the render declares; it may not add a plugin or redefine a
    generated parameter (the gates would judge one value and the EPP read another)."""
    declared = {
        p["type"]
        for p in routing.endpoint_picker_config(
            cfg.router.model_copy(update={"plugin_parameters": {}}), cfg.topology, cfg.model.name
        )["plugins"]
    }
    generated = routing.parameter_fields(cfg.router)
    for plugin_type, params in cfg.router.plugin_parameters.items():
        if plugin_type not in declared:
            yield Issue(
                key(f"router.pluginParameters.{plugin_type}"),
                f"plugin type {plugin_type!r} is not in this stack's EndpointPickerConfig (topology "
                f"{cfg.topology!r} declares {', '.join(sorted(declared))}): its parameters would configure "
                f"nothing. Use one of those types.",
            )
            continue
        for name in typing.cast(dict[str, Any], params):  # an object, by the config's own check
            field = generated.get((plugin_type, name))
            if field:
                yield Issue(
                    key(f"router.pluginParameters.{plugin_type}.{name}"),
                    f"{name} of {plugin_type} is generated by the program from {field}, where the gates "
                    f"check it. Set {field} instead.",
                )


def missing_features_of(image: str, used: list[Feature]) -> list[Feature]:
    """The features an image's tag is too old for ([] for a tag that is no version: image hygiene judges it)."""
    pinned = image_version(image)
    return missing_features(pinned, used) if pinned else []


def rule_router_schema(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """The pinned EPP and sidecar accept the rendered EndpointPickerConfig and flags, judged by their schema
    at that version (core/versions/data) as strictly as the programs themselves."""
    image = cfg.router.image
    config = routing.endpoint_picker_config(cfg.router, cfg.topology, cfg.model.name)
    # A pin older than a feature is reported once, by rule_router_images, naming the feature.
    too_old = missing_features_of(image, router_versions.epp_features_used(config))
    data = None if too_old else epp_schema.data_for("epp", image_version(image))
    if data:
        for problem in epp_schema.check_epp_config(config, data):
            yield Issue(
                key(_router_field(cfg.router, problem)),
                rules.program_refuses(
                    f"the EPP {data['version']}",
                    image,
                    f"{problem.path} of the rendered EndpointPickerConfig",
                    problem.message,
                    data_source=f"core/versions/data/epp-v{data['version']}.json",
                    fix="Remove or correct the parameter, or pin an EPP that has it.",
                ),
                "router-config-schema",
            )
    if cfg.topology != "pd":
        return
    sidecar = cfg.decode.sidecar.image
    args = rendered_sidecar_args(cfg, facts)
    too_old = missing_features_of(sidecar, router_versions.sidecar_features_used(args))
    data = None if too_old else epp_schema.data_for("sidecar", image_version(sidecar))
    if not data:
        return
    for problem in epp_schema.check_sidecar_args(args, data):
        yield Issue(
            key("decode.sidecar.image"),
            rules.program_refuses(
                f"the P/D sidecar {data['version']}",
                sidecar,
                f"flag {problem.path}",
                problem.message,
                data_source=f"core/versions/data/sidecar-v{data['version']}.json",
                fix="Pin a sidecar that has the flag.",
            ),
            "router-config-schema",
        )
