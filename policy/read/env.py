"""Reading a container's environment: entries, values, envFrom ConfigMaps, flags set by env, structured values."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml

from core.podenv import container_env
from policy.read.objects import find
from policy.read.pods import PodTemplate

# --- environment ---------------------------------------------------------------------------


def env_value(container: dict, name: str) -> str | None:
    """A plain `value` of the last `env` entry of that name (Kubernetes lets a later entry win); None when unset or
    set through `valueFrom` (not readable before apply)."""
    value: str | None = None
    for entry in container.get("env") or []:
        if entry.get("name") == name:
            value = str(entry["value"]) if "value" in entry else None
    return value


def env_from_config_maps(template: PodTemplate, container: dict, manifests: Iterable[dict]) -> list[dict]:
    """The ConfigMaps among `manifests` that the container takes whole (`envFrom.configMapRef`), in order."""
    found = []
    for source in container.get("envFrom") or []:
        name = ((source or {}).get("configMapRef") or {}).get("name")
        config_map = find(manifests, "ConfigMap", template.namespace, name) if name else None
        if config_map is not None:
            found.append(config_map)
    return found


def effective_env(template: PodTemplate, container: dict, manifests: Iterable[dict]) -> dict[str, str]:
    """Literal env of a container as the kubelet assembles it (core.podenv): envFrom ConfigMaps among `manifests`,
    then `env` (which wins)."""

    def data(name: str) -> dict | None:
        config_map = find(manifests, "ConfigMap", template.namespace, name)
        return None if config_map is None else config_map.get("data")

    return container_env(container, data)


def env_flag_on(container: dict, name: str) -> bool:
    return (env_value(container, name) or "").strip().lower() in ("1", "true", "yes", "on")


def parse_structured(text: str) -> Any:
    """JSON, or YAML (a superset that also takes `{key: value}`); None when neither."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return None
