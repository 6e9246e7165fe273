"""Typed stack configuration: the schema of the `rebel100:` Pulumi config namespace.

Every field's default is the Target Configuration of `reference-design.md` (4P4D, RDS on, EAGLE-3);
the `description` of each field is the one-line meaning shown in the reference table of docs/configuration.md.
Keys are camelCase in the stack files (`rebel100:prefill: {maxNumSeqs: 4}`) and snake_case here.

This module only describes and parses. Rules that relate several fields live in
`core.gate`, numbers derived from the fields in `core.sizing`.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from core import keys
from core.formats import (
    AnnotationKey,
    Capability,
    Dns1123Label,
    Dns1123Subdomain,
    DraAttribute,
    EnvVarName,
    GatewayHostname,
    Image,
    LabelKey,
    LabelValue,
    NonNegativeQuantity,
    Port,
    PositiveQuantity,
    PrometheusDuration,
)
from core.versions import engine as engine_versions
from core.versions import router as router_versions


def _http_header_name(value: str) -> str:
    # RFC 9110 section 5.1: a field name is a token; the EPP matches it whatever its case.
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", value):
        raise PydanticCustomError(
            "http_header_name",
            "an HTTP header name is one or more letters, digits or !#$%&'*+-.^_`|~ (an RFC 9110 token), e.g. "
            "x-session-id",
        )
    return value


HttpHeaderName = Annotated[str, AfterValidator(_http_header_name)]

NAMESPACE = keys.NAMESPACE  # in core.keys, which reading a stack file imports without the schema


def unwrap_optional(annotation: Any) -> Any:
    """Optional[X] -> X (anything else unchanged), to walk nested sections of the schema."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


# What a key of each scalar type takes in a stack file, said once: the reference (stacks/reference.py) prints it and
# the gate's refusal of a mistyped value (core/gate/parse.py) quotes it. The types are strict (`Section`): the value
# the program reads is the one the stack file wrote, not a conversion of it (yaml.v3 and the CLI already turn `1.0`
# into `1` and `0o17` into 15, core/stackfile.py; what is left to refuse is a value of another kind).
SCALAR_TYPES: dict[str, str] = {
    "int": "a whole number without quotes (`4`), not a boolean, a quoted number or a fraction",
    "float": "a number without quotes (`0.8`, `2`), not a boolean or a quoted number",
    "bool": "`true` or `false` without quotes (`yes`, `no`, `on` and `off` are strings to the Pulumi CLI's YAML)",
    "str": 'text (quote a value YAML reads as a number or a boolean: `cpu: "32"`)',
}


class Section(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected, immutable, strict scalar types (an int
    key takes no `true` and no `"4"`: SCALAR_TYPES)."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        validate_default=True,
        strict=True,
    )


class Hardware(Section):
    """Facts about the nodes and cards. Defaults describe the reference Rebel100 nodes."""

    npus_per_node: int = Field(
        8,
        ge=1,
        le=64,
        description="Rebel100 cards (NPUs) per node; 4P4D places one prefill and one decode pod (4 + 4) on each node.",
    )
    nodes: int | None = Field(
        None, ge=1, description="NPU nodes in the cluster; when set, the plan checks that every pod fits."
    )
    chiplets_per_npu: int = Field(4, ge=1, description="Chiplets per card; each has one HBM stack.")
    hbm_per_chiplet_gib: float = Field(
        36.0, gt=0, description="HBM per chiplet in GiB (36 GiB HBM3E, 144 GiB per card)."
    )
    nvme_drives_per_node: int = Field(
        2,
        ge=0,
        description=(
            "NVMe drives bound to RDS on each RDS node (Unverified default: the reference node inventory is not "
            "public)."
        ),
    )
    rdma_nics_per_pod: int = Field(
        2, ge=0, le=8, description="RoCE NICs each engine pod claims through dranet, from the NPUs' NUMA node."
    )
    npu_product: LabelValue = Field(
        "RBLN-CR13",
        min_length=1,
        description="Value of the node label rebellions.ai/npu.product the engines are scheduled on.",
    )
    npu_device_class: Dns1123Subdomain = Field(
        "npu.rebellions.ai", min_length=1, description="DRA DeviceClass of the NPUs."
    )
    nic_device_class: Dns1123Subdomain = Field("dranet", min_length=1, description="DRA DeviceClass of the RDMA NICs.")
    numa_attribute: DraAttribute = Field(
        "resource.kubernetes.io/numaNode",
        min_length=1,
        description="Device attribute that keeps NPUs and NICs on one NUMA node.",
    )


class ModelSpec(Section):
    """The served model and the facts the sizing needs."""

    name: str = Field(
        "MiniMaxAI/MiniMax-M2.7", min_length=1, description="Hugging Face id of the model, passed to `vllm serve`."
    )
    served_name: str | None = Field(None, description="Name clients send as `model`; defaults to `name`.")
    layers: int = Field(62, ge=1, description="Decoder layers (bounds pipeline parallelism).")
    experts: int = Field(256, ge=0, description="Routed experts per MoE layer (0 for a dense model).")
    kv_heads: int = Field(8, ge=1, description="KV heads per layer.")
    head_dim: int = Field(128, ge=1, description="Dimension of one attention head.")
    max_context: int = Field(204800, ge=1, description="Longest context the model supports (input + output tokens).")


