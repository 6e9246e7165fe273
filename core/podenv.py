"""A container's environment as the kubelet assembles it from its literal parts: the ConfigMaps it takes whole
(`envFrom.configMapRef`, each with its `prefix`, in order), then its `env` entries with a literal `value`, which win.
What the policy pack reads of a manifest (policy/read/env.py) and the local site's kubelet of a live pod
(localsite/programs.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def container_env(
    container: Mapping[str, Any], config_map_data: Callable[[str], Mapping[str, Any] | None]
) -> dict[str, str]:
    """`config_map_data(name)`: the data of the ConfigMap of that name in the pod's namespace, None when there is none
    (it adds nothing, as an optional one does)."""
    merged: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        name = ((source or {}).get("configMapRef") or {}).get("name")
        data = config_map_data(name) if name else None
        prefix = (source or {}).get("prefix") or ""
        merged.update({prefix + str(key): str(value) for key, value in (data or {}).items()})
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and "value" in entry:
            merged[str(entry.get("name"))] = str(entry["value"])
    return merged
