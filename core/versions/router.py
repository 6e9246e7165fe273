"""Facts about the llm-d router's two programs: the EPP (Endpoint Picker, reads the EndpointPickerConfig) and the
P/D (disagg) routing sidecar of each decode pod (reads its flags).

One project, one version line: the Go module `github.com/llm-d/llm-d-inference-scheduler` became
`github.com/llm-d/llm-d-router` at v0.9.0 (same repository, same tags), and its images were renamed with it:
`llm-d-inference-scheduler` -> `llm-d-router-endpoint-picker`, `llm-d-routing-sidecar` -> `llm-d-router-disagg-sidecar`.
A pin of an old image name is therefore judged by its tag like a new one: `llm-d-inference-scheduler:v0.3.2` is
v0.3.2 of the same EPP (and a private mirror's name tells nothing, its tag does).

Every `since` below was read in the module's source at that tag (`source`: module@version and file); the
"first version" of a plugin type that comes from the Gateway API Inference Extension (GIE), which the EPP
links in, is the oldest release the stack ever pinned (v0.3.2, whose go.mod requires GIE v1.0.0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from core.cmdline import go_true
from core.versions import Feature, Version

EPP = "llm-d EPP"
SIDECAR = "llm-d P/D sidecar"

# The release the stack targets: its EPP and sidecar accept the dev, prod-4p4d and agg renders
# (docs/consumers-router.md).
TARGET = Version(0, 10, 0)
EPP_IMAGE = f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v{TARGET}"
SIDECAR_IMAGE = f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:v{TARGET}"
# Image names of the same programs before and after the v0.9.0 rename (release workflow and Makefile).
EPP_IMAGE_NAMES = ("llm-d-router-endpoint-picker", "llm-d-inference-scheduler")
SIDECAR_IMAGE_NAMES = ("llm-d-router-disagg-sidecar", "llm-d-routing-sidecar")

SCHEDULER_MODULE = "github.com/llm-d/llm-d-inference-scheduler"
ROUTER_MODULE = "github.com/llm-d/llm-d-router"
RENAMED_AT = Version(0, 9, 0)
GIE_IN_0_3_2 = "sigs.k8s.io/gateway-api-inference-extension@v1.0.0 (required by llm-d-inference-scheduler@v0.3.2)"


def module_at(version: Version) -> str:
    """The Go module of the router project at a version (renamed at v0.9.0)."""
    return ROUTER_MODULE if version >= RENAMED_AT else SCHEDULER_MODULE


def _fact(consumer: str, kind: str, name: str, since: Version, path: str, *, module: str = "") -> Feature:
    return Feature(consumer, kind, name, since, f"{module or module_at(since)}@v{since} {path}")


V0_3_2, V0_4_0, V0_6_0, V0_7_0, V0_9_0 = (
    Version(0, 3, 2),
    Version(0, 4, 0),
    Version(0, 6, 0),
    Version(0, 7, 0),
    Version(0, 9, 0),
)

API_VERSIONS: dict[str, Feature] = {
    f.name: f
    for f in (
        _fact(EPP, "apiVersion", "llm-d.ai/v1alpha1", V0_9_0, "apix/config/v1alpha1/zz_generated.register.go"),
        Feature(
            EPP,
            "apiVersion",
            "inference.networking.x-k8s.io/v1alpha1",
            V0_3_2,
            f"{GIE_IN_0_3_2} apix/config/v1alpha1/zz_generated.register.go",
        ),
    )
}

PLUGIN_TYPES: dict[str, Feature] = {
    f.name: f
    for f in (
        # The reference design's v0.9+ plugins (module llm-d-router).
        _fact(
            EPP,
            "plugin type",
            "approx-prefix-cache-producer",
            V0_9_0,
            "pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/constants/constants.go",
        ),
        _fact(
            EPP,
            "plugin type",
            "inflight-load-producer",
            V0_9_0,
            "pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload/constants/constants.go",
        ),
        _fact(
            EPP,
            "plugin type",
            "prefix-cache-affinity-filter",
            V0_9_0,
            "pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity/plugin.go",
        ),
        _fact(
            EPP,
            "plugin type",
            "token-load-scorer",
            V0_9_0,
            "pkg/epp/framework/plugins/scheduling/scorer/tokenload/token_load.go",
        ),
        # router.prefixCache precise: the split pipeline token-producer -> precise-prefix-cache-producer ->
        # prefix-cache-scorer, fed per pod by the endpoint events (v0.9.x was not read: taken to lack it).
        _fact(
            EPP,
            "plugin type",
            "token-producer",
            Version(0, 10, 0),
            "pkg/epp/framework/plugins/requestcontrol/dataproducer/tokenizer/tokenizer.go",
        ),
        _fact(
            EPP,
            "plugin type",
            "precise-prefix-cache-producer",
            Version(0, 10, 0),
            "pkg/epp/framework/plugins/requestcontrol/dataproducer/preciseprefixcache/producer.go",
        ),
        _fact(
            EPP,
            "plugin type",
            "endpoint-notification-source",
            Version(0, 10, 0),
            "pkg/epp/framework/plugins/datalayer/source/notifications/endpoint_datasource.go",
        ),
        # router.sessionAffinityWeight: the request-header processor that names an agent's session (at v0.9.0 a
        # pre-admitter of another interface; not read further: taken to lack it).
        _fact(
            EPP,
            "plugin type",
            "agent-identity",
            Version(0, 10, 0),
            "pkg/epp/framework/plugins/requestcontrol/requestheader/agentidentity/agent_identity.go",
        ),
        # Its `strategy: session_id`, which the render uses, came at v0.10.0 (PLUGIN_PARAMETER_VALUES).
        _fact(
            EPP,
            "plugin type",
            "session-affinity-scorer",
            Version(0, 1, 0),
            "pkg/scheduling/plugins/scorer/session_affinity.go",
        ),
        # router.noHitLruScorerWeight: new sessions dealt in least-recently-used order.
        _fact(EPP, "plugin type", "no-hit-lru-scorer", Version(0, 4, 0), "pkg/plugins/scorer/no_hit_lru.go"),
        # P/D: deciders and the disagg profile handler.
        _fact(EPP, "plugin type", "prefix-based-pd-decider", V0_6_0, "pkg/plugins/profile/prefix_based_pd_decider.go"),
        _fact(EPP, "plugin type", "always-disagg-pd-decider", V0_6_0, "pkg/plugins/profile/always_disagg_decider.go"),
        _fact(EPP, "plugin type", "disagg-profile-handler", V0_7_0, "pkg/plugins/profile/disagg_profile_handler.go"),
        _fact(
            EPP, "plugin type", "prefill-filter", Version(0, 1, 0), "pkg/scheduling/plugins/filter/pd_role_filter.go"
        ),
        # Counts a request from the EPP's pick to the response's end (PreRequest .. ResponseComplete); from v0.9.0 it
        # reads the count of the inflight-load-producer, which the EPP creates for it and which ends the `prefill`
        # profile's count at the response's first bytes (v0.9.0 inflightload/producer.go ResponseBody).
        _fact(EPP, "plugin type", "active-request-scorer", Version(0, 3, 0), "pkg/plugins/scorer/active_request.go"),
        _fact(EPP, "plugin type", "decode-filter", Version(0, 1, 0), "pkg/scheduling/plugins/filter/pd_role_filter.go"),
        # From GIE, linked into every EPP the stack pinned.
        Feature(
            EPP,
            "plugin type",
            "prefix-cache-scorer",
            V0_3_2,
            f"{GIE_IN_0_3_2} pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go",
        ),
        Feature(
            EPP,
            "plugin type",
            "queue-scorer",
            V0_3_2,
            f"{GIE_IN_0_3_2} pkg/epp/scheduling/framework/plugins/scorer/queue.go",
        ),
        Feature(
            EPP,
            "plugin type",
            "max-score-picker",
            V0_3_2,
            f"{GIE_IN_0_3_2} pkg/epp/scheduling/framework/plugins/picker/max_score_picker.go",
        ),
    )
}

# Plugin parameter values the render uses that a plugin type older than them ignores or refuses: (type, parameter,
# value) -> the feature. session-affinity-scorer took a `strategy`, and the server-side bindings of `session_id`, at
# v0.10.0 (#2238); up to v0.9.0 it knows only a pod token the client must echo (its README at v0.9.0), and v0.7.1
# ignores an unknown parameter (json.Unmarshal), so such a pin would keep no session.
PLUGIN_PARAMETER_VALUES: dict[tuple[str, str, str], Feature] = {
    ("session-affinity-scorer", "strategy", "session_id"): _fact(
        EPP,
        "plugin parameter",
        "session-affinity-scorer strategy session_id",
        Version(0, 10, 0),
        "pkg/epp/framework/plugins/scheduling/scorer/sessionaffinity/session_affinity.go (StrategySessionID)",
    ),
}

SESSION_ID_STRATEGY = PLUGIN_PARAMETER_VALUES[("session-affinity-scorer", "strategy", "session_id")]


def epp_counts_prefill_tokens(version: Version | None) -> bool:
    """The EPP at `version` has token-load-scorer (the prompt tokens in flight to each endpoint, from its own picks)."""
    return PLUGIN_TYPES["token-load-scorer"].in_pin(version)


def epp_keeps_sessions(version: Version | None) -> bool:
    """The EPP at `version` keeps a session a client names on the endpoint that served it (session-affinity-scorer's
    `session_id` strategy and agent-identity)."""
    return SESSION_ID_STRATEGY.in_pin(version)


# Flags of the EPP the render passes whose presence depends on the pin (the others are in every EPP it targets).
# `--drain-timeout` (a Go duration, default 30s): on SIGTERM the EPP goes NotServing and releases its leader lease at
# once, then keeps serving ext_proc for this window, so requests in flight and those sent before the gateway sees the
# endpoint go are not refused. In the v0.10.0 build (`epp --help` of /work/shared/bin/llm-d-router-v0.10.0); absent
# from the EPP of llm-d-inference-scheduler v0.7.1, whose flags are GIE v1.4.0's (pkg/epp/server/options.go; on SIGTERM
# its gRPC server stops taking new streams at once: GracefulStop, internal/runnable/grpc.go). v0.9.x was not read: it is
# taken to lack the flag.
DRAIN_TIMEOUT_FLAG = "--drain-timeout"
EPP_DRAIN_TIMEOUT_DEFAULT_S = 30  # upstream's DefaultDrainTimeout, what an EPP with the flag drains when not given it
EXPERIMENTAL_FLAG = "--allow-experimental-plugins"  # the EPP loads an Alpha plugin type only with it (v0.10.0)
EPP_FLAGS: dict[str, Feature] = {
    f.name: f
    for f in (
        _fact(
            EPP,
            "flag",
            EXPERIMENTAL_FLAG,
            Version(0, 10, 0),
            "pkg/epp/server/options.go (AllowExperimentalPlugins); not in llm-d-router@v0.9.0's",
        ),
        _fact(
            EPP,
            "flag",
            DRAIN_TIMEOUT_FLAG,
            Version(0, 10, 0),
            "pkg/epp/server/options.go (DrainTimeout, DefaultDrainTimeout 30s); not in GIE v1.4.0's options.go, the "
            "runner of llm-d-inference-scheduler v0.7.1",
        ),
    )
}


def epp_drains(version: Version | None) -> bool:
    """The EPP at `version` has `--drain-timeout`."""
    return EPP_FLAGS[DRAIN_TIMEOUT_FLAG].in_pin(version)


# The routing sidecar moved into the scheduler repository at v0.4.0 (cmd/pd-sidecar) and kept the
# `llm-d-routing-sidecar` image name until v0.9.0; the render's flags are dated from there.
SIDECAR_FLAGS: dict[str, Feature] = {
    f.name: f
    for f in (
        _fact(SIDECAR, "flag", "--port", V0_4_0, "cmd/pd-sidecar/main.go"),
        _fact(SIDECAR, "flag", "--vllm-port", V0_4_0, "cmd/pd-sidecar/main.go"),
        _fact(SIDECAR, "flag", "--data-parallel-size", V0_4_0, "cmd/pd-sidecar/main.go"),
        _fact(SIDECAR, "flag", "--secure-proxy", V0_4_0, "cmd/pd-sidecar/main.go"),
        _fact(SIDECAR, "flag", "--kv-connector", V0_7_0, "pkg/sidecar/proxy/options.go"),
        # SSRF protection: the sidecar calls a prefill host only if it is the IP or name of a pod the InferencePool
        # selects (pkg/sidecar/proxy/allowlist.go; else 403 "Forbidden: prefill target not allowed by SSRF protection",
        # chat_completions.go). The pool is named by `--inference-pool namespace/name` from v0.7.0 (options.go); the
        # v0.4.0-v0.8.0 pair --inference-pool-namespace / --inference-pool-name, deprecated from v0.7.0, is gone at
        # v0.9.0 (llm-d-router@v0.9.0 and v0.10.0 pkg/sidecar/proxy/options.go read --inference-pool only).
        _fact(SIDECAR, "flag", "--enable-ssrf-protection", V0_4_0, "cmd/pd-sidecar/main.go"),
        _fact(SIDECAR, "flag", "--inference-pool", V0_7_0, "pkg/sidecar/proxy/options.go"),
    )
}
SSRF_PROTECTION_FLAG = "--enable-ssrf-protection"
SSRF_POOL_FLAG = "--inference-pool"
SIDECAR_BOOLEAN_FLAGS = frozenset({SSRF_PROTECTION_FLAG, "--secure-proxy", "--enable-prefiller-sampling"})
# The allowlist works against the GA InferencePool the render makes (inference.networking.k8s.io/v1, whose pod labels
# are under spec.selector.matchLabels) only from v0.10.0. Up to v0.9.0 it reads spec.selector as the flat map of the
# v1alpha2 API: from a GA pool it makes the selector `matchLabels=map[...]`, which the API server refuses ("unable to
# parse requirement"), so the allowlist stays empty and the sidecar refuses every prefill pick, the EPP's own (403).
# Measured on the real v0.7.1 sidecar in the local site (2026-12-01, docs/consumers-router.md); fixed upstream by
# commit 4c16a445c (#1696, "allowlist selector parsing for GA InferencePool API"), first released in v0.10.0.
SSRF_ALLOWLIST = Feature(
    SIDECAR,
    "behaviour",
    "SSRF allowlist from a GA InferencePool (spec.selector.matchLabels)",
    Version(0, 10, 0),
    f"{ROUTER_MODULE}@v0.10.0 pkg/sidecar/proxy/allowlist.go (poolSelector; "
    f"commit 4c16a445c, #1696; up to v0.9.0 updatePodsForPool reads spec.selector as a flat map)",
)


def sidecar_can_protect(version: Version | None) -> bool:
    """The sidecar at `version` can run with SSRF protection against the stack's GA InferencePool."""
    return SSRF_ALLOWLIST.in_pin(version)