class Speculative(Section):
    """`--speculative-config`; must be identical on prefill and decode."""

    method: Literal["eagle3", "suffix", "ngram"] = Field(
        "eagle3", description="Speculative method: EAGLE-3 (draft head), or the draft-free suffix / n-gram."
    )
    model: str | None = Field(
        "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k", description="Draft model (EAGLE-3 only)."
    )
    num_speculative_tokens: int = Field(3, ge=1, le=16, description="Tokens proposed per step.")


class Engine(Section):
    """Serving arguments common to both roles (reference design section 4)."""

    image: Image = Field(
        engine_versions.DEFAULT_IMAGE,
        min_length=1,
        description=(
            "RBLN vLLM image of the engines (a pinned tag, never `latest`); its tag is the vllm-rbln version, which "
            "fixes the vLLM and lmcache-rbln in it (core/versions/engine.py)."
        ),
    )
    block_size: int = Field(4096, ge=16, description="`--block-size`: KV block in tokens.")
    max_model_len: int = Field(204800, ge=1, description="`--max-model-len`: input + output tokens.")
    max_num_batched_tokens: int = Field(
        512, ge=1, description="`--max-num-batched-tokens`; also the sub-block size when sub-block caching is on."
    )
    kv_cache_dtype: Literal["fp8", "auto", "bfloat16"] = Field(
        "fp8", description="`--kv-cache-dtype`; fp8 gives the ~124 KiB per token of the design."
    )
    sub_block_cache: bool = Field(
        True, description="`VLLM_RBLN_SUB_BLOCK_CACHE=1`: prefix reuse in sub-blocks of `maxNumBatchedTokens` tokens."
    )
    enable_prefix_caching: bool = Field(
        True, description="`--enable-prefix-caching`, or `--no-enable-prefix-caching` (vLLM's default is on)."
    )
    enable_chunked_prefill: bool = Field(
        True, description="`--enable-chunked-prefill`, or `--no-enable-chunked-prefill` (vLLM's default is on)."
    )
    tool_call_parser: str | None = Field(
        "minimax_m2", description="`--tool-call-parser` (with `--enable-auto-tool-choice`); null turns tool calls off."
    )
    reasoning_parser: str | None = Field("minimax_m2", description="`--reasoning-parser`; null turns it off.")
    speculative: Speculative | None = Field(
        Speculative(), description="`--speculative-config`; null turns speculative decoding off."
    )
    nixl_side_channel_port: int = Field(
        5600, ge=1024, le=65000, description="`VLLM_NIXL_SIDE_CHANNEL_PORT`; DP rank r uses this + r."
    )
    engine_ready_timeout_s: int = Field(
        9600, ge=60, description="`VLLM_ENGINE_READY_TIMEOUT_S`: compilation on first start is long."
    )
    rpc_timeout_ms: int = Field(1800000, ge=1000, description="`VLLM_RPC_TIMEOUT` in milliseconds.")
    shm_size: NonNegativeQuantity = Field("32Gi", description="Size of the /dev/shm memory volume.")
    startup_failure_threshold: int = Field(
        240, ge=1, description="Startup probe: 30 s periods allowed for compilation (15 s + 30 s x 240 = 2 h)."
    )
    pod_annotations: dict[AnnotationKey, str] = Field(
        default_factory=dict,
        description=(
            "More annotations on the engine pod templates (e.g. `rebel100.local/ready-delay` on the local cluster to "
            "simulate compilation)."
        ),
    )


class Resources(Section):
    """CPU and memory of an engine container (requests = limits keeps the pod Guaranteed)."""

    cpu: NonNegativeQuantity = Field("32", description="CPU request and limit.")
    memory: NonNegativeQuantity = Field(
        "256Gi", description="Memory request and limit (the CPU KV tier must fit inside it)."
    )


# The signals a role can scale on (a closed set; core/autoscaling.py has each one's query, unit and source).
ScalingMetric = Literal["engineQueue", "kvCacheUsage", "pdDecisionRate"]


class Autoscaling(Section):
    """A role scaled by KEDA between two bounds on one signal, instead of a fixed `replicas`."""

    min_replicas: int = Field(
        1,
        ge=0,
        le=1024,
        description="Fewest pods the autoscaler keeps (at least 1: see the gate's rules); the Deployment starts at it.",
    )
    max_replicas: int = Field(
        ge=1,
        le=1024,
        description="Most pods the autoscaler may run; the site must hold this many (hardware.nodes, spreadRoles).",
    )
    metric: ScalingMetric | None = Field(
        None,
        description=(
            "Signal to scale on: `engineQueue` (vllm:num_requests_waiting of the role's pods), `kvCacheUsage` "
            "(vllm:kv_cache_usage_perc, averaged per pod), `pdDecisionRate` (prefill only: the EPP's P/D decisions "
            "per second); null: the role's default (prefill `engineQueue`, decode `kvCacheUsage`)."
        ),
    )
    target: float | None = Field(
        None,
        gt=0,
        description=(
            "Value of the signal per pod the autoscaler aims at (desired pods = ceil(total / target)); null: the "
            "signal's default (engineQueue 2 waiting requests, kvCacheUsage 0.8, pdDecisionRate 1 per second)."
        ),
    )
    scale_up_stabilization_seconds: int = Field(
        0,
        ge=0,
        le=3600,
        description=(
            "HPA scale-up stabilisation window: the lowest recommendation of this window wins (0: react at once)."
        ),
    )
    scale_down_stabilization_seconds: int = Field(
        300,
        ge=0,
        le=3600,
        description=(
            "HPA scale-down stabilisation window: the highest recommendation of this window wins, so a short lull "
            "removes no pod."
        ),
    )
    polling_interval_seconds: int = Field(
        15, ge=1, le=3600, description="How often KEDA reads the signal from Prometheus (ScaledObject pollingInterval)."
    )


