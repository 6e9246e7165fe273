"""Rule 7: hygiene every serving pod needs whoever wrote it.

The Hugging Face token only through a Secret reference (a literal lands in the state file, in
`kubectl get -o yaml` and in git); images pinned to a tag or digest (`latest` changes under a running
stack and makes a rollback redeploy something else); CPU and memory requests on the engines (without
them the scheduler packs engines onto nodes whose CPU the NPU runtime needs, and they are evicted first);
engines behind an ingress NetworkPolicy and scraped by a PodMonitor (a dev cluster may have neither:
`policy/config/dev.json` makes these two advice, as the dev stack file says).
"""

from __future__ import annotations

from core import formats, rules
from core.selectors import label_selector_matches
from policy.facts import Facts
from policy.read.engines import engines, template_engines
from policy.read.env import effective_env
from policy.read.objects import Finding, namespace_of, of_kind, resource_id, show_labels
from policy.read.pods import PodTemplate, monitor_covers, pod_templates, routing_sidecars

TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def hf_token_secret_ref(manifests: list[dict], facts: Facts) -> list[Finding]:
    """HF_TOKEN only from `valueFrom.secretKeyRef`."""
    found = []
    for template in pod_templates(manifests):
        for container in template.containers():
            # Every entry of the name, not the one that wins: a literal twin still lands in state and YAML.
            for entry in (e for e in container.get("env") or [] if isinstance(e, dict) and e.get("name") in TOKEN_ENV):
                name = entry["name"]
                if "value" in entry:
                    found.append(
                        Finding(
                            template.resource,
                            f"container {container.get('name')} env {name} is a literal value: the token ends up in "
                            "the stack state, the rendered YAML and anyone's `kubectl get -o yaml`. Use "
                            "valueFrom.secretKeyRef to a Secret (rebel100:hfTokenSecret, key token).",
                        )
                    )
                elif not (entry.get("valueFrom") or {}).get("secretKeyRef"):
                    source = ", ".join(entry.get("valueFrom") or {}) or "nothing"
                    found.append(
                        Finding(
                            template.resource,
                            f"container {container.get('name')} env {name} comes from {source}, not from a Secret: "
                            f"ConfigMaps and fields are not access-controlled as secrets. Use valueFrom.secretKeyRef.",
                        )
                    )
    return found


def env_names_unique(manifests: list[dict], facts: Facts) -> list[Finding]:
    """One env entry per name in a container: server-side apply refuses duplicates."""
    found = []
    for template in pod_templates(manifests):
        for container in template.containers():
            names = [str(e.get("name")) for e in container.get("env") or [] if isinstance(e, dict)]
            twice = sorted({name for name in names if names.count(name) > 1})
            if twice:
                found.append(
                    Finding(
                        template.resource,
                        f"container {container.get('name')} has more than one env entry named {', '.join(twice)}: the "
                        "API server's server-side apply refuses the object (duplicate entries for key [name=...]), so "
                        "the deployment fails half way. Keep one entry per name.",
                    )
                )
    return found


# The NIXL side channel of DP rank r listens on this + r (core/serving.py engine_env).
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"

Listeners = list[tuple[str, list[int]]]  # (who sets them, the port numbers)


def _tcp_entries(entries: object) -> list[tuple[int, dict]]:
    """(index, entry) of the TCP port entries of a `ports` list (the default protocol); UDP and SCTP entries have port
    numbers of their own."""
    return [
        (index, entry)
        for index, entry in enumerate(entries if isinstance(entries, list) else [])
        if isinstance(entry, dict) and str(entry.get("protocol") or "TCP") == "TCP"
    ]


def _span(first: int, count: int) -> list[int]:
    """The ports of `count` ranks from `first` (rank r on first + r), within the 65535 a port can be."""
    return list(range(first, min(first + max(count, 0), 65536)))


