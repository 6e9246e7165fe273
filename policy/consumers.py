"""The router's programs accept what the stack gives them: the EPP image knows every plugin type and the
apiVersion of the EndpointPickerConfig it mounts and every flag dated there (`--drain-timeout`), the routing sidecar
image knows every flag it is given (facts: core/versions/router.py; the same rule as the config gate's `router.image`
and `decode.sidecar.image`: core.rules.image_has_features). And every image those facts (and the engine's,
core/versions/engine.py) judge names its release in its tag (core.rules.image_pin_dated).
"""

from __future__ import annotations

from core import rules
from core.versions import engine as engine_versions
from core.versions import epp_schema, image_name, image_version, missing_features
from core.versions import router as router_versions
from policy.facts import Facts
from policy.read.engines import template_engines
from policy.read.flags import command_line
from policy.read.objects import Finding, resource_id
from policy.read.pods import pod_templates, routing_sidecars
from policy.read.pool import epp_configs, epp_containers


def router_images_have_features(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Each EPP image is at least the first version of every feature of the config it mounts; each routing
    sidecar image at least the first version of every flag it is given."""
    found = []
    for config_map, _key, config in epp_configs(manifests):
        for template, container in epp_containers(manifests, config_map):
            used = router_versions.epp_features_used(config)
            used += router_versions.epp_flag_features_used(command_line(container))
            image = str(container.get("image", ""))
            problem = rules.image_has_features(
                image, image_version(image), used, image_name=f"container {container.get('name', '?')} image"
            )
            if problem:
                found.append(Finding(template.resource, problem))
    for template in pod_templates(manifests):
        for sidecar in routing_sidecars(template):
            image = str(sidecar.container.get("image", ""))
            used = router_versions.sidecar_features_used(command_line(sidecar.container))
            problem = rules.image_has_features(
                image, image_version(image), used, image_name=f"container {sidecar.name} image"
            )
            if problem:
                found.append(Finding(template.resource, problem))
    return found


def router_config_schema(manifests: list[dict], facts: Facts) -> list[Finding]:
    """The EPP at its image's version accepts the EndpointPickerConfig it mounts, and the routing sidecar at its
    image's version its flags, judged by their schema as data (core/versions/data) as strictly as the programs."""
    found = []
    for config_map, key, config in epp_configs(manifests):
        for template, container in epp_containers(manifests, config_map):
            image = str(container.get("image", ""))
            if _too_old(image, router_versions.epp_features_used(config)):
                continue  # router-images-have-features names the missing feature
            data = epp_schema.data_for("epp", image_version(image))
            if not data:
                continue
            source = f"core/versions/data/epp-v{data['version']}.json"
            for problem in epp_schema.check_epp_config(config, data):
                found.append(
                    Finding(
                        resource_id(config_map),
                        rules.program_refuses(
                            f"the EPP {data['version']}",
                            image,
                            f"data[{key}] {problem.path}",
                            problem.message,
                            data_source=source,
                            fix="Remove or correct it, or pin an EPP that has it.",
                        ),
                    )
                )
            if alpha := epp_schema.experimental_problems(config, data, command_line(container)):
                found.append(
                    Finding(
                        template.resource,
                        rules.program_refuses(
                            f"the EPP {data['version']}",
                            image,
                            f"{resource_id(config_map)} data[{key}] " + ", ".join(p.path for p in alpha),
                            "; ".join(p.message for p in alpha),
                            data_source=source,
                            fix=f"Add {epp_schema.experimental_flag(data)}=true to the EPP's args, or remove the "
                            "plugins.",
                        ),
                    )
                )
    for template in pod_templates(manifests):
        for sidecar in routing_sidecars(template):
            image = str(sidecar.container.get("image", ""))
            args = command_line(sidecar.container)
            if _too_old(image, router_versions.sidecar_features_used(args)):
                continue
            data = epp_schema.data_for("sidecar", image_version(image))
            if not data:
                continue
            for problem in epp_schema.check_sidecar_args(args, data):
                found.append(
                    Finding(
                        template.resource,
                        rules.program_refuses(
                            f"the P/D sidecar {data['version']}",
                            image,
                            f"container {sidecar.name} flag {problem.path}",
                            problem.message,
                            data_source=f"core/versions/data/sidecar-v{data['version']}.json",
                            fix="Remove it, or pin a sidecar that has it.",
                        ),
                    )
                )
    return found


def _too_old(image: str, used: list) -> bool:
    pinned = image_version(image)
    return bool(pinned and missing_features(pinned, used))


# What the facts would guess of an undated image (the gate's words, core/gate/images.py, for a manifest).
_GUESSED = {
    engine_versions.VLLM_RBLN: "the flags, KV connectors and env vars its container uses are not checked against it",
    router_versions.EPP: "the EndpointPickerConfig's generation and the features it may use are not checked against it",
    router_versions.SIDECAR: "its flags and whether it can run SSRF protection are not checked against it",
}
_EXAMPLE_TAGS = {
    engine_versions.VLLM_RBLN: str(engine_versions.TARGET),
    router_versions.EPP: f"v{router_versions.TARGET}",
    router_versions.SIDECAR: f"v{router_versions.TARGET}",
}


def image_pin_dated(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every image the version facts judge names its release in its tag: a vllm-rbln engine, an EPP (a container that
    mounts an EndpointPickerConfig, or runs an EPP image), a P/D routing sidecar."""
    judged: dict[tuple[str, str], tuple[str, str]] = {}  # (resource, container) -> (image, consumer)
    for template in pod_templates(manifests):
        for engine in template_engines(template):
            image = str(engine.container.get("image") or "")
            if engine_versions.is_engine_image(image):
                judged[(template.resource, engine.name)] = (image, engine_versions.VLLM_RBLN)
        for container in template.containers():
            image = str(container.get("image") or "")
            if image_name(image) in router_versions.EPP_IMAGE_NAMES:
                judged[(template.resource, str(container.get("name", "?")))] = (image, router_versions.EPP)
        for sidecar in routing_sidecars(template):
            judged[(template.resource, sidecar.name)] = (
                str(sidecar.container.get("image") or ""),
                router_versions.SIDECAR,
            )
    for config_map, _key, _config in epp_configs(manifests):
        for template, container in epp_containers(manifests, config_map):
            judged[(template.resource, str(container.get("name", "?")))] = (
                str(container.get("image") or ""),
                router_versions.EPP,
            )
    found = []
    for (resource, name), (image, consumer) in judged.items():
        problem = rules.image_pin_dated(
            image,
            image_version(image),
            image_name=f"container {name} image",
            consumer=consumer,
            facts="core/versions/engine.py" if consumer == engine_versions.VLLM_RBLN else "core/versions/router.py",
            guessed=_GUESSED[consumer],
            example_tag=_EXAMPLE_TAGS[consumer],
        )
        if problem:
            found.append(Finding(resource, problem))
    return found