class Role(Section):
    """One engine role: its pods, parallelism and role-specific serving arguments."""

    replicas: int = Field(4, ge=0, le=1024, description="Engine pods of this role.")
    # A pod's NPUs (TP x PP x DP-local) fit one node, at most 64 NPUs (hardware.npusPerNode): no factor exceeds it, and
    # the bounds keep the ports and device lists derived from them small whatever a stack file says.
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="`--tensor-parallel-size`.")
    pipeline_parallel_size: int = Field(1, ge=1, le=64, description="`--pipeline-parallel-size`.")
    data_parallel_size: int = Field(1, ge=1, le=1024, description="`--data-parallel-size`.")
    data_parallel_size_local: int | None = Field(
        None,
        ge=1,
        le=64,
        description="`--data-parallel-size-local`: DP ranks in this pod; defaults to `dataParallelSize`.",
    )
    enable_expert_parallel: bool = Field(
        False, description="`--enable-expert-parallel`: spread the experts over the DP x TP devices."
    )
    max_num_seqs: int = Field(4, ge=1, le=1024, description="`--max-num-seqs`.")
    gpu_memory_utilization: float | None = Field(
        None, description="`--gpu-memory-utilization` in (0, 1]; null keeps the engine default."
    )
    port: int = Field(8000, ge=1024, le=65000, description="`--port` of the engine (DP rank r listens on port + r).")
    block_size: int | None = Field(
        None, description="Override of `engine.blockSize` for this role (must agree with the other role)."
    )
    kv_cache_dtype: str | None = Field(
        None, description="Override of `engine.kvCacheDtype` for this role (must agree with the other role)."
    )
    speculative: Speculative | None = Field(
        None, description="Override of `engine.speculative` for this role (must agree with the other role)."
    )
    resources: Resources = Field(Resources(), description="CPU and memory of the engine container.")
    extra_args: list[str] = Field(
        default_factory=list, description="Extra `vllm serve` arguments appended after the generated ones."
    )
    extra_env: dict[EnvVarName, str] = Field(
        default_factory=dict, description="Extra environment variables of the engine container."
    )
    autoscaling: Autoscaling | None = Field(
        None,
        description=(
            "Scale this role with KEDA between `minReplicas` and `maxReplicas` on one signal "
            "(docs/what-it-deploys.md); null: fixed `replicas`."
        ),
    )

    @property
    def autoscaled(self) -> bool:
        return self.autoscaling is not None


class Prefill(Role):
    replicas: int = Field(4, ge=0, le=1024, description="Prefill pods (0 for the AGG recipe).")
    pipeline_parallel_size: int = Field(
        4, ge=1, le=64, description="`--pipeline-parallel-size`: 62 layers in 4 stages."
    )
    max_num_seqs: int = Field(4, ge=1, le=1024, description="`--max-num-seqs`.")
    gpu_memory_utilization: float | None = Field(
        0.8, description="`--gpu-memory-utilization`; 0.8 leaves chiplet-0 memory for RDS."
    )
    port: int = Field(8000, ge=1024, le=65000, description="`--port` of the prefill engine.")


class Sidecar(Section):
    """The llm-d routing sidecar in each decode pod (a native sidecar)."""

    image: Image = Field(
        router_versions.SIDECAR_IMAGE,
        min_length=1,
        description=(
            "P/D (disagg) routing sidecar image; its tag must be at least the first version of every flag the render "
            "passes (core/versions/router.py)."
        ),
    )
    port: int = Field(
        8000, ge=1024, le=65000, description="`--port`: first port the sidecar listens on (rank r on port + r)."
    )
    kv_connector: Literal["nixlv2"] = Field(
        "nixlv2", description="`--kv-connector` protocol the sidecar speaks to prefill."
    )


class Decode(Role):
    replicas: int = Field(4, ge=1, le=1024, description="Decode pods.")
    data_parallel_size: int = Field(4, ge=1, le=1024, description="`--data-parallel-size`: 4 ranks, one per NPU.")
    enable_expert_parallel: bool = Field(True, description="`--enable-expert-parallel`: 256 experts over the 4 cards.")
    max_num_seqs: int = Field(
        1, ge=1, le=1024, description="`--max-num-seqs`: 1 is the latency-first reference; 8 gives 282,624 KV tokens."
    )
    port: int = Field(8200, ge=1024, le=65000, description="`--port` of rank 0 (ranks on 8200-8203).")
    data_parallel_rpc_port: int = Field(5555, ge=1024, le=65000, description="`--data-parallel-rpc-port`.")
    sidecar: Sidecar = Field(Sidecar(), description="The routing sidecar (P/D only).")
    kv_capacity_tokens: int | None = Field(
        None,
        ge=1,
        description=(
            "KV tokens one decode engine reported (num_gpu_blocks x block size), for the plan; e.g. 282624 with "
            "maxNumSeqs 8."
        ),
    )


