"""The router's programs accept what the stack gives them: the EPP image knows every plugin type and the
apiVersion of the EndpointPickerConfig it mounts, the routing sidecar image knows every flag it is given
(facts: core/versions/router.py; the same rule as the config gate's `router.image` and
`decode.sidecar.image`: core.rules.image_has_features).
"""

from __future__ import annotations

from core import rules
from core.versions import epp_schema, image_version, missing_features
from core.versions import router as router_versions
from policy.facts import Facts
from policy.read.flags import command_line
from policy.read.objects import Finding, resource_id
from policy.read.pods import pod_templates, routing_sidecars
from policy.read.pool import epp_configs, epp_containers


def router_images_have_features(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Each EPP image is at least the first version of every feature of the config it mounts; each routing
    sidecar image at least the first version of every flag it is given."""
    found = []
    for config_map, _key, config in epp_configs(manifests):
        used = router_versions.epp_features_used(config)
        for template, container in epp_containers(manifests, config_map):
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
        for _template, container in epp_containers(manifests, config_map):
            image = str(container.get("image", ""))
            if _too_old(image, router_versions.epp_features_used(config)):
                continue  # router-images-have-features names the missing feature
            data = epp_schema.data_for("epp", image_version(image))
            if not data:
                continue
            for problem in epp_schema.check_epp_config(config, data):
                found.append(
                    Finding(
                        resource_id(config_map),
                        rules.program_refuses(
                            f"the EPP {data['version']}",
                            image,
                            f"data[{key}] {problem.path}",
                            problem.message,
                            data_source=f"core/versions/data/epp-v{data['version']}.json",
                            fix="Remove or correct it, or pin an EPP that has it.",
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