def _container_listeners(template: PodTemplate, container: dict, manifests: list[dict]) -> Listeners:
    """What one container listens on: an engine its DP ranks from --port, its DP RPC port (with DP > 1) and its NIXL
    side channels (one per rank); a routing sidecar one port per rank from its --port; then each TCP containerPort
    none of those already covers."""
    name = container.get("name", "?")
    found: Listeners = []
    engine = next((e for e in template_engines(template) if e.container is container), None)
    sidecar = next((s for s in routing_sidecars(template) if s.container is container), None)
    if engine is not None and engine.port is not None and engine.dp_local:
        ranks = engine.dp_local
        found.append((f"container {name} --port", _span(engine.port, ranks)))
        rpc = engine.flags.integer("--data-parallel-rpc-port")
        if (engine.dp or 1) > 1 and rpc is not None:
            found.append((f"container {name} --data-parallel-rpc-port", [rpc]))
        nixl = effective_env(template, container, manifests).get(NIXL_PORT_ENV, "")
        if nixl.isdigit():
            found.append((f"container {name} {NIXL_PORT_ENV}", _span(int(nixl), ranks)))
    elif sidecar is not None:
        sidecar_port, sidecar_ranks = sidecar.integer("--port"), sidecar.integer("--data-parallel-size")
        if sidecar_port is not None and sidecar_ranks:
            found.append((f"container {name} --port", _span(sidecar_port, sidecar_ranks)))
    covered = {port for _, ports in found for port in ports}
    for index, entry in _tcp_entries(container.get("ports")):
        number = entry.get("containerPort")
        if isinstance(number, int) and number not in covered:
            label = f" ({entry['name']})" if entry.get("name") else ""
            found.append((f"container {name} ports[{index}]{label}", [number]))
    return found


def _clashes(listeners: Listeners, *, where: str, service: bool, fix: str) -> list[str]:
    problems = []
    for i, (first, first_ports) in enumerate(listeners):
        for second, second_ports in listeners[i + 1 :]:
            problem = rules.ports_distinct(
                first, first_ports, second, second_ports, where=where, service=service, fix=fix
            )
            if problem:
                problems.append(problem)
    return problems


def ports_distinct(manifests: list[dict], facts: Facts) -> list[Finding]:
    """No two TCP port entries of a Service take one port, and no two listeners of a pod (its containers share one
    network namespace): declared containerPorts, and what engines and routing sidecars bind from their flags and env
    (DP ranks, the RPC port, the NIXL side channels)."""
    found = []
    for service in of_kind(manifests, "Service"):
        entries = [
            (f"spec.ports[{index}]" + (f" ({entry['name']})" if entry.get("name") else ""), [entry["port"]])
            for index, entry in _tcp_entries((service.get("spec") or {}).get("ports"))
            if isinstance(entry.get("port"), int)
        ]
        for problem in _clashes(entries, where="the Service", service=True, fix="Give each entry a port of its own."):
            found.append(Finding(resource_id(service), problem))
    for template in pod_templates(manifests):
        listeners = [
            item for container in template.containers() for item in _container_listeners(template, container, manifests)
        ]
        for problem in _clashes(listeners, where="the pod", service=False, fix="Give each listener a port of its own."):
            found.append(Finding(template.resource, problem))
    return found