class KvTier(Section):
    """Tier-2 KV offload of prefill through LMCache (reference design section 5)."""

    mode: Literal["rds", "cpu", "off"] = Field(
        "rds", description="`rds`: NVMe via Rebellions Direct Storage; `cpu`: host memory; `off`: NIXL only."
    )
    chunk_size: int = Field(4096, ge=256, description="`LMCACHE_CHUNK_SIZE` in tokens.")
    rds_max_chunks: int = Field(
        1000, ge=1, description="`rds_max_chunks` in `LMCACHE_EXTRA_CONFIG`: chunks each rank keeps on RDS (LRU)."
    )
    rds_chunk_overhead_mib: float = Field(
        2.0, gt=0, description="Chiplet-0 memory each stored chunk takes per NVMe drive, MiB (seed: 2 MiB)."
    )
    rds_drives: int | None = Field(
        None, ge=1, description="NVMe drives bound to RDS; defaults to `hardware.nvmeDrivesPerNode`."
    )
    staging_buffer_mib: float = Field(
        512.0, ge=0, description="RDS staging buffer in chiplet-0 memory, MiB (Unverified default)."
    )
    cpu_size_gib: float = Field(
        64.0, gt=0, description="`LMCACHE_MAX_LOCAL_CPU_SIZE` for the CPU tier, GiB; must fit the prefill memory limit."
    )
    enable_kv_events: bool = Field(True, description="`LMCACHE_ENABLE_KV_EVENTS`.")
    hash_algorithm: str = Field(
        "sha256_cbor_64bit", min_length=1, description="`LMCACHE_PRE_CACHING_HASH_ALGORITHM` (same for RDS and CPU)."
    )
    extra_config: dict[str, object] = Field(
        default_factory=dict, description="More keys merged into `LMCACHE_EXTRA_CONFIG`."
    )


