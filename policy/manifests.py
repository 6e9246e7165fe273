"""Reading Kubernetes manifests the way the rules need them: pod templates, engines, flags, env, claims.

Every rule of the pack works on plain manifest dicts (camelCase, as in YAML or in a Pulumi resource's
properties), never on the program's Python objects, so the same rules judge the program's render, a
hand-edited copy or a Helm chart's output. This module is the one place that knows where things are
in those dicts; the rule modules only decide.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Iterable, Iterator
from typing import Any

import yaml

from core import sizing
from core.labels import ROLE_LABEL
from core.serving import connector_classes
from core.versions import vllm_args

# --- findings ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Finding:
    """What a rule found wrong: the resource (`Kind/namespace/name`) and the message (field, values,
    rule, fix). The enforcement level is not the rule's to decide: it comes from the pack's config."""

    resource: str
    message: str

    @property
    def text(self) -> str:
        """The message with the resource in front, as Pulumi shows it."""
        kind, _, rest = self.resource.partition("/")
        return f"{kind} {rest}: {self.message}"


def resource_id(manifest: dict) -> str:
    """`Kind/namespace/name` (`Kind/name` for cluster-scoped objects)."""
    metadata = manifest.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "?")
    kind = manifest.get("kind", "?")
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def namespace_of(manifest: dict) -> str:
    return (manifest.get("metadata") or {}).get("namespace") or "default"


def of_kind(manifests: Iterable[dict], kind: str) -> list[dict]:
    return [m for m in manifests if m.get("kind") == kind]


def find(manifests: Iterable[dict], kind: str, namespace: str, name: str) -> dict | None:
    for manifest in manifests:
        if (
            manifest.get("kind") == kind
            and namespace_of(manifest) == namespace
            and (manifest.get("metadata") or {}).get("name") == name
        ):
            return manifest
    return None


def api_group(api_version: str) -> str:
    """`inference.networking.k8s.io/v1` -> `inference.networking.k8s.io`; `v1` -> `` (core)."""
    return api_version.rpartition("/")[0]


def selects(match_labels: dict, labels: dict) -> bool:
    """A non-empty equality selector matches labels that contain all its pairs."""
    return bool(match_labels) and all(labels.get(k) == str(v) for k, v in match_labels.items())


def label_selector_matches(selector: dict, labels: dict) -> bool:
    """A Kubernetes LabelSelector (matchLabels and matchExpressions); an empty selector matches everything."""
    if not all(labels.get(k) == str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = (
            expression.get("key"),
            expression.get("operator"),
            [str(v) for v in expression.get("values") or []],
        )
        present = key in labels
        if (
            (operator == "In" and labels.get(key) not in values)
            or (operator == "NotIn" and present and labels[key] in values)
            or (operator == "Exists" and not present)
            or (operator == "DoesNotExist" and present)
        ):
            return False
    return True


def name_list(names: Iterable[str], limit: int = 3) -> str:
    """`a, b, c and 5 more`: messages stay readable for stacks of many pools."""
    names = sorted(set(names))
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


def show_labels(labels: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(labels.items())) + "}"


# --- pod templates -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PodTemplate:
    """The pod template of a workload (or a bare Pod) together with the object that owns it."""

    owner: dict
    metadata: dict
    spec: dict

    @property
    def resource(self) -> str:
        return resource_id(self.owner)

    @property
    def namespace(self) -> str:
        return namespace_of(self.owner)

    @property
    def labels(self) -> dict:
        return self.metadata.get("labels") or {}

    @property
    def annotations(self) -> dict:
        return self.metadata.get("annotations") or {}

    def containers(self, init: bool = True) -> list[dict]:
        """Containers, then init containers (native sidecars are init containers)."""
        items = list(self.spec.get("containers") or [])
        return items + list(self.spec.get("initContainers") or []) if init else items

    @property
    def role(self) -> str | None:
        """`prefill` / `decode` from the llm-d role label; a pod with a routing sidecar is a decode pod."""
        role = self.labels.get(ROLE_LABEL)
        if role:
            return role
        return "decode" if routing_sidecars(self) else None


def _template_paths(manifest: dict) -> list[list[str]]:
    kind = manifest.get("kind")
    if kind == "Pod":
        return [[]]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"):
        return [["spec", "template"]]
    if kind == "CronJob":
        return [["spec", "jobTemplate", "spec", "template"]]
    if kind == "LeaderWorkerSet":
        return [["spec", "leaderWorkerTemplate", "leaderTemplate"], ["spec", "leaderWorkerTemplate", "workerTemplate"]]
    return []


def pod_templates(manifests: Iterable[dict]) -> Iterator[PodTemplate]:
    for manifest in manifests:
        for path in _template_paths(manifest):
            node: Any = manifest
            for part in path:
                node = (node or {}).get(part) if isinstance(node, dict) else None
            if isinstance(node, dict) and isinstance(node.get("spec"), dict):
                yield PodTemplate(owner=manifest, metadata=node.get("metadata") or {}, spec=node["spec"])


WORKLOAD_KINDS = ("Deployment", "StatefulSet")


def replicas(manifest: dict) -> int:
    """spec.replicas of a Deployment or StatefulSet (1 when unset, as the API server defaults it)."""
    value = (manifest.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def service_account(template: PodTemplate) -> str:
    """The ServiceAccount the pod runs as (`default` when the template names none)."""
    return template.spec.get("serviceAccountName") or template.spec.get("serviceAccount") or "default"


# --- command lines -------------------------------------------------------------------------

# vLLM flags that take no value: needed so that `--enable-prefix-caching MODEL` reads MODEL as the
# positional model, not as the flag's value. Those of the vLLM the target image builds on come from its committed
# parser data (core/versions/vllm_args.py); older releases' flags a foreign manifest may still pass are added here.
# Unknown bare flags are recognised by what follows them.
VLLM_RETIRED_BOOLEAN_FLAGS = frozenset({"--disable-log-requests", "--api-server-count-auto"})
VLLM_BOOLEAN_FLAGS = vllm_args.boolean_flags() | VLLM_RETIRED_BOOLEAN_FLAGS
# vLLM's short aliases.
VLLM_ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dpr": "--data-parallel-rank",
    "-ep": "--enable-expert-parallel",
    "-q": "--quantization",
}

FlagValue = str | bool


@dataclasses.dataclass(frozen=True)
class Flags:
    """A parsed command line: `--flag value`, `--flag=value` and bare boolean flags, plus positionals.

    A flag given twice keeps its last value, as argparse and Go's flag package do.
    """

    values: dict[str, FlagValue]
    positionals: tuple[str, ...]

    def get(self, flag: str) -> FlagValue | None:
        return self.values.get(flag)

    def has(self, flag: str) -> bool:
        value = self.values.get(flag)
        return value is True or (isinstance(value, str) and value.lower() not in ("false", "0"))

    def text(self, flag: str) -> str | None:
        value = self.values.get(flag)
        return value if isinstance(value, str) else None

    def integer(self, flag: str, default: int | None = None) -> int | None:
        """The flag as an int; `default` when absent; None when present but not an integer."""
        value = self.values.get(flag)
        if value is None:
            return default
        try:
            return int(str(value))
        except ValueError:
            return None

    def number(self, flag: str, default: float | None = None) -> float | None:
        value = self.values.get(flag)
        if value is None:
            return default
        try:
            return float(str(value))
        except ValueError:
            return None

    def json(self, flag: str) -> Any:
        """A JSON-valued flag (`--speculative-config`, `--kv-transfer-config`); None when absent or not JSON."""
        value = self.text(flag)
        if value is None:
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None


def parse_flags(
    argv: Iterable[str], *, boolean: frozenset = frozenset(), aliases: dict | None = None, go_style: bool = False
) -> Flags:
    """Parse a command line. `go_style` accepts Go's single-dash long flags (`-vllm-port=8200`)."""
    aliases = aliases or {}
    values: dict[str, FlagValue] = {}
    positionals: list[str] = []
    tokens = [str(t) for t in argv]
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-") or token == "-" or _is_number(token):
            positionals.append(token)
            continue
        name, has_value, value = token.partition("=")
        name = aliases.get(name, name)
        if go_style and not name.startswith("--"):
            name = "-" + name
        if name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        if has_value:
            values[name] = value
        elif (
            name in boolean or index >= len(tokens) or (tokens[index].startswith("-") and not _is_number(tokens[index]))
        ):
            values[name] = True
        else:
            values[name] = tokens[index]
            index += 1
    return Flags(values=values, positionals=tuple(positionals))