def sidecar_flags(args: Iterable[str]) -> dict[str, str]:
    """`--name` -> value of a sidecar command line as pflag reads it (`--a=b`, `--a b`; a boolean flag takes no
    separate value: `--enable-ssrf-protection` alone is true). The last one given wins."""
    tokens, flags, index = list(args), {}, 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-"):
            continue
        name, has_value, value = token.partition("=")
        name = "--" + name.lstrip("-")
        if not has_value:
            if name in SIDECAR_BOOLEAN_FLAGS or index >= len(tokens) or tokens[index].startswith("-"):
                value = "true"
            else:
                value = tokens[index]
                index += 1
        flags[name] = value
    return flags


def ssrf_protection_on(flags: dict[str, str]) -> bool:
    """The sidecar's --enable-ssrf-protection as Go's strconv.ParseBool reads it (off by default)."""
    return go_true(flags.get(SSRF_PROTECTION_FLAG, "false"))


def ssrf_pool(flags: dict[str, str], env: dict[str, str] | None = None) -> str | None:
    """`namespace/name` of the InferencePool the sidecar allowlists from: --inference-pool (a bare name is in
    namespace `default`), else INFERENCE_POOL, else the deprecated --inference-pool-namespace/-name pair (or its
    INFERENCE_POOL_NAMESPACE/_NAME), as options.go Complete() reads them; None when none names a whole pool."""
    env = env or {}
    named = flags.get(SSRF_POOL_FLAG) or env.get("INFERENCE_POOL")
    if named:
        return named if "/" in named else f"default/{named}"
    namespace = flags.get("--inference-pool-namespace") or env.get("INFERENCE_POOL_NAMESPACE")
    name = flags.get("--inference-pool-name") or env.get("INFERENCE_POOL_NAME")
    return f"{namespace}/{name}" if namespace and name else None