class Router(Section):
    """The llm-d router (Endpoint Picker) and its InferencePool (reference design section 6)."""

    image: Image = Field(
        router_versions.EPP_IMAGE,
        min_length=1,
        description=(
            "EPP image; its tag chooses the generation the EndpointPickerConfig is written for and must be at least "
            "the first version of every plugin type and the apiVersion the render uses (core/versions/router.py)."
        ),
    )
    replicas: int = Field(1, ge=1, le=1, description="EPP replicas; 1 because in-flight accounting is per process.")
    config_api_version: Literal["llm-d.ai/v1alpha1", "inference.networking.x-k8s.io/v1alpha1"] | None = Field(
        None,
        description=(
            "apiVersion of the EndpointPickerConfig; null: the one the pinned EPP's generation reads "
            "(core/versions/router.py GENERATIONS)."
        ),
    )
    decider: Literal["prefix-based", "always-disagg"] = Field(
        "prefix-based",
        description="P/D decider: prefill only when enough tokens are not cached, or always (benchmarks).",
    )
    non_cached_tokens: int = Field(
        16,
        ge=0,
        description=(
            "prefix-based decider: prefill remotely when more tokens than this are not cached (0 disables P/D)."
        ),
    )
    block_size_tokens: int | None = Field(
        None,
        ge=1,
        description=(
            "`blockSizeTokens` of the plugin that keeps the prefix index (the pinned EPP's generation names it: "
            "core/versions/router.py), used as is when `autoTune` is false; null: the engines' KV block "
            "(`--block-size`, 4096), which keeps coding agents' sessions where they are cached (docs/performance.md)."
        ),
    )
    lru_capacity_per_server: int = Field(
        1024,
        ge=1,
        description=(
            "`lruCapacityPerServer` of the plugin that keeps the prefix index, in `blockSizeTokens` blocks (1024 of "
            "4096 tokens: about what a prefill rank keeps on its RDS tier)."
        ),
    )
    auto_tune: bool = Field(
        False,
        description=(
            "Let the router read block size and count from each pod's `vllm:cache_config_info` instead "
            "(vllm-rbln reports 4096-token blocks and its device's count only, not the RDS tier)."
        ),
    )
    prefix_cache: Literal["approximate", "precise", "none"] = Field(
        "approximate",
        description=(
            "Where the router looks for a prompt's cached prefix: `approximate`, the index the EPP keeps of its own "
            "picks (prefix-cache-scorer; AGG: prefix-cache-affinity-filter); `precise`, the index of what the engines "
            "announce they hold (their KV events; the EPP tokenizes each prompt through a tokenizer container of its "
            "own and hashes it in `blockSizeTokens` units); `none`, load alone (with `sessionAffinityWeight` 0), the "
            "baseline of a routing comparison (the P/D decider still reads the approximate index)."
        ),
    )
    kv_events_port: int = Field(
        5557,
        ge=1024,
        le=65000,
        description=(
            "`precise`: the port of rank 0's KV-event socket in every engine pod (rank r: this + r), where the EPP "
            "subscribes (upstream's default 5557)."
        ),
    )
    tokenizer_image: Image = Field(
        engine_versions.TOKENIZER_IMAGE,
        min_length=1,
        description=(
            "`precise`: the image of the EPP's tokenizer container (`vllm launch render`), vLLM at the release the "
            "engines build on, so a prompt becomes the same tokens in the router as in the engines."
        ),
    )
    tokenizer_port: int = Field(
        8000, ge=1024, le=65000, description="`precise`: the port of the tokenizer container inside the EPP pod."
    )
    prefix_scorer_weight: int = Field(2, ge=0, description="Weight of prefix-cache-scorer.")
    queue_scorer_weight: int = Field(1, ge=0, description="Weight of queue-scorer.")
    active_request_scorer_weight: int = Field(
        1,
        ge=0,
        description=(
            "P/D: weight of active-request-scorer in the decode profile, the EPP's own count of requests in flight "
            "per endpoint (queue-scorer sees only waiting requests, up to 50 ms late); kept below "
            "prefixScorerWeight, a cached prefix outweighs a busy rank."
        ),
    )
    prefill_active_request_scorer_weight: int = Field(
        0,
        ge=0,
        description=(
            "P/D: weight of active-request-scorer in the prefill profile; 0: none. From v0.9 the count of a prefill "
            "pick ends with the response's first bytes (its prefill leg), at v0.7 with the response's end, long after "
            "its prefill leg (docs/performance.md)."
        ),
    )
    prefill_token_load_scorer_weight: int = Field(
        1,
        ge=0,
        description=(
            "P/D: weight of token-load-scorer in the prefill profile (v0.9+); 0: none. It scores each prefill engine "
            "by the prompt tokens it has yet to compute: those of the requests the EPP sent it and has not seen "
            "answered, plus this request's uncached tail there, counted from the EPP's own picks (queue-scorer reads "
            "a queue up to a scrape old), so sessions that begin at once spread; upstream's prefill scorer for agentic "
            "P/D (docs/performance.md). Left out with prefixCache none: its uncached estimate reads the prefix index."
        ),
    )
    no_hit_lru_scorer_weight: int = Field(
        0,
        ge=0,
        description=(
            "Weight of no-hit-lru-scorer in each P/D profile; 0: none. A request no endpoint holds a prefix of (a new "
            "session) goes to the endpoint that took such a request least recently; sessions that arrive at once are "
            "scored before any of their picks is recorded and did not spread (docs/performance.md)."
        ),
    )
    session_affinity_weight: int = Field(
        2,
        ge=0,
        description=(
            "Weight of session-affinity-scorer in each profile (v0.10+): the endpoint that profile picked for a "
            "session's last turn scores 1, the session named by its agent's own header (`sessionHeaders`, then "
            "Claude Code's, OpenCode's and Codex's). Keeps a session whose context is shorter than a router block, "
            "which the prefix index cannot see, where it is cached (docs/performance.md); 0: no session affinity."
        ),
    )
    session_headers: list[HttpHeaderName] = Field(
        ["x-session-id"],
        description=(
            "Request headers that name a client's session, read in order before the agents' own "
            "(`x-claude-code-session-id`, `x-session-affinity`, `session-id`, `session_id`: the EPP's "
            "agent-identity); `x-session-id` is session affinity's own default header upstream."
        ),
    )
    peak_prefill_throughput: int = Field(
        2256,
        ge=1,
        description=(
            "AGG: prefix-cache-affinity-filter `peakPrefillThroughput`, tokens/s measured for this model (unused by a "
            "generation without that filter)."
        ),
    )
    grpc_port: int = Field(9002, ge=1024, le=65000, description="EPP ext-proc port (the pool's endpointPickerRef).")
    health_port: int = Field(9003, ge=1024, le=65000, description="EPP gRPC health port.")
    metrics_port: int = Field(9090, ge=1024, le=65000, description="EPP metrics port.")
    refresh_metrics_interval_ms: int = Field(
        50,
        ge=50,
        le=60_000,
        description=(
            "`--refresh-metrics-interval` of the EPP, in ms: how often it scrapes every endpoint's metrics (upstream's "
            "default 50; v0.10.0 clamps less to 50). Each scrape is a whole metrics page (25 KB from the simulator "
            "once it has served): endpoints x 1000/interval pages a second for the EPP to parse; the decode profile's "
            "in-flight count does not wait for it."
        ),
    )
    failure_mode: Literal["FailClose", "FailOpen"] = Field(
        "FailOpen",
        description=(
            "The pool's `failureMode`: what the gateway does with a request while the EPP cannot be reached (its "
            "restart, a rollout's last seconds). `FailOpen`: it sends the request to a ready pod of the pool itself, "
            "without cache-aware routing or P/D (llm-d's advice for v0.10); `FailClose`: it answers an error "
            "(500), so every request fails until the EPP serves again (docs/decisions.md)."
        ),
    )
    certificate: Literal["stack", "epp"] = Field(
        "stack",
        description=(
            "The EPP's ext_proc serving certificate. `stack`: made once by the first `pulumi up` (ECDSA P-256, "
            "self-signed, kept encrypted in the stack's state), mounted from the Secret `<name>-epp-tls` "
            "(`--cert-path`), so a restarted EPP listens at once. `epp`: the EPP makes a self-signed RSA-4096 one "
            "at every start (upstream's default), which a restart waits for: 1-20 s on a 2-core node "
            "(docs/performance.md)."
        ),
    )
    drain_seconds: int = Field(
        router_versions.EPP_DRAIN_TIMEOUT_DEFAULT_S,
        ge=0,
        description=(
            "`--drain-timeout` of the EPP, in s (upstream's default 30): on SIGTERM it goes NotServing and keeps "
            "serving ext_proc this long; its pod's grace period is this plus a margin (core/sizing.py). Unused by an "
            "EPP without the flag (core/versions/router.py: v0.7.x)."
        ),
    )
    plugin_parameters: dict[str, object] = Field(
        default_factory=dict,
        description=(
            'More parameters for the plugins the render declares, by plugin type (e.g. `{"token-load-scorer": '
            '{"queueThresholdTokens": 8192}}`), merged into that plugin\'s `parameters`; checked against the '
            "pinned EPP's own schema (an unknown or mistyped parameter is refused). Parameters the stack "
            "generates are set by their own fields."
        ),
    )

    @field_validator("plugin_parameters")
    @classmethod
    def _parameters_are_objects(cls, value: dict[str, object]) -> dict[str, object]:
        for plugin_type, params in value.items():
            if not isinstance(params, dict):
                raise ValueError(
                    f"the parameters of {plugin_type} must be an object (parameter name: value), not {params!r}"
                )
        return value


