"""Reading the router's objects: an InferencePool's view (selector, target ports, EPP reference), the ports a pod
serves the pool on, the EndpointPickerConfigs and the EPP containers that mount them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from core import sizing
from policy.read.engines import template_engines
from policy.read.env import parse_structured
from policy.read.objects import namespace_of, of_kind
from policy.read.pods import PodTemplate, pod_templates, routing_sidecars

EPP_GRPC_DEFAULT = 9002  # the EPP's --grpc-port default and the older API's extensionRef.portNumber default


@dataclasses.dataclass(frozen=True)
class PoolView:
    """An InferencePool in either API shape (v1, or the older x-k8s.io v1alpha2), with field names for messages."""

    selector: dict
    selector_field: str
    target_ports: list[int]
    ports_field: str
    epp_name: str | None
    epp_port: int | None
    epp_field: str
    epp_port_field: str


def pool_view(pool: dict) -> PoolView:
    spec = pool.get("spec") or {}
    if "targetPorts" in spec or isinstance((spec.get("selector") or {}).get("matchLabels"), dict):
        ref = spec.get("endpointPickerRef") or {}
        return PoolView(
            (spec.get("selector") or {}).get("matchLabels") or {},
            "spec.selector.matchLabels",
            [int(p.get("number", 0)) for p in spec.get("targetPorts") or []],
            "spec.targetPorts",
            ref.get("name"),
            (ref.get("port") or {}).get("number"),
            "spec.endpointPickerRef",
            "spec.endpointPickerRef.port.number",
        )
    ref = spec.get("extensionRef") or {}
    port = spec.get("targetPortNumber")
    return PoolView(
        spec.get("selector") or {},
        "spec.selector",
        [int(port)] if port else [],
        "spec.targetPortNumber",
        ref.get("name"),
        ref.get("portNumber", EPP_GRPC_DEFAULT),
        "spec.extensionRef",
        "spec.extensionRef.portNumber",
    )


def front_ports(template: PodTemplate) -> list[int]:
    """Ports the pool should target on a pod: the sidecar's (one per rank) or else the engine's.

    A flag the program cannot read (`--port eight`) stops it at start (Go's flag package and vLLM's argparse exit on
    an invalid number), so that program serves on no port. The sidecar serves --port and one more port per rank
    above the first (llm-d-inference-scheduler v0.7.1 pkg/sidecar/proxy/data_parallel.go: `range DataParallelSize -
    1`, nothing for a size below 2); an engine with per-rank ports one per local rank, else its --port."""
    sidecars = routing_sidecars(template)
    if sidecars:
        port, size = sidecars[0].integer("--port"), sidecars[0].integer("--data-parallel-size")
        return [] if port is None or size is None else sizing.rank_ports(port, max(size, 1))
    ports: list[int] = []
    for engine in template_engines(template):
        ranks = engine.dp_local if engine.flags.has("--data-parallel-multi-port-external-lb") else 1
        if engine.port is not None and ranks is not None:
            ports += sizing.rank_ports(engine.port, ranks)
    return ports


def epp_configs(manifests: list[dict]) -> list[tuple[dict, str, dict]]:
    """(ConfigMap, key, config) of every EndpointPickerConfig held in a ConfigMap."""
    found = []
    for config_map in of_kind(manifests, "ConfigMap"):
        for key, text in (config_map.get("data") or {}).items():
            config = parse_structured(text) if isinstance(text, str) and "EndpointPickerConfig" in text else None
            if isinstance(config, dict) and config.get("kind") == "EndpointPickerConfig":
                found.append((config_map, key, config))
    return found


def epp_containers(manifests: list[dict], config_map: dict) -> Iterator[tuple[PodTemplate, dict]]:
    """The containers that mount this ConfigMap: the EPPs that read the EndpointPickerConfig it holds."""
    name = (config_map.get("metadata") or {}).get("name")
    namespace = namespace_of(config_map)
    for template in pod_templates(manifests):
        if template.namespace != namespace:
            continue
        volumes = {
            v.get("name") for v in template.spec.get("volumes") or [] if (v.get("configMap") or {}).get("name") == name
        }
        for container in template.containers():
            if volumes & {m.get("name") for m in container.get("volumeMounts") or []}:
                yield template, container