def _is_number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def command_line(container: dict) -> list[str]:
    """command + args; a shell form (`sh -c "vllm serve ..."`) is split into words."""
    words = [str(w) for w in (container.get("command") or [])] + [str(w) for w in (container.get("args") or [])]
    expanded: list[str] = []
    for word in words:
        if " " in word and ("vllm serve" in word or "vllm\tserve" in word):
            try:
                expanded.extend(shlex.split(word))
                continue
            except ValueError:
                pass
        expanded.append(word)
    return expanded


VLLM_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def serve_argv(container: dict) -> list[str] | None:
    """The arguments after `vllm serve` (or `python -m vllm.entrypoints.openai.api_server`, which takes the same
    arguments), or None when the container runs neither. An engine started by its image's entrypoint (args
    only) is not recognised: what the entrypoint runs is not in the manifest."""
    words = command_line(container)
    for index in range(len(words) - 1):
        if (words[index] == "vllm" or words[index].endswith("/vllm")) and words[index + 1] == "serve":
            return words[index + 2 :]
        if words[index] == "-m" and words[index + 1] == VLLM_API_SERVER_MODULE:
            return words[index + 2 :]
    return None


# --- engines -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Engine:
    """A container that runs `vllm serve`, with its parsed arguments and its pod template."""

    template: PodTemplate
    container: dict
    flags: Flags

    @property
    def resource(self) -> str:
        return self.template.resource

    @property
    def name(self) -> str:
        return self.container.get("name", "?")

    @property
    def role(self) -> str | None:
        return self.template.role

    @property
    def model(self) -> str | None:
        return self.flags.text("--model") or (self.flags.positionals[0] if self.flags.positionals else None)

    @property
    def tp(self) -> int | None:
        return self.flags.integer("--tensor-parallel-size", 1)

    @property
    def pp(self) -> int | None:
        return self.flags.integer("--pipeline-parallel-size", 1)

    @property
    def dp(self) -> int | None:
        return self.flags.integer("--data-parallel-size", 1)

    @property
    def dp_local(self) -> int | None:
        return self.flags.integer("--data-parallel-size-local", self.dp)

    @property
    def port(self) -> int | None:
        return self.flags.integer("--port", VLLM_DEFAULT_PORT)

    def env(self, name: str) -> str | None:
        return env_value(self.container, name)

    @property
    def devices(self) -> int | None:
        """NPUs the ranks need, TP x PP x DP-local (core.sizing), None when an arg is unreadable."""
        tp, pp, dp_local = self.tp, self.pp, self.dp_local
        if tp is None or pp is None or dp_local is None:
            return None
        return sizing.devices_per_pod(tp, pp, dp_local)

    def parallelism_text(self) -> str:
        """How the args give the parallelism, for messages."""
        return f"TP {self.tp} x PP {self.pp} x DP-local {self.dp_local}"