def epp_features_used(config: dict[str, Any]) -> list[Feature]:
    """The EPP features a rendered EndpointPickerConfig uses: its apiVersion, each plugin type it declares and each
    parameter value with a fact of its own (PLUGIN_PARAMETER_VALUES).
    A name without a fact here is left to the schema check (core.versions.epp_schema), which knows every
    registered type of the versions it has data for."""
    used = [API_VERSIONS[config["apiVersion"]]] if config.get("apiVersion") in API_VERSIONS else []
    for plugin in config.get("plugins") or []:
        if not isinstance(plugin, dict):
            continue
        plugin_type = str(plugin.get("type"))
        given = plugin.get("parameters")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        features = [PLUGIN_TYPES.get(plugin_type)] + [
            PLUGIN_PARAMETER_VALUES.get((plugin_type, str(name), str(value))) for name, value in params.items()
        ]
        used += [f for f in dict.fromkeys(features) if f and f not in used]
    return used


def flag_names(args: Iterable[str]) -> list[str]:
    """`--name` of each flag token (`--a=b` and `--a b` alike), in order."""
    return [token.split("=", 1)[0] for token in args if token.startswith("-")]


def _flag_features_used(facts: dict[str, Feature], args: Iterable[str]) -> list[Feature]:
    """Each feature of `facts` a flag of the rendered argument list uses, once, in the order of the flags."""
    used: list[Feature] = []
    for name in flag_names(args):
        feature = facts.get("--" + name.lstrip("-"))
        if feature and feature not in used:
            used.append(feature)
    return used


