"""The pack's policies as data, their enforcement, and `evaluate()` over a list of manifests.

One list serves both runners: `policy/pack.py` turns it into Pulumi policies for
`pulumi preview --policy-pack policy`, and `python -m stacks check` calls `evaluate()` directly on
YAML; the same rule functions and the same config file decide both, so they cannot disagree.
Nothing here imports Pulumi. Which enforcement file a stack gets is `policy.levels`'s.

Scope: `resource` rules read one object at a time (they become ResourceValidationPolicies and run on
each resource's inputs); `stack` rules relate several objects (StackValidationPolicies).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from policy import (
    alerting,
    autoscaling,
    availability,
    consumers,
    engine_consumers,
    hygiene,
    memory,
    observability,
    parallelism,
    security,
    ssrf,
    weights,
    wiring,
)
from policy.facts import Facts, facts_from
from policy.read.objects import Finding

PACK_NAME = "rebel100-serving"
MANDATORY, ADVISORY, DISABLED = "mandatory", "advisory", "disabled"
LEVELS = (MANDATORY, ADVISORY, "remediate", DISABLED)

Rule = Callable[[list, Facts], list]


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    name: str
    description: str
    rule: Rule
    scope: str  # "resource" or "stack"
    enforcement: str = MANDATORY
    facts: tuple[str, ...] = ()  # keys of the pack config this policy reads (its PolicyConfigSchema)


POLICIES: tuple[PolicySpec, ...] = (
    # 1-3: parallelism
    PolicySpec(
        "pp-with-dp",
        "An engine must not combine --pipeline-parallel-size > 1 with --data-parallel-size > 1 (vLLM refuses it).",
        parallelism.pp_with_dp,
        "resource",
    ),
    PolicySpec(
        "npu-claim-matches-parallelism",
        "The accelerators an engine container gets (DRA claims of npuDeviceClass or acceleratorDeviceClasses, "
        "extended resources of acceleratorResources such as nvidia.com/gpu) must equal TP x PP x DP-local of its "
        "args; pods with no accelerator and no claim (CPU engines) are skipped.",
        parallelism.npu_claims_match_parallelism,
        "stack",
        facts=("npuDeviceClass", "acceleratorDeviceClasses", "acceleratorResources"),
    ),
    PolicySpec(
        "npu-devices-fit-node",
        "The NPUs of one Rebel100 pod (one that claims npuDeviceClass) must fit on one node (npusPerNode); other pods "
        "are skipped.",
        parallelism.npu_devices_fit_node,
        "stack",
        facts=("npusPerNode", "npuDeviceClass"),
    ),
    PolicySpec(
        "parallelism-fits-model",
        "PP <= model layers; expert parallel divides the experts evenly over DP x TP; no PP on decode.",
        parallelism.parallelism_fits_model,
        "resource",
        facts=("modelLayers", "modelExperts"),
    ),
    # 4-5: memory and serving arguments
    PolicySpec(
        "rds-memory-budget",
        "rds_max_chunks x chunk overhead x NVMe drives + staging must fit in the chiplet-0 memory "
        "--gpu-memory-utilization leaves free.",
        memory.rds_memory_budget,
        "stack",
        facts=("hbmPerChipletGib", "nvmeDrivesPerNode", "rdsChunkOverheadMib", "rdsStagingBufferMib", "npuDeviceClass"),
    ),
    PolicySpec(
        "lmcache-reads-rds-max-chunks",
        "rds_max_chunks must not be set for an lmcache-rbln older than 0.12.0, which ignores it.",
        memory.lmcache_reads_rds_max_chunks,
        "stack",
    ),
    PolicySpec(
        "engine-args-in-range",
        "--gpu-memory-utilization in (0, 1]; --block-size a multiple of the sub-block size with sub-block caching; "
        "--max-model-len <= the model's context.",
        memory.engine_args_in_range,
        "resource",
        facts=("modelMaxContext",),
    ),
    # 5b: the programs that read the render accept it
    PolicySpec(
        "engine-image-has-features",
        "A vllm-rbln engine image is at least the first release of every flag, KV connector and env var its container "
        "uses (core.versions.engine).",
        engine_consumers.engine_image_has_features,
        "resource",
    ),
    PolicySpec(
        "vllm-args-known",
        "Every `vllm serve` argument of a vllm-rbln engine of the target release is an option of that release's vLLM, "
        "with a value among its choices (core.versions.vllm_args, dumped from vLLM's own parser).",
        engine_consumers.vllm_args_known,
        "resource",
    ),
    PolicySpec(
        "lmcache-env-known",
        "Every LMCACHE_* variable an engine gets (env and envFrom ConfigMaps) is one lmcache reads, and "
        "LMCACHE_EXTRA_CONFIG holds no top-level LMCache key (core.versions.lmcache).",
        engine_consumers.lmcache_env_known,
        "stack",
    ),
    # 6: wiring across resources
    PolicySpec(
        "pd-roles-agree",
        "Prefill and decode agree on block size, KV cache dtype, model and speculative config.",
        wiring.pd_roles_agree,
        "stack",
    ),
    PolicySpec(
        "sidecar-matches-decode",
        "The routing sidecar's --vllm-port, --data-parallel-size and --kv-connector match the engines.",
        wiring.sidecar_matches_decode,
        "stack",
    ),
    PolicySpec(
        "inference-pool-wiring",
        "The InferencePool selects both roles' pods, targets the ports they serve on, and names the EPP Service and "
        "port.",
        wiring.inference_pool_wiring,
        "stack",
    ),
    PolicySpec(
        "pool-endpoints-serve",
        "Every endpoint the EPP makes of a pod the InferencePool selects (one per "
        "targetPort, or per target port the pod lists in its llm-d.ai/active-ports or "
        "inference.networking.k8s.io/active-ports annotation) leads to a port the pod serves on, and the pod "
        "has one.",
        wiring.pool_endpoints_serve,
        "stack",
    ),
    PolicySpec(
        "httproute-backend-exists",
        "An HTTPRoute's InferencePool backendRef names a pool that exists.",
        wiring.httproute_backend_exists,
        "stack",
    ),
    PolicySpec(
        "router-pd-profiles",
        "A P/D router config has a profile handler, a decider that can fire and both prefill and decode profiles.",
        wiring.router_pd_profiles,
        "stack",
    ),
    PolicySpec(
        "router-block-size",
        "With autoTune off, the router's blockSizeTokens is a whole number of the engines' prefix-reuse units.",
        wiring.router_block_size,
        "stack",
    ),
    PolicySpec(
        "router-precise-prefix-cache",
        "With the precise prefix cache, every engine keeps a prefix cache and publishes its KV events where the EPP "
        "subscribes, in blocks the EPP's blockSizeTokens divides.",
        wiring.router_precise_prefix_cache,
        "stack",
    ),
    PolicySpec(
        "router-autotune-block-unit",
        "With autoTune on, the router hashes --block-size units while the engines reuse sub-blocks (advice).",
        wiring.router_autotune_block_unit,
        "stack",
        enforcement=ADVISORY,
    ),
    PolicySpec(
        "router-images-have-features",
        "The EPP image is at least the first version of every plugin type and the apiVersion of the "
        "EndpointPickerConfig it mounts and of the dated flags it is given (--drain-timeout); the routing sidecar "
        "image, of every flag it is given (core/versions/router.py).",
        consumers.router_images_have_features,
        "stack",
    ),
    PolicySpec(
        "image-pin-dated",
        "An image the version facts judge (a vllm-rbln engine, the llm-d EPP, a P/D routing sidecar) names its "
        "release in its tag, beside a digest if it has one: a digest alone or a tag that is no version leaves the "
        "facts to guess (core/versions).",
        consumers.image_pin_dated,
        "resource",
    ),
    PolicySpec(
        "router-config-schema",
        "The EPP accepts the EndpointPickerConfig it mounts and the routing sidecar its flags, judged by their schema "
        "at the image's version (core/versions/data: unknown plugin type, unknown or mistyped parameter, missing "
        "reference).",
        consumers.router_config_schema,
        "stack",
    ),
    PolicySpec(
        "engine-weights-match",
        "An engine serves the model id, revision and draft that the download Job (or PVC) of its weights volume "
        "records in its rebel100.ai/ annotations.",
        weights.engine_weights_match,
        "stack",
    ),
    # 7: hygiene
    PolicySpec(
        "hf-token-secret-ref", "HF_TOKEN only from a Secret reference.", hygiene.hf_token_secret_ref, "resource"
    ),
    PolicySpec(
        "env-names-unique",
        "A container has at most one env entry of each name (the API server refuses duplicates).",
        hygiene.env_names_unique,
        "resource",
    ),
    PolicySpec(
        "ports-distinct",
        "No two TCP port entries of a Service take one port (the API server refuses it), and no two listeners of a "
        "pod (its containers share one network namespace): declared containerPorts, and the DP ranks, RPC port and "
        "NIXL side channels engines and routing sidecars bind from their flags and env.",
        hygiene.ports_distinct,
        "resource",
    ),
    PolicySpec("image-tag-pinned", "No untagged or :latest images.", hygiene.image_tag_pinned, "resource"),
    # What the node refuses though the API server stores it: the pod never starts, in any environment.
    PolicySpec(
        "runtime-accepts-container",
        "Every container's image is a reference the kubelet can parse "
        "(distribution/reference; InvalidImageName otherwise) and every capability it adds or drops is a Linux "
        "capability name without CAP_ (containerd adds the prefix itself).",
        hygiene.runtime_accepts_container,
        "resource",
    ),
    PolicySpec(
        "engine-resource-requests",
        "Engine containers request CPU and memory.",
        hygiene.engine_resource_requests,
        "resource",
    ),
    # A dev stack runs without NetworkPolicies and PodMonitors by design, and `pulumi up --policy-pack
    # policy` without a config file must not block it: advice by default, mandatory through prod.json.
    PolicySpec(
        "engine-network-policy",
        "Engine pods are selected by an ingress NetworkPolicy.",
        hygiene.engine_network_policy,
        "stack",
        enforcement=ADVISORY,
    ),
    PolicySpec(
        "engine-metrics-scraped",
        "Engine pods are selected by a PodMonitor.",
        hygiene.engine_metrics_scraped,
        "stack",
        enforcement=ADVISORY,
    ),
    # Metrics scraped with no alert on them are found only after the users find the fault: advice by default and in
    # dev.json, mandatory through prod.json (as the two above).
    PolicySpec(
        "alerts-where-scraped",
        "Pods of an engine role or the EPP that a PodMonitor scrapes are watched by an alert labelled with their role "
        "(role: prefill, decode or epp) in a PrometheusRule of their namespace.",
        alerting.alerts_where_scraped,
        "stack",
        enforcement=ADVISORY,
    ),
    # An alert that reads nothing stays silent through its fault: a mistake in any environment.
    PolicySpec(
        "alerts-served",
        "Each alert of a PrometheusRule labelled with a role (prefill, decode or epp) watches a role whose pods run in "
        "its namespace, and reads the engines' and the EPP's series under the names the pinned images serve them "
        "(core/versions).",
        alerting.alerts_served,
        "stack",
    ),
    # A monitor that is there but gets 401 is a mistake in any environment: mandatory, as the wiring rules.
    PolicySpec(
        "epp-metrics-scrapeable",
        "A PodMonitor or ServiceMonitor that scrapes the EPP's metrics port sends a "
        "bearer token when the EPP checks one (--metrics-endpoint-auth, on by default), the EPP may create the "
        "TokenReview and SubjectAccessReview that check it, and the token's account may get /metrics.",
        observability.epp_metrics_scrapeable,
        "stack",
    ),
    # 8: security. A secret literal is never right: mandatory everywhere, as hf-token-secret-ref. The rest is
    # what a single-node dev cluster may do without: advice by default and in dev.json, mandatory in prod.json.
    PolicySpec(
        "no-literal-secrets",
        "No env var named like a token, secret, password or API key holds a literal value.",
        security.no_literal_secrets,
        "resource",
    ),
    # A sidecar that would call any prefiller a client names is wrong in any environment: mandatory. A pin that
    # cannot be protected (its allowlist cannot read the GA InferencePool) is advice, in prod.json too: the stack
    # that serves the v0.7.1 programs CI builds (pd-router07) runs one.
    PolicySpec(
        "sidecar-ssrf-protection",
        "A P/D routing sidecar that can runs with --enable-ssrf-protection from the "
        "InferencePool that selects its pod (--inference-pool), with an API token and a Role that let it list "
        "and watch that pool and its pods; a sidecar older than its GA-pool allowlist (0.10.0) must not turn it "
        "on (it would refuse every prefill).",
        ssrf.sidecar_ssrf_protection,
        "stack",
    ),
    PolicySpec(
        "sidecar-ssrf-capable",
        "A P/D routing sidecar is pinned to a version that can protect itself against a "
        "prefiller named by the client (0.10.0 or later; core/versions/router.py SSRF_ALLOWLIST).",
        ssrf.sidecar_ssrf_capable,
        "resource",
        enforcement=ADVISORY,
    ),
    # Autoscaled engines (KEDA ScaledObjects of prefill and decode workloads): the gate's rules, core.rules.
    PolicySpec(
        "autoscaling-bounds",
        "A ScaledObject of a prefill or decode workload keeps at least one pod "
        "(minReplicaCount >= 1) and its bounds are not inverted (minReplicaCount <= maxReplicaCount).",
        autoscaling.autoscaling_bounds,
        "stack",
    ),
    PolicySpec(
        "autoscaling-fits-site",
        "At every autoscaled engine's maxReplicaCount (other Rebel100 engines at their "
        "own count or maximum) the NPUs fit nodes x npusPerNode, one pod per node for a spread role (skipped "
        "when nodes is 0).",
        autoscaling.autoscaling_fits_site,
        "stack",
        facts=("nodes", "npusPerNode", "npuDeviceClass"),
    ),
    PolicySpec(
        "autoscaling-rollout",
        "An autoscaled engine Deployment rolls out with RollingUpdate, not Recreate "
        "(which would let the autoscaler shrink the role while the new pods compile).",
        autoscaling.autoscaling_rollout,
        "stack",
    ),
    PolicySpec(
        "autoscaling-signal",
        "A prometheus trigger on one of the stack's signals reads one the role can scale "
        "on, under the name the pinned image serves it (core/versions), from pods a PodMonitor scrapes.",
        autoscaling.autoscaling_signal,
        "stack",
    ),
    PolicySpec(
        "autoscaling-target",
        "The threshold of a prometheus trigger on one of the stack's signals lies in that signal's range "
        "(core/autoscaling.py SIGNALS: kvCacheUsage is a fraction, so below 1 / (1 + the HPA's tolerance 0.1), "
        "else the pods' average never exceeds it enough to add a pod).",
        autoscaling.autoscaling_target,
        "stack",
    ),
    PolicySpec(
        "autoscaling-scrape-interval",
        "The PodMonitors that scrape the pods a trigger's signal comes from do so at least once per lookback of "
        "its query: one sample within Prometheus's lookback delta (5m) for an instant selector, two within the "
        "range of a rate (core/autoscaling.py query_lookback).",
        autoscaling.autoscaling_scrape_interval,
        "stack",
    ),
    PolicySpec(
        "rbac-least-privilege",
        "Roles bound to a ServiceAccount that runs a pod grant no '*' and no write "
        "verbs; the EPP's Role is namespace-scoped (cluster-wide it may only create the token and subject "
        "access reviews that check a metrics scrape).",
        security.rbac_least_privilege,
        "stack",
        enforcement=ADVISORY,
    ),
    PolicySpec(
        "pod-security-context",
        "Seccomp confined, no host namespaces or privileged; containers restricted, engine deviations recorded in "
        "rebel100.ai/security-exceptions.",
        security.pod_security_context,
        "resource",
        enforcement=ADVISORY,
    ),
    # 9: availability (policy/availability.py), at the same levels as the security policies above.
    PolicySpec(
        "disruption-budget",
        "Engines and the EPP are selected by one PodDisruptionBudget, and no budget blocks drains.",
        availability.disruption_budget,
        "stack",
        enforcement=ADVISORY,
    ),
    PolicySpec(
        "engine-spread",
        "Engine workloads of more than one replica keep their role's pods one per node (required podAntiAffinity on "
        "kubernetes.io/hostname).",
        availability.engine_spread,
        "resource",
        enforcement=ADVISORY,
    ),
    # Rollouts (policy/availability.py): a stopping engine or EPP finishes what it started; mandatory at every level.
    PolicySpec(
        "engine-grace-covers-drain",
        "An engine pod's terminationGracePeriodSeconds covers its preStop sleep plus its drain after SIGTERM "
        "(`vllm serve --shutdown-timeout`), so SIGKILL never cuts the requests the drain lets finish.",
        availability.engine_grace_covers_drain,
        "resource",
    ),
    PolicySpec(
        "epp-grace-covers-drain",
        "An EPP pod's terminationGracePeriodSeconds is longer than its --drain-timeout (upstream's 30 s when an EPP "
        "that has the flag is not given it), so SIGKILL never lands inside the drain.",
        availability.epp_grace_covers_drain,
        "resource",
    ),
)
BY_NAME = {spec.name: spec for spec in POLICIES}


# --- configuration (the `--policy-pack-config` file) ----------------------------------------


class PackConfigError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Resolved:
    """One policy's enforcement level and config properties after the config file is applied."""

    level: str
    properties: Mapping[str, Any]

    @property
    def facts(self) -> Facts:
        return facts_from(self.properties)