VLLM_DEFAULT_PORT = 8000


def template_engines(template: PodTemplate) -> list[Engine]:
    found = []
    for container in template.containers():
        argv = serve_argv(container)
        if argv is not None:
            found.append(
                Engine(template, container, parse_flags(argv, boolean=VLLM_BOOLEAN_FLAGS, aliases=VLLM_ALIASES))
            )
    return found


def engines(manifests: Iterable[dict]) -> list[Engine]:
    return [engine for template in pod_templates(manifests) for engine in template_engines(template)]


def kv_connectors(flags: Flags) -> list[str]:
    """Connector class names of `--kv-transfer-config`, MultiConnector's members included."""
    return connector_classes(flags.json("--kv-transfer-config"))


# --- routing sidecar -----------------------------------------------------------------------

SIDECAR_DEFAULTS: dict[str, Any] = {
    "--port": 8000,
    "--vllm-port": 8001,
    "--data-parallel-size": 1,
    "--kv-connector": "nixlv2",
}


@dataclasses.dataclass(frozen=True)
class Sidecar:
    """The llm-d routing sidecar of a decode pod (Go flags; defaults of llm-d-routing-sidecar)."""

    template: PodTemplate
    container: dict
    flags: Flags

    @property
    def name(self) -> str:
        return self.container.get("name", "?")

    def integer(self, flag: str) -> int | None:
        return self.flags.integer(flag, SIDECAR_DEFAULTS[flag])

    @property
    def connector(self) -> str:
        return self.flags.text("--kv-connector") or self.flags.text("--connector") or SIDECAR_DEFAULTS["--kv-connector"]


def routing_sidecars(template: PodTemplate) -> list[Sidecar]:
    found = []
    for container in template.containers():
        if serve_argv(container) is not None:
            continue
        flags = parse_flags(command_line(container), go_style=True)
        image = str(container.get("image", ""))
        if (
            "--vllm-port" in flags.values
            or "routing-sidecar" in image
            or "disagg-sidecar" in image
            or container.get("name") == "routing-proxy"
        ):
            found.append(Sidecar(template, container, flags))
    return found


# --- environment ---------------------------------------------------------------------------


def env_entry(container: dict, name: str) -> dict | None:
    """The last `env` entry of that name (Kubernetes lets a later entry win)."""
    found = None
    for entry in container.get("env") or []:
        if entry.get("name") == name:
            found = entry
    return found


def env_value(container: dict, name: str) -> str | None:
    """A plain `value`; None when unset or set through `valueFrom` (not readable before apply)."""
    entry = env_entry(container, name)
    if entry is None or "value" not in entry:
        return None
    return str(entry["value"])


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
    """Literal env of a container as the kubelet assembles it: envFrom ConfigMaps, then `env` (which wins)."""
    merged: dict[str, str] = {}
    for config_map in env_from_config_maps(template, container, manifests):
        prefix = ""
        for source in container.get("envFrom") or []:
            if ((source or {}).get("configMapRef") or {}).get("name") == (config_map.get("metadata") or {}).get("name"):
                prefix = source.get("prefix") or ""
        merged.update({prefix + str(k): str(v) for k, v in (config_map.get("data") or {}).items()})
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and "value" in entry:
            merged[str(entry.get("name"))] = str(entry["value"])
    return merged


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
        return ((rct or {}).get("spec") or {}).get("spec") if rct else None, f"ResourceClaimTemplate {name}"
    name = pod_claim.get("resourceClaimName", "?")
    claim = find(manifests, "ResourceClaim", template.namespace, name)
    return (claim or {}).get("spec") if claim else None, f"ResourceClaim {name}"


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
                sources.append(
                    f"{label} spec.spec.devices.requests[{request.get('name')}].{field} {number} "
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