class Gateway(Section):
    class_name: Dns1123Subdomain = Field("istio", min_length=1, description="GatewayClass (`istio` or `agentgateway`).")
    port: Port = Field(80, description="Client port of the Gateway listener.")
    hostname: GatewayHostname | None = Field(None, description="Listener hostname; null accepts any.")


# A Hugging Face commit id: what `revision` must be to be pinned (a branch or tag can move).
COMMIT_SHA = r"^[0-9a-f]{40}$"
UNPINNED = "main"


class Weights(Section):
    """Where the engines' weights (the model and the EAGLE-3 draft) come from: a PVC someone loaded, or a
    download by the stack into a volume it owns, before the engines start (see docs/model-weights.md)."""

    source: Literal["pvc", "download"] = Field(
        "pvc",
        description=(
            "`pvc`: the existing PVC `weights.pvc`, loaded beforehand (nothing created); `download`: the stack "
            "creates that PVC and a Job fills it before the engines start."
        ),
    )
    pvc: Dns1123Subdomain = Field(
        "model-weights", description="PVC holding the Hugging Face cache (HF_HOME), mounted read-only by the engines."
    )
    revision: str = Field(
        UNPINNED,
        min_length=1,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        description=(
            "Revision of `model.name` on the Hub: a 40-hex commit id pins it; `main` follows the branch (refused for "
            "a prod download)."
        ),
    )
    draft_revision: str = Field(
        UNPINNED,
        min_length=1,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        description="Revision of the EAGLE-3 draft model (`engine.speculative.model`), pinned the same way.",
    )
    size: PositiveQuantity = Field(
        "600Gi",
        description=(
            "Size of the PVC the stack creates for a download (checked against the known model sizes with headroom)."
        ),
    )
    gated: bool = Field(
        False,
        description="The model or draft is a gated repository: the download needs the token Secret (`hfTokenSecret`).",
    )
    token_secret_exists: bool = Field(
        False,
        description=(
            "The Secret `hfTokenSecret` was created outside the stack (else a gated download needs `rebel100:hfToken`)."
        ),
    )
    downloader_image: Image = Field(
        "python:3.12.11-slim",
        min_length=1,
        description="Image of the download Job and of the engines' wait-for-weights init container (Python 3).",
    )
    huggingface_hub_version: str = Field(
        "0.34.4",
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="huggingface_hub the Job installs (into /tmp) when the image has none.",
    )
    retries: int = Field(
        6,
        ge=0,
        le=100,
        description="Job backoffLimit: pod restarts allowed; each retry resumes the partial files on the volume.",
    )
    timeout_minutes: int = Field(
        360,
        ge=10,
        description="How long `pulumi up` waits for the download Job to complete before it fails the update.",
    )


class Storage(Section):
    compile_cache_size: PositiveQuantity = Field(
        "200Gi", description="Size of each role's compile-cache PVC (VLLM_CACHE_ROOT)."
    )
    storage_class: Dns1123Subdomain | None = Field(
        None, description="StorageClass of the PVCs (ReadWriteMany); null uses the cluster default."
    )
    retain_on_delete: bool = Field(
        True,
        description=(
            "Keep the data volumes (weights, compile caches) in the cluster when `pulumi destroy` or a replacement "
            "deletes them from the stack."
        ),
    )