def epp_flag_features_used(args: Iterable[str]) -> list[Feature]:
    """The EPP features a rendered argument list uses: each flag with a fact here (EPP_FLAGS)."""
    return _flag_features_used(EPP_FLAGS, args)


def sidecar_features_used(args: Iterable[str]) -> list[Feature]:
    """The sidecar features a rendered argument list uses: each flag with a fact here (SIDECAR_FLAGS)."""
    return _flag_features_used(SIDECAR_FLAGS, args)


# --- Router generations ----------------------------------------------------------------------------------------
# A generation is a line of releases whose EPP reads one shape of EndpointPickerConfig; the render follows the
# generation of the pinned EPP (core.routing) and the sidecar's flags that of the pinned sidecar (core.serving).
# A pin in no generation (older than the oldest, 0.8.x, or a tag that is no version) gets the newest generation's
# render, so the features above judge it as before: too old is refused naming what it lacks.

DECIDER = "<decider>"  # in a plugin list: the configured P/D decider (`<router.decider>-pd-decider`)
GIE_1_4_0 = "sigs.k8s.io/gateway-api-inference-extension@v1.4.0"
GIE_1_5_0 = "sigs.k8s.io/gateway-api-inference-extension@v1.5.0"
_V0_7_1 = f"{SCHEDULER_MODULE}@v0.7.1"
_V0_10_0 = f"{ROUTER_MODULE}@v0.10.0"