def image_tag_pinned(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every container image has a tag other than `latest`, or a digest."""
    found = []
    for template in pod_templates(manifests):
        for container in template.containers():
            image = str(container.get("image") or "")
            reference = formats.image_reference(image)
            if image and reference is None:
                continue  # not a reference at all: runtime-accepts-container's
            tag = reference.tag if reference else None
            if reference and reference.digest:
                continue
            if not image or tag is None or tag == "latest":
                what = (
                    "has no image"
                    if not image
                    else (
                        f"image {image} is untagged (pulls latest)"
                        if tag is None
                        else f"image {image} uses the latest tag"
                    )
                )
                found.append(
                    Finding(
                        template.resource,
                        f"container {container.get('name')} {what}: the image can change under a running stack and a "
                        f"rollback redeploys something else. Pin a version tag or a digest (image@sha256:...).",
                    )
                )
    return found


def runtime_accepts_container(manifests: list[dict], facts: Facts) -> list[Finding]:
    """What the API server stores but the node refuses: an image reference the kubelet cannot parse (the pod waits in
    InvalidImageName), a capability the container runtime does not know (CAP_ prefix included: containerd adds its
    own). The same formats as the config gate's (core.formats IMAGE, CAPABILITY)."""
    found = []
    for template in pod_templates(manifests):
        for container in template.containers():
            name = container.get("name")
            image = container.get("image")
            problem = formats.image_problem(str(image)) if image else None
            if problem:
                found.append(
                    Finding(
                        template.resource,
                        f"container {name} image {image!r} is not an image reference the kubelet can parse "
                        f"({problem}): the pod never starts (InvalidImageName). {formats.IMAGE.rule} "
                        f"({formats.IMAGE.source}).",
                    )
                )
            capabilities = (container.get("securityContext") or {}).get("capabilities") or {}
            for field in ("add", "drop"):
                for capability in capabilities.get(field) or []:
                    text = str(capability)
                    if text.upper() == "ALL":
                        continue  # the runtime's word for every capability; adding it is pod-security-context's
                    problem = formats.capability_problem(text)
                    if problem:
                        found.append(
                            Finding(
                                template.resource,
                                f"container {name} securityContext.capabilities.{field} {text!r}: {problem}. "
                                f"{formats.CAPABILITY.rule}.",
                            )
                        )
    return found


def engine_resource_requests(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Engine containers request CPU and memory (requests, or limits that Kubernetes copies into requests)."""
    found = []
    for engine in engines(manifests):
        resources = engine.container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        missing = [name for name in ("cpu", "memory") if name not in requests and name not in limits]
        if missing:
            found.append(
                Finding(
                    engine.resource,
                    f"engine container {engine.name} sets no resources.requests.{' or '.join(missing)}: the scheduler "
                    f"may pack it next to other pods on a node whose CPU and memory the NPU runtime, tokenizer and "
                    f"KV offload need, and it is evicted first under pressure. Set resources.requests (and limits) "
                    f"{' and '.join(missing)}.",
                )
            )
    return found


def _engine_templates(manifests: list[dict]):
    return [t for t in pod_templates(manifests) if template_engines(t)]


def engine_network_policy(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every engine pod is selected by an ingress NetworkPolicy of its namespace."""
    found = []
    policies = [
        p
        for p in of_kind(manifests, "NetworkPolicy")
        if "Ingress" in ((p.get("spec") or {}).get("policyTypes") or ["Ingress"])
    ]
    for template in _engine_templates(manifests):
        if not any(
            namespace_of(p) == template.namespace
            and label_selector_matches((p.get("spec") or {}).get("podSelector") or {}, template.labels)
            for p in policies
        ):
            found.append(
                Finding(
                    template.resource,
                    f"no ingress NetworkPolicy in namespace {template.namespace} selects this engine pod template "
                    f"(labels {show_labels(template.labels)}): anything in the cluster can reach its serving, DP RPC "
                    "and NIXL ports and bypass the gateway and router. Add a NetworkPolicy whose podSelector matches "
                    "these labels (rebel100:security.networkPolicies true).",
                )
            )
    return found


def engine_metrics_scraped(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Every engine pod is selected by a PodMonitor (Prometheus Operator)."""
    found = []
    monitors = of_kind(manifests, "PodMonitor")
    for template in _engine_templates(manifests):
        if not any(monitor_covers(m, template) for m in monitors):
            found.append(
                Finding(
                    template.resource,
                    f"no PodMonitor selects this engine pod template (labels {show_labels(template.labels)}): vLLM's "
                    "/metrics (KV cache usage, queue length, TTFT) are not scraped, so capacity and latency alerts "
                    "are blind. Add a PodMonitor whose selector matches these labels "
                    "(rebel100:observability.podMonitors true).",
                )
            )
    return found