class Security(Section):
    """Least privilege and isolation (on by default; the exceptions the NPU runtime needs are explicit)."""

    network_policies: bool = Field(
        True, description="Render NetworkPolicies: default deny, then only the paths the serving flow uses."
    )
    monitoring_namespace: Dns1123Label = Field(
        "monitoring", min_length=1, description="Namespace whose Prometheus may scrape metrics ports."
    )
    gateway_pod_label: LabelKey = Field(
        "gateway.networking.k8s.io/gateway-name",
        min_length=1,
        description="Label the gateway implementation puts on its pods (value: the Gateway's name).",
    )
    engine_run_as_root: bool = Field(
        True,
        description=(
            "Exception: the RBLN runtime and NIXL/RDMA need root in the engine containers (recorded in an annotation)."
        ),
    )
    engine_capabilities: list[Capability] = Field(
        ["IPC_LOCK"],
        description=(
            "Exception: capabilities added to engines after dropping ALL (IPC_LOCK pins RDMA buffers); Linux "
            "capability names without `CAP_`."
        ),
    )


class Alerts(Section):
    """The stack's alerting rules (a PrometheusRule; core/alerts.py), each with a runbook in docs/operations.md."""

    enabled: bool = Field(
        True,
        description=(
            "Render the PrometheusRule `<name>-alerts` (with `podMonitors`: the alerts read what they scrape, and "
            "kube-state-metrics' pod readiness and restarts)."
        ),
    )
    runbook_url: str = Field(
        "docs/operations.md",
        min_length=1,
        description=(
            "Each alert's `runbook_url` is this + `#<alert name in lower case>`: set the URL at which your on-call "
            "reads this repository's docs/operations.md."
        ),
    )
    epp_unavailable_for: PrometheusDuration = Field(
        "1m", description="No EPP pod Ready (down, or no leader) this long: Rebel100EppUnavailable (critical)."
    )
    no_ready_decode_for: PrometheusDuration = Field(
        "1m", description="No decode pod Ready this long: Rebel100NoReadyDecode (critical)."
    )
    no_ready_prefill_for: PrometheusDuration = Field(
        "5m", description="No prefill pod Ready this long (P/D served decode-only): Rebel100NoReadyPrefill."
    )
    pd_decisions_stopped_for: PrometheusDuration = Field(
        "15m",
        description=(
            "The EPP deciding with no prefill-decode decision while prefill is Ready this long: "
            "Rebel100PdDecisionsStopped."
        ),
    )
    pd_decisions_min_rate: float = Field(
        0.05,
        gt=0,
        description=(
            "EPP decisions per second (over 2 m) below which Rebel100PdDecisionsStopped does not judge: too few "
            "requests to expect one through prefill."
        ),
    )
    engine_queue_per_pod: float | None = Field(
        None,
        gt=0,
        description=(
            "Waiting requests per pod above which a role at its maximum alerts (Rebel100EngineQueueAtMaximum); null: "
            "the role's engineQueue autoscaling target, else that signal's default (2)."
        ),
    )
    engine_queue_for: PrometheusDuration = Field(
        "10m", description="The queue above that with the role at its maximum this long: Rebel100EngineQueueAtMaximum."
    )
    kv_cache_usage: float = Field(
        0.95, gt=0, le=1, description="KV-cache usage (0-1) of an engine rank that alerts: Rebel100KvCacheNearFull."
    )
    kv_cache_usage_for: PrometheusDuration = Field(
        "15m", description="KV-cache usage above that this long: Rebel100KvCacheNearFull."
    )
    restarts: int = Field(
        2, ge=1, description="Restarts of one container within `restartsWindow` that alert: Rebel100PodRestarting."
    )
    restarts_window: PrometheusDuration = Field("30m", description="The window `restarts` are counted in.")
    scrape_down_for: PrometheusDuration = Field(
        "10m", description="A Ready pod's /metrics unanswered this long: Rebel100ScrapeTargetDown."
    )
    epp_error_ratio: float = Field(
        0.05,
        gt=0,
        lt=1,
        description=(
            "Share of the EPP's requests failing for the stack's reasons (not the client's) that alerts: "
            "Rebel100EppRequestErrors."
        ),
    )
    epp_error_ratio_for: PrometheusDuration = Field(
        "5m", description="The error share above that this long: Rebel100EppRequestErrors."
    )


class Observability(Section):
    pod_monitors: bool = Field(
        True, description="Render PodMonitors (monitoring.coreos.com/v1) for prefill, decode and the EPP."
    )
    grafana_dashboard: bool = Field(
        True, description="Render the P/D Grafana dashboard as a ConfigMap labelled grafana_dashboard=1."
    )
    scrape_interval: PrometheusDuration = Field(
        "30s", description="Prometheus scrape interval (a Prometheus duration: `30s`, `1m30s`, `1h`)."
    )
    prometheus_address: str | None = Field(
        None,
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description=(
            "Prometheus HTTP API the autoscalers' triggers query; null: the Prometheus Operator's "
            "`http://prometheus-operated.<security.monitoringNamespace>.svc:9090`."
        ),
    )
    alerts: Alerts = Field(Alerts(), description="The stack's alerts and their thresholds (docs/operations.md).")


class Placement(Section):
    groups: int = Field(
        1,
        ge=1,
        le=512,
        description="Node groups: each role is split into this many pools (Deployments), one per group.",
    )
    group_label: LabelKey = Field(
        "rebel100.ai/pool-group",
        min_length=1,
        description="Node label naming a node's group (values g0, g1, ...); used when groups > 1.",
    )
    spread_roles: bool = Field(
        True, description="At most one pod of a role per node, so one node failure takes at most one P and one D."
    )