# The pod annotations through which an EPP reads a pod's active target ports (the legacy key is GIE's).
ACTIVE_PORTS_ANNOTATION = "llm-d.ai/active-ports"
LEGACY_ACTIVE_PORTS_ANNOTATION = "inference.networking.k8s.io/active-ports"


@dataclasses.dataclass(frozen=True)
class Generation:
    """What the render must be for one line of router releases, and where each part was read."""

    name: str
    first: Version  # its oldest release
    until: Version | None  # the first release no longer in it (None: no newer line is known)
    bounds: str  # why the line starts and ends there
    api_version: str  # apiVersion of the EndpointPickerConfig
    prefix_index: str  # the plugin type that keeps the prefix index and takes blockSizeTokens,
    prefix_index_source: str  # lruCapacityPerServer and autoTune
    pd_plugins: tuple[str, ...]  # plugin types of the P/D config, in order (DECIDER: the configured decider)
    agg_plugins: tuple[str, ...]  # plugin types of the AGG config, in order
    agg_profile: tuple[str, ...]  # pluginRefs of the AGG config's one profile, in order
    plugins_source: str
    engine_port_flag: str  # the sidecar flag naming rank 0's port of the engine
    engine_port_flag_source: str
    active_ports: tuple[str, ...]  # pod annotation keys the EPP reads for a pod's active target ports, in the
    active_ports_source: str  # order it reads them
    decision_metric: str = ""  # the counter the disagg-profile-handler increments per P/D decision
    decision_metric_source: str = ""  # (label decision_type: prefill-decode, decode-only, ...): the dashboard's
    # The EPP's request counters: requests it scheduled (counted after a successful pick) and requests that failed
    # (label error_code; a request refused before a pick is counted only there), which the alerts read.
    request_metric: str = ""
    request_error_metric: str = ""
    request_metrics_source: str = ""
    client_error_codes: tuple[str, ...] = ()  # error_code values that are the client's fault (not the stack's)
    feature_gates: tuple[str, ...] = ()  # EndpointPickerConfig featureGates the P/D render needs
    feature_gates_source: str = ""
    tracing_env: tuple[tuple[str, str], ...] = ()  # env of the EPP and sidecar containers that keeps their tracing
    tracing_env_source: str = ""  # from exporting spans of requests no client asked to trace

    def covers(self, version: Version) -> bool:
        return self.first <= version and (self.until is None or version < self.until)


