"""Reading accelerators: DRA claims and extended resources of a pod, and whether it is a Rebel100 engine pod."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from policy.read.objects import find
from policy.read.pods import PodTemplate

# --- accelerators: DRA claims and extended resources ----------------------------------------


@dataclasses.dataclass(frozen=True)
class ClaimedDevices:
    """Accelerators a container (or pod) gets, where each count comes from, and what could not be read.

    `problems` are claims that cannot be allocated as written (a container naming a claim the pod does not
    declare, allocationMode All, firstAvailable over accelerator classes); `unresolved` are claim templates
    or claims that are not among the resources (a chart may reference ones created outside it)."""

    count: int
    sources: list[str]
    problems: list[str]
    unresolved: list[str] = dataclasses.field(default_factory=list)


def _device_requests(claim_spec: dict) -> list[dict]:
    return list(((claim_spec or {}).get("devices") or {}).get("requests") or [])


def _request_count(request: dict, device_classes: frozenset) -> tuple[int | None, str | None, str | None]:
    """(count, device class, None) for a request of one of `device_classes`, (0, None, None) for another class,
    (None, None, why) when unreadable. Reads `exactly` (resource.k8s.io/v1) and the flat v1beta1 form."""
    exactly = request.get("exactly")
    exact = exactly if isinstance(exactly, dict) else request
    device_class = exact.get("deviceClassName")
    if device_class not in device_classes:
        alternatives = {(sub or {}).get("deviceClassName") for sub in request.get("firstAvailable") or []}
        if alternatives & device_classes:
            return None, None, f"request {request.get('name')} uses firstAvailable"
        return 0, None, None
    mode = exact.get("allocationMode", "ExactCount")
    if mode != "ExactCount":
        return None, None, f"request {request.get('name')} has allocationMode {mode}"
    return int(exact.get("count", 1)), device_class, None


def _claim_source(template: PodTemplate, pod_claim: dict, manifests: list[dict]) -> tuple[dict | None, str]:
    """The claim spec behind one entry of `spec.resourceClaims` and how to name it."""
    if pod_claim.get("resourceClaimTemplateName"):
        name = pod_claim["resourceClaimTemplateName"]
        rct = find(manifests, "ResourceClaimTemplate", template.namespace, name)
        return (rct.get("spec") or {}).get("spec") if rct else None, f"ResourceClaimTemplate {name}"
    name = pod_claim.get("resourceClaimName", "?")
    claim = find(manifests, "ResourceClaim", template.namespace, name)
    return claim.get("spec") if claim else None, f"ResourceClaim {name}"


def claimed_devices(
    template: PodTemplate, manifests: list[dict], device_classes: Iterable[str], container: dict | None = None
) -> ClaimedDevices:
    """Devices of `device_classes` claimed through DRA by one container (through `resources.claims`) or,
    without a container, by the whole pod (every entry of `spec.resourceClaims`)."""
    classes = frozenset(device_classes)
    pod_claims = {c.get("name"): c for c in template.spec.get("resourceClaims") or []}
    if container is None:
        wanted = [(name, None) for name in pod_claims]
    else:
        wanted = [(c.get("name"), c.get("request")) for c in (container.get("resources") or {}).get("claims") or []]
    count, sources, problems, unresolved = 0, [], [], []
    for claim_name, only_request in wanted:
        pod_claim = pod_claims.get(claim_name)
        if pod_claim is None:
            problems.append(f"resources.claims names {claim_name}, which is not in spec.resourceClaims")
            continue
        spec, label = _claim_source(template, pod_claim, manifests)
        if spec is None:
            unresolved.append(f"spec.resourceClaims[{claim_name}] references {label}, which is not among the resources")
            continue
        for request in _device_requests(spec):
            if only_request and request.get("name") != only_request:
                continue
            number, device_class, why = _request_count(request, classes)
            if why:
                problems.append(f"{label} {why}: its device count cannot be checked")
            elif number:
                count += number
                field = "exactly.count" if isinstance(request.get("exactly"), dict) else "count"
                spec_path = "spec.spec" if label.startswith("ResourceClaimTemplate ") else "spec"  # a claim: spec
                sources.append(
                    f"{label} {spec_path}.devices.requests[{request.get('name')}].{field} {number} "
                    f"(deviceClassName {device_class})"
                )
    return ClaimedDevices(count, sources, problems, unresolved)


def claimed_npus(
    template: PodTemplate, manifests: list[dict], device_class: str, container: dict | None = None
) -> ClaimedDevices:
    """NPUs of the one DeviceClass `device_class` (claimed_devices with one class)."""
    return claimed_devices(template, manifests, (device_class,), container)


def _quantity(value: Any) -> int | None:
    """An extended resource's quantity (a whole number: `"2"`, `2`); None when not one."""
    try:
        number = float(str(value))
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 0 else None


def extended_devices(container: dict, resource_names: Iterable[str]) -> ClaimedDevices:
    """Accelerators a container gets as extended resources (`nvidia.com/gpu: 2`): its limits, else its
    requests (the API server requires the two to be equal for extended resources)."""
    resources = container.get("resources") or {}
    count, sources, problems = 0, [], []
    for name in resource_names:
        for field in ("limits", "requests"):
            value = (resources.get(field) or {}).get(name)
            if value is None:
                continue
            number = _quantity(value)
            if number is None:
                problems.append(f"{field} {name} {value!r} is not a whole number")
            elif number:
                count += number
                sources.append(f"{field} {name} {number}")
            break
    return ClaimedDevices(count, sources, problems)


def container_accelerators(
    template: PodTemplate,
    container: dict,
    manifests: list[dict],
    device_classes: Iterable[str],
    resource_names: Iterable[str],
) -> ClaimedDevices:
    """Everything that gives one container accelerators: DRA claims of `device_classes` plus extended resources."""
    claimed = claimed_devices(template, manifests, device_classes, container)
    extended = extended_devices(container, resource_names)
    return ClaimedDevices(
        claimed.count + extended.count,
        claimed.sources + extended.sources,
        claimed.problems + extended.problems,
        claimed.unresolved,
    )


def runs_on_cpu(template: PodTemplate, resource_names: Iterable[str]) -> bool:
    """A pod with no DRA claim at all and no accelerator extended resource on any container: its engines run on
    CPUs (vLLM's CPU backend, llm-d's inference simulator), and TP x PP x DP-local counts no devices. A pod that
    claims anything through DRA is not read as CPU-only, so a class missing from the config is reported."""
    names = tuple(resource_names)
    return not template.spec.get("resourceClaims") and not any(
        extended_devices(c, names).count or extended_devices(c, names).problems for c in template.containers()
    )


def is_rebel100(template: PodTemplate, manifests: list[dict], npu_device_class: str) -> bool:
    """The one test of a Rebel100 engine: its pod claims a device of the Rebel100 DeviceClass through DRA
    (`npuDeviceClass`), as every engine the program renders does. GPU, Gaudi, XPU and ATOM pods (extended
    resources or other DeviceClasses) are not, and rules that encode Rebel100 facts (npusPerNode, the RDS
    budget of chiplet-0 memory, RBLN sub-blocks) skip them. Needs the ResourceClaimTemplates among
    `manifests`: a resource-scoped rule, which sees one object, cannot tell."""
    return claimed_npus(template, manifests, npu_device_class).count > 0