class Rollout(Section):
    strategy: Literal["Recreate", "RollingUpdate"] = Field(
        "RollingUpdate",
        description=(
            "Engine Deployment strategy: RollingUpdate replaces one pod at a time (maxSurge 0: a new pod needs the "
            "NPUs the old one holds); Recreate stops every pod of a role at once, and every request fails until the "
            "new pods compile."
        ),
    )
    pre_stop_seconds: int = Field(
        15,
        ge=0,
        description=(
            "An engine pod marked for deletion keeps serving this long before SIGTERM (a preStop sleep), so the router "
            "stops picking it first; 0: no preStop."
        ),
    )
    drain_seconds: int = Field(
        90,
        ge=0,
        description=(
            "After SIGTERM an engine waits up to this long for its in-flight requests (`vllm serve "
            "--shutdown-timeout`): the longest request a stopping pod lets finish; 0: it aborts them at once."
        ),
    )
    termination_grace_period_seconds: int = Field(
        120,
        ge=0,
        description=(
            "terminationGracePeriodSeconds of the engine pods: SIGKILL this long after deletion, so at least "
            "preStopSeconds + drainSeconds."
        ),
    )
    pool_at_a_time: bool = Field(
        True,
        description=(
            "Update decode only after prefill finished rolling out (Pulumi dependency), never both pools at once."
        ),
    )
    max_unavailable: int = Field(1, ge=1, description="PodDisruptionBudget maxUnavailable of every role.")


class StackConfig(Section):
    """The whole `rebel100:` namespace of one stack."""

    name: str = Field(
        "minimax-m27", pattern=r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$", description="Prefix of every object name."
    )
    namespace: Dns1123Label = Field("rebel100", description="Kubernetes namespace (created by the stack).")
    environment: Literal["dev", "prod"] = Field(
        "prod", description="dev relaxes hygiene policies to advisory; prod makes them mandatory."
    )
    topology: Literal["pd", "agg"] = Field(
        "pd", description="`pd`: prefill/decode disaggregation; `agg`: aggregated engines, no prefill pods."
    )
    render_directory: str | None = Field(
        None, description="Render YAML to this folder instead of a cluster (no kubeconfig needed)."
    )
    kube_context: str | None = Field(None, description="kubeconfig context to deploy to; null uses the current one.")
    hf_token_secret: Dns1123Subdomain = Field(
        "hf-token",
        min_length=1,
        description=(
            "Secret holding the Hugging Face token under key `token`; created from `rebel100:hfToken` when that "
            "secret is set."
        ),
    )
    hardware: Hardware = Field(Hardware(), description="Hardware profile.")
    model: ModelSpec = Field(ModelSpec(), description="Served model.")
    engine: Engine = Field(Engine(), description="Serving arguments common to both roles.")
    prefill: Prefill = Field(Prefill(), description="Prefill role.")
    decode: Decode = Field(Decode(), description="Decode role (the aggregated engine in `agg`).")
    kv_tier: KvTier = Field(KvTier(), description="Tier-2 KV offload of prefill.")
    router: Router = Field(Router(), description="llm-d router (EPP).")
    gateway: Gateway = Field(Gateway(), description="Gateway API entry point.")
    weights: Weights = Field(Weights(), description="Model weights: a pre-loaded PVC or a download by the stack.")
    storage: Storage = Field(Storage(), description="Compile-cache volumes, StorageClass and retention.")
    security: Security = Field(Security(), description="NetworkPolicies, security contexts and their exceptions.")
    observability: Observability = Field(Observability(), description="PodMonitors and the Grafana dashboard.")
    placement: Placement = Field(Placement(), description="Node groups and anti-affinity.")
    rollout: Rollout = Field(Rollout(), description="Update strategy and disruption budgets.")

    @model_validator(mode="after")
    def _router_block_follows_the_engines(self) -> StackConfig:
        """`router.blockSizeTokens` null is the engines' KV block (the decode role's, which prefill's must equal),
        resolved here so that every reader (the render, the gates, the plan) sees the number."""
        if self.router.block_size_tokens is None:
            block = self.decode.block_size or self.engine.block_size
            object.__setattr__(self, "router", self.router.model_copy(update={"block_size_tokens": block}))
        return self

    def engine_roles(self) -> list[tuple[str, Role]]:
        """(config key, section) of the engine roles that run pods: prefill only in P/D."""
        roles: list[tuple[str, Role]] = []
        if self.topology == "pd" and self.prefill.replicas > 0:
            roles.append(("prefill", self.prefill))
        roles.append(("decode", self.decode))
        return roles


# Keys of the namespace that are not part of the schema above but are read by the program.
# Keys that moved: a stack file still using one is told where it went.
MOVED_KEYS = {
    "storage.modelPvc": "weights.pvc",
    "storage.modelPvcSize": "weights.size",
    "storage.createModelPvc": "weights.source (download creates the PVC; pvc uses an existing one)",
    "engine.lmcacheRblnVersion": "engine.image (the lmcache-rbln version is a fact of the image's vllm-rbln version, "
    "not a setting that can disagree with it)",
}
# Where the reader learns more about a moved key (by the section it was in).
MOVED_KEYS_DOCS = {"storage": "docs/model-weights.md", "engine": "docs/consumers-engine.md"}
SECRET_KEYS = keys.SECRET_KEYS