GENERATIONS: tuple[Generation, ...] = (
    Generation(
        name="v0.7",
        first=PLUGIN_TYPES["disagg-profile-handler"].since,
        until=Version(0, 8, 0),
        bounds=(
            f"starts with the disagg-profile-handler of the P/D render "
            f"({PLUGIN_TYPES['disagg-profile-handler'].source}); v0.7.0 and v0.7.1 differ only in go.mod "
            f"(llm-d-kv-cache); ends where {SCHEDULER_MODULE}@v0.8.0 go.mod requires {GIE_1_5_0}, whose "
            f"prefix-cache-scorer keeps no index (its factory ignores its parameters; pkg/epp/framework/plugins/"
            f"scheduling/scorer/prefix/plugin.go) while that EPP still reads only the GIE apiVersion: 0.8.x is "
            f"a third shape no stack renders"
        ),
        api_version="inference.networking.x-k8s.io/v1alpha1",
        prefix_index="prefix-cache-scorer",
        prefix_index_source=(
            f"{GIE_1_4_0} pkg/epp/framework/plugins/scheduling/scorer/prefix/plugin.go (Config: autoTune, "
            f"blockSizeTokens, lruCapacityPerServer; required by {_V0_7_1} go.mod)"
        ),
        # disagg-headers-handler: at v0.7.x the pre-request plugin that puts the prefill pick into the
        # x-prefiller-host-port header the sidecar reads (pkg/plugins/pre-request/disagg_headers_handler.go); the
        # disagg-profile-handler only picks. Without it every P/D decision is served decode-only (tests/localsite).
        pd_plugins=(
            "disagg-headers-handler",
            "prefix-cache-scorer",
            "queue-scorer",
            "active-request-scorer",
            "prefill-filter",
            "decode-filter",
            "max-score-picker",
            DECIDER,
            "disagg-profile-handler",
        ),
        agg_plugins=("prefix-cache-scorer", "queue-scorer", "max-score-picker"),
        agg_profile=("prefix-cache-scorer", "queue-scorer", "max-score-picker"),
        plugins_source=(
            f"{_V0_7_1} pkg/plugins/register.go and {GIE_1_4_0} cmd/epp/runner/runner.go "
            f"(registerInTreePlugins: no producers, no token-load-scorer, no "
            f"prefix-cache-affinity-filter); both shapes loaded by the real v0.7.1 EPP (tests/consumers)"
        ),
        engine_port_flag="--vllm-port",
        engine_port_flag_source=f"{_V0_7_1} pkg/sidecar/proxy/options.go",
        active_ports=(LEGACY_ACTIVE_PORTS_ANNOTATION,),
        active_ports_source=(
            f"{GIE_1_4_0} pkg/epp/datastore/datastore.go (activePortsAnnotation; the EPP of "
            f"{_V0_7_1} cmd/epp/main.go is that module's runner)"
        ),
        # Without the gate the prefix-cache-scorer's PrepareRequestData never runs, the prefix-based decider finds
        # no match info on the decode endpoint ("unable to read prefix cache state") and answers decode-only for
        # every request (tests/localsite); upstream's deploy/config/pd-epp-config.yaml sets it.
        # Not pd_decision_total: only the deprecated pd-profile-handler increments that one (tests/localsite found
        # the dashboard's panel empty).
        decision_metric="llm_d_inference_scheduler_disagg_decision_total",
        decision_metric_source=(
            f"{_V0_7_1} pkg/plugins/profile/disagg_profile_handler.go (RecordDisaggDecision) and "
            f"pkg/metrics/metrics.go (SchedulerSubsystem llm_d_inference_scheduler)"
        ),
        request_metric="inference_objective_request_total",
        request_error_metric="inference_objective_request_error_total",
        request_metrics_source=(
            f"{GIE_1_4_0} pkg/epp/metrics/metrics.go (requestCounter, requestErrCounter: subsystem "
            f"inference_objective) and pkg/epp/handlers/server.go (RecordRequestCounter after HandleRequest; "
            f"RecordRequestErrCounter with the response's or CanonicalCode(err)); codes pkg/epp/util/error/error.go"
        ),
        client_error_codes=("BadRequest",),
        # Both programs start OpenTelemetry tracing whatever --tracing says, exporting over OTLP gRPC to
        # OTEL_EXPORTER_OTLP_ENDPOINT (localhost:4317 when unset) 10% of the requests no caller sampled (a parent-based
        # ratio sampler, its ratio from OTEL_TRACES_SAMPLER_ARG). With no collector there, each failed export wrote a
        # Go log line into the EPP's JSON log (tests/localsite). Ratio 0: only a caller's sampled trace is followed.
        tracing_env=(("OTEL_TRACES_SAMPLER_ARG", "0"),),
        tracing_env_source=(
            f"{_V0_7_1} pkg/telemetry/tracing.go (InitTracing), called first by cmd/epp/main.go and "
            f"cmd/pd-sidecar/main.go"
        ),
        feature_gates=("prepareDataPlugins",),
        feature_gates_source=(
            f"{GIE_1_4_0} pkg/epp/datalayer/factory.go (PrepareDataPluginsFeatureGate) and "
            f"cmd/epp/runner/runner.go (prepare-data plugins only with the gate); {_V0_7_1} "
            f"pkg/plugins/profile/prefix_based_pd_decider.go reads PrefixCacheMatchInfoKey"
        ),
    ),
    Generation(
        name="v0.10",
        first=API_VERSIONS["llm-d.ai/v1alpha1"].since,
        until=None,
        bounds=(
            f"starts with the apiVersion llm-d.ai/v1alpha1 ({API_VERSIONS['llm-d.ai/v1alpha1'].source}) "
            f"and the module's rename; v0.10.0 is the release the stack targets"
        ),
        api_version="llm-d.ai/v1alpha1",
        prefix_index="approx-prefix-cache-producer",
        prefix_index_source=(
            f"{_V0_10_0} pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/types.go"
        ),
        pd_plugins=(
            "approx-prefix-cache-producer",
            "prefix-cache-scorer",
            "queue-scorer",
            "active-request-scorer",
            "prefill-filter",
            "decode-filter",
            "max-score-picker",
            DECIDER,
            "disagg-profile-handler",
        ),
        agg_plugins=(
            "approx-prefix-cache-producer",
            "inflight-load-producer",
            "prefix-cache-affinity-filter",
            "token-load-scorer",
            "max-score-picker",
        ),
        agg_profile=("prefix-cache-affinity-filter", "token-load-scorer", "max-score-picker"),
        plugins_source=(
            f"the reference design's P/D and AGG recipes; every type registered by {_V0_10_0} "
            f"cmd/epp/runner/runner.go (core/versions/data/epp-v0.10.0.json)"
        ),
        # v0.10.0 calls it a deprecated alias of --model-server-port; kept: every sidecar from v0.4.0 reads it.
        engine_port_flag="--vllm-port",
        engine_port_flag_source=f"{_V0_10_0} pkg/sidecar/proxy/options.go",
        # The llm_d_epp_ name; the llm_d_inference_scheduler_ one is kept deprecated beside it.
        decision_metric="llm_d_epp_disagg_decision_total",
        decision_metric_source=(
            f"{_V0_10_0} pkg/epp/framework/plugins/scheduling/profilehandler/disagg/"
            f"disagg_profile_handler.go (RecordDisaggDecision) and metrics.go (LlmdDisaggDecisionCount"
            f"; pkg/epp/metrics/llm_d_router_metrics.go: subsystem llm_d_epp)"
        ),
        # The llm_d_epp_ names; the inference_objective_ ones are kept deprecated beside them.
        request_metric="llm_d_epp_request_total",
        request_error_metric="llm_d_epp_request_error_total",
        request_metrics_source=(
            f"{_V0_10_0} pkg/epp/metrics/llm_d_router_metrics.go (llmdRequestCounter, llmdRequestErrCounter: "
            f"subsystem llm_d_epp) and pkg/epp/handlers/server.go (RecordRequestCounter after HandleRequest; "
            f"RecordRequestErrCounter with the response's or CanonicalCode(err)); codes pkg/common/error/error.go"
        ),
        client_error_codes=("BadRequest", "Unauthorized", "Forbidden", "NotFound", "PreconditionFailed"),
        active_ports=(ACTIVE_PORTS_ANNOTATION, LEGACY_ACTIVE_PORTS_ANNOTATION),
        active_ports_source=(
            f"{_V0_10_0} pkg/epp/datastore/datastore.go (activePortsAnnotation, then "
            f"legacyGAIEActivePortsAnnotation; the same at {ROUTER_MODULE}@v0.9.0)"
        ),
    ),
)


def tracing_env(version: Version | None) -> list[dict[str, str]]:
    """Env entries that keep the EPP or sidecar of a pin from tracing requests no caller sampled (empty when
    `--tracing=false` already does, or the program has no tracing)."""
    return [{"name": name, "value": value} for name, value in generation_for_pin(version).tracing_env]


def generation(version: Version | None) -> Generation | None:
    """The generation a release belongs to; None for a version in none of them, or no version."""
    return next((g for g in GENERATIONS if version is not None and g.covers(version)), None)


def generation_for_pin(version: Version | None) -> Generation:
    """The generation whose render a pin gets: its own, else the newest (the features then judge the pin)."""
    return generation(version) or GENERATIONS[-1]


def active_ports_annotations(version: Version | None) -> tuple[str, ...]:
    """The pod annotation keys through which the EPP at `version` reads a pod's active target ports."""
    return generation_for_pin(version).active_ports


def every_active_ports_annotation() -> tuple[str, ...]:
    """Every key some supported EPP reads, newest first: a pod carrying them all is read by any of them."""
    return tuple(dict.fromkeys(key for g in reversed(GENERATIONS) for key in g.active_ports))