def resolve(config: Mapping[str, Any] | None = None) -> dict[str, Resolved]:
    """Apply a policy-pack config the way the Pulumi CLI does: `all` sets every level, a policy's own
    entry (a level, or an object with `enforcementLevel` and properties) wins over it."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(BY_NAME) - {"all"})
    if unknown:
        raise PackConfigError(f"policy config names unknown policies {unknown}; known: {', '.join(BY_NAME)}")
    default_level = _level(config.get("all"), "all")
    resolved = {}
    for spec in POLICIES:
        entry = config.get(spec.name)
        level = _level(entry, spec.name) or default_level or spec.enforcement
        properties = {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else {}
        resolved[spec.name] = Resolved(level, properties)
        resolved[spec.name].facts  # noqa: B018 - raise on a bad value now, not mid-evaluation
    return resolved


def with_facts(config: Mapping[str, Any] | None, values: Mapping[str, Any]) -> dict[str, Any]:
    """A pack config in which every policy that reads one of these facts gets it (over the file's)."""
    merged = dict(config or {})
    for spec in POLICIES:
        own = {key: values[key] for key in spec.facts if key in values}
        if not own:
            continue
        entry = merged.get(spec.name)
        entry = dict(entry) if isinstance(entry, dict) else ({"enforcementLevel": entry} if entry else {})
        merged[spec.name] = {**entry, **own}
    return merged


def _level(entry: Any, where: str) -> str | None:
    level = entry.get("enforcementLevel") if isinstance(entry, dict) else entry
    if level is not None and level not in LEVELS:
        raise PackConfigError(f"policy config {where}: enforcement level {level!r} is not one of {', '.join(LEVELS)}")
    return level


def load_config(path: pathlib.Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise PackConfigError(f"cannot read policy config {path}: {error}") from None


# --- evaluation ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Violation:
    policy: str
    resource: str
    message: str
    level: str

    @property
    def mandatory(self) -> bool:
        return self.level in (MANDATORY, "remediate")

    def line(self) -> str:
        return f"[{self.level}] {self.policy}: {self.resource}: {self.message}"


def evaluate(manifests: list[dict], config: Mapping[str, Any] | None = None) -> list[Violation]:
    """Every policy over the manifests, with the levels and facts of `config`."""
    resolved = resolve(config)
    violations = []
    for spec in POLICIES:
        setting = resolved[spec.name]
        if setting.level == DISABLED:
            continue
        for finding in spec.rule(manifests, setting.facts):
            violations.append(Violation(spec.name, finding.resource, finding.message, setting.level))
    return violations


def run_rule(spec: PolicySpec, manifests: list[dict], properties: Mapping[str, Any] | None) -> list[Finding]:
    """One policy's findings with its config properties (the Pulumi adapters call this)."""
    return spec.rule(manifests, facts_from(properties))
