"""The `vllm serve` command line, environment and KV connector JSON of an engine container.

Both roles are built here from the same inputs, so the arguments the reference design lists as
common (section 4) cannot drift between prefill and decode. Plain values only (no Pulumi): the
components turn them into Kubernetes objects, the config gate checks overrides against them.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from core import sizing
from core.config import Decode, Engine, KvTier, ModelSpec, Prefill, Role, Speculative
from core.versions import image_version
from core.versions import router as router_versions

# vllm-rbln's NIXL connector class (the plain `NixlConnector` is the GPU one).
NIXL_CONNECTOR = {
    "kv_connector": "RblnNixlConnector",
    "kv_role": "kv_both",
    "kv_buffer_device": "rbln",
    "kv_connector_extra_config": {"name": "nixl"},
}
LMCACHE_CONNECTOR = {"kv_connector": "RBLNLMCacheConnectorV1", "kv_role": "kv_both"}


@dataclasses.dataclass(frozen=True)
class RoleServing:
    """The serving values a role may override, resolved against the common engine section: by core.derive, the one
    place a role's settings are resolved."""

    block_size: int
    kv_cache_dtype: str
    speculative: Speculative | None
    data_parallel_local: int
    devices: int
    rank_ports: list[int]
    side_channel_ports: list[int]


def compact_json(value: object) -> str:
    """JSON as vLLM's CLI takes it: no spaces, keys in a stable order."""
    return json.dumps(value, separators=(",", ":"))


def speculative_json(speculative: Speculative, draft_revision: str) -> str:
    """The speculative config; a draft model is loaded at the revision the weights volume holds."""
    value = speculative.model_dump(exclude_none=True)
    if speculative.model:
        value["revision"] = draft_revision
    return compact_json(value)


def kv_transfer_config(*, nixl: bool, lmcache: bool) -> dict[str, Any] | None:
    """NIXL alone, LMCache alone, or both through MultiConnector (the upstream shape)."""
    connectors = ([NIXL_CONNECTOR] if nixl else []) + ([LMCACHE_CONNECTOR] if lmcache else [])
    if not connectors:
        return None
    if len(connectors) == 1:
        return dict(connectors[0])
    return {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": connectors},
    }


def connector_classes(config: object) -> list[str]:
    """Connector class names of a `--kv-transfer-config` value, MultiConnector's members included (outermost first)."""
    names: list[str] = []

    def walk(entry: object) -> None:
        if not isinstance(entry, dict):
            return
        name = entry.get("kv_connector")
        if name:
            names.append(str(name))
        for member in (entry.get("kv_connector_extra_config") or {}).get("connectors") or []:
            walk(member)

    walk(config)
    return names


def kv_transfer_in(args: list[str]) -> object:
    """The `--kv-transfer-config` JSON of an argv this module generated (None without one)."""
    for flag, value in itertools.pairwise(args):
        if flag == "--kv-transfer-config":
            return json.loads(value)
    return None


def serve_args(
    model: ModelSpec,
    engine: Engine,
    role: Role,
    serving: RoleServing,
    *,
    kv_transfer: dict[str, Any] | None,
    role_args: list[str],
    drain_seconds: int,
    kv_events: KvEvents | None = None,
    revision: str = "main",
    draft_revision: str = "main",
) -> list[str]:
    """Arguments of `vllm serve`: the model at its revision, the common arguments, then the role's own (`serving`:
    the role's values as the derived facts resolve them).
    `drain_seconds` (rollout.drainSeconds): how long the engine waits for its in-flight requests after SIGTERM
    (`--shutdown-timeout`; vLLM's default 0 aborts them, so 0 passes nothing)."""
    args = [
        model.name,
        "--revision",
        revision,
        "--served-model-name",
        model.served_name or model.name,
        "--port",
        str(role.port),
        "--block-size",
        str(serving.block_size),
        "--max-model-len",
        str(engine.max_model_len),
        "--max-num-batched-tokens",
        str(engine.max_num_batched_tokens),
        "--max-num-seqs",
        str(role.max_num_seqs),
        "--kv-cache-dtype",
        serving.kv_cache_dtype,
    ]
    if role.tensor_parallel_size > 1:
        args += ["--tensor-parallel-size", str(role.tensor_parallel_size)]
    if role.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(role.pipeline_parallel_size)]
    args += role_args
    if role.enable_expert_parallel:
        args.append("--enable-expert-parallel")
    # Said either way: vLLM turns both on when the line does not mention them.
    args.append("--enable-prefix-caching" if engine.enable_prefix_caching else "--no-enable-prefix-caching")
    args.append("--enable-chunked-prefill" if engine.enable_chunked_prefill else "--no-enable-chunked-prefill")
    if engine.tool_call_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", engine.tool_call_parser]
    if engine.reasoning_parser:
        args += ["--reasoning-parser", engine.reasoning_parser]
    if role.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", f"{role.gpu_memory_utilization:g}"]
    if serving.speculative is not None:
        args += ["--speculative-config", speculative_json(serving.speculative, draft_revision)]
    if kv_transfer is not None:
        args += ["--kv-transfer-config", compact_json(kv_transfer)]
    if kv_events is not None:
        args += ["--kv-events-config", compact_json(kv_events.config())]
    if drain_seconds > 0:
        args += ["--shutdown-timeout", str(drain_seconds)]
    return args + list(role.extra_args)


# vllm-rbln's switch for prefix reuse in sub-blocks of max-num-batched-tokens ("1": on).
SUB_BLOCK_CACHE_ENV = "VLLM_RBLN_SUB_BLOCK_CACHE"

# Every flag the program generates, and the config field that sets it: an `extraArgs` entry may not
# redefine one, or the gate would have checked a value the engine never sees.
FLAG_FIELDS = {
    "--revision": "weights.revision",
    "--served-model-name": "model.servedName",
    "--port": "{role}.port",
    "--block-size": "engine.blockSize (or {role}.blockSize)",
    "--max-model-len": "engine.maxModelLen",
    "--max-num-batched-tokens": "engine.maxNumBatchedTokens",
    "--max-num-seqs": "{role}.maxNumSeqs",
    "--kv-cache-dtype": "engine.kvCacheDtype (or {role}.kvCacheDtype)",
    "--tensor-parallel-size": "{role}.tensorParallelSize",
    "--pipeline-parallel-size": "{role}.pipelineParallelSize",
    "--data-parallel-size": "{role}.dataParallelSize",
    "--data-parallel-size-local": "{role}.dataParallelSizeLocal",
    "--data-parallel-rpc-port": "decode.dataParallelRpcPort",
    "--data-parallel-multi-port-external-lb": "{role}.dataParallelSize",
    "--enable-expert-parallel": "{role}.enableExpertParallel",
    "--enable-prefix-caching": "engine.enablePrefixCaching",
    "--no-enable-prefix-caching": "engine.enablePrefixCaching",
    "--enable-chunked-prefill": "engine.enableChunkedPrefill",
    "--no-enable-chunked-prefill": "engine.enableChunkedPrefill",
    "--enable-auto-tool-choice": "engine.toolCallParser",
    "--tool-call-parser": "engine.toolCallParser",
    "--reasoning-parser": "engine.reasoningParser",
    "--gpu-memory-utilization": "{role}.gpuMemoryUtilization",
    "--speculative-config": "engine.speculative (or {role}.speculative)",
    "--kv-transfer-config": "kvTier (the connectors follow the topology and kvTier.mode)",
    "--kv-events-config": "router.prefixCache (precise) and router.kvEventsPort",
    "--shutdown-timeout": "rollout.drainSeconds",
}
# vLLM's short aliases of generated flags.
FLAG_ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-ep": "--enable-expert-parallel",
}


def data_parallel_args(role: Role, *, dp_local: int, rpc_port: int | None) -> list[str]:
    """Data-parallel arguments: one external-LB port per rank (decode), the RPC port when given."""
    args = [
        "--data-parallel-size",
        str(role.data_parallel_size),
        "--data-parallel-size-local",
        str(dp_local),
    ]
    if role.data_parallel_size > 1:
        args.append("--data-parallel-multi-port-external-lb")
        if rpc_port is not None:
            args += ["--data-parallel-rpc-port", str(rpc_port)]
    return args


# Every env name the program generates, and the config field that sets it (None: fixed by design).
ENV_FIELDS = {
    "RBLN_FORCE_CCL_ASYNC": None,
    "VLLM_RBLN_USE_DEVICE_TENSOR": None,
    "VLLM_RBLN_USE_VLLM_MODEL": None,
    "VLLM_RBLN_AUTO_PORT": None,
    SUB_BLOCK_CACHE_ENV: "engine.subBlockCache",
    "VLLM_ENGINE_READY_TIMEOUT_S": "engine.engineReadyTimeoutS",
    "VLLM_RPC_TIMEOUT": "engine.rpcTimeoutMs",
    "VLLM_CACHE_ROOT": None,
    "HF_HOME": None,
    "HF_HUB_OFFLINE": None,
    "VLLM_NIXL_SIDE_CHANNEL_PORT": "engine.nixlSideChannelPort",
    "VLLM_NIXL_SIDE_CHANNEL_HOST": None,
    "HF_TOKEN": "the secret rebel100:hfToken (or hfTokenSecret)",
    "RBLN_DEVICES": "{role}.tensorParallelSize / pipelineParallelSize",
    "LMCACHE_CHUNK_SIZE": "kvTier.chunkSize",
    "LMCACHE_ENABLE_KV_EVENTS": "kvTier.enableKvEvents",
    "LMCACHE_PRE_CACHING_HASH_ALGORITHM": "kvTier.hashAlgorithm",
    "LMCACHE_LOCAL_CPU": "kvTier.mode",
    "LMCACHE_MAX_LOCAL_CPU_SIZE": "kvTier.cpuSizeGib",
    "LMCACHE_EXTRA_CONFIG": "kvTier.extraConfig",
}
# `LMCACHE_EXTRA_CONFIG` keys the program sets from a checked field.
EXTRA_CONFIG_FIELDS = {"rds_max_chunks": "kvTier.rdsMaxChunks"}

HF_HOME = "/models"
COMPILE_CACHE_ROOT = "/workspace/.cache"
# Env names the components fill from references (pod IP, Secret), never from a literal value.
POD_IP_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"  # the pod's IP (status.podIP), which NIXL advertises
REFERENCE_ENV = (POD_IP_ENV, "HF_TOKEN")


def engine_env(engine: Engine) -> dict[str, str]:
    """Literal environment of every engine container (llm-d RBLN overlay)."""
    return {
        "RBLN_FORCE_CCL_ASYNC": "1",
        "VLLM_RBLN_USE_DEVICE_TENSOR": "1",  # kv_buffer_device rbln needs it
        "VLLM_RBLN_USE_VLLM_MODEL": "1",
        "VLLM_RBLN_AUTO_PORT": "1",
        SUB_BLOCK_CACHE_ENV: "1" if engine.sub_block_cache else "0",
        "VLLM_ENGINE_READY_TIMEOUT_S": str(engine.engine_ready_timeout_s),
        "VLLM_RPC_TIMEOUT": str(engine.rpc_timeout_ms),
        "VLLM_CACHE_ROOT": COMPILE_CACHE_ROOT,
        "HF_HOME": HF_HOME,
        "HF_HUB_OFFLINE": "1",  # the weights come from the volume; nothing is fetched at start
        "VLLM_NIXL_SIDE_CHANNEL_PORT": str(engine.nixl_side_channel_port),
    }


# The LMCache variables a reader of the render looks into (the pack's budget rules, the site's simulated tier).
LMCACHE_CHUNK_SIZE_ENV = "LMCACHE_CHUNK_SIZE"
LMCACHE_EXTRA_CONFIG_ENV = "LMCACHE_EXTRA_CONFIG"
LMCACHE_LOCAL_CPU_ENV = "LMCACHE_LOCAL_CPU"


def lmcache_env(tier: KvTier) -> dict[str, str]:
    """LMCache environment of prefill (the chart's modelserver.extraServeEnv.prefill); empty when off."""
    if tier.mode == "off":
        return {}
    env = {
        LMCACHE_CHUNK_SIZE_ENV: str(tier.chunk_size),
        "LMCACHE_ENABLE_KV_EVENTS": "True" if tier.enable_kv_events else "False",
        "LMCACHE_PRE_CACHING_HASH_ALGORITHM": tier.hash_algorithm,
    }
    extra = dict(tier.extra_config)
    if tier.mode == "rds":
        env[LMCACHE_LOCAL_CPU_ENV] = "False"
        extra = {"rds_max_chunks": tier.rds_max_chunks, **extra}
    else:
        env[LMCACHE_LOCAL_CPU_ENV] = "True"
        env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = f"{tier.cpu_size_gib:g}"
    if extra:
        env[LMCACHE_EXTRA_CONFIG_ENV] = compact_json(extra)
    return env


def lmcache_extra_config(text: str) -> tuple[dict[str, Any], str | None]:
    """`LMCACHE_EXTRA_CONFIG` as lmcache 0.5.6 reads it (`json.loads`, lmcache/v1/config.py; empty is none): (its
    object, None), or ({}, why LMCache would not use it). LMCache logs a value it cannot parse and runs without extra
    config, so YAML such as `{rds_max_chunks: 1000}` is dropped, not read."""
    if not text:
        return {}, None
    try:
        value = json.loads(text)
    except ValueError:
        return {}, (
            f"{LMCACHE_EXTRA_CONFIG_ENV} {text!r} is not JSON, so LMCache drops it (it logs a warning and runs without "
            f'its extra config). Write it as a JSON object, e.g. {{"rds_max_chunks": 1000}}.'
        )
    if not isinstance(value, dict):
        return {}, (
            f"{LMCACHE_EXTRA_CONFIG_ENV} {text!r} is not a JSON object, so LMCache finds no key in it. Write it as a "
            f'JSON object, e.g. {{"rds_max_chunks": 1000}}.'
        )
    return value, None


def rds_max_chunks(extra: dict[str, Any]) -> tuple[int | None, str | None]:
    """`rds_max_chunks` of LMCACHE_EXTRA_CONFIG's object: (chunks, None); (None, None) when it sets none; (None, why)
    when it is no positive integer."""
    if "rds_max_chunks" not in extra:
        return None, None
    value = extra["rds_max_chunks"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return (
            None,
            f"{LMCACHE_EXTRA_CONFIG_ENV} rds_max_chunks {value!r} is not a positive integer. Set a chunk count such "
            "as 1000.",
        )
    return value, None


def rds_tier_tokens(env: dict[str, str]) -> int | None:
    """Tokens one engine rank keeps on its RDS tier, read back from the LMCache environment `lmcache_env` writes
    (`rds_max_chunks` x `LMCACHE_CHUNK_SIZE`, core.sizing); None when that environment sets no RDS tier or says it
    in a form LMCache would not read (the pack's rules say why)."""
    chunk_size = env.get(LMCACHE_CHUNK_SIZE_ENV, "")
    if env.get(LMCACHE_LOCAL_CPU_ENV) != "False" or not chunk_size.isdigit() or int(chunk_size) < 1:
        return None
    extra, _ = lmcache_extra_config(env.get(LMCACHE_EXTRA_CONFIG_ENV, ""))
    chunks, _ = rds_max_chunks(extra)
    return None if chunks is None else sizing.rds_tokens_per_rank(chunks, int(chunk_size))


@dataclasses.dataclass(frozen=True)
class EngineCommand:
    """What one role's `vllm serve` container runs: its arguments, literal environment and named ports."""

    args: list[str]
    env: dict[str, str]
    ports: list[tuple[str, int]]


def prefill_command(
    model: ModelSpec,
    engine: Engine,
    role: Prefill,
    serving: RoleServing,
    *,
    lmcache: bool,
    drain_seconds: int,
    kv_events: KvEvents | None = None,
    revision: str = "main",
    draft_revision: str = "main",
) -> EngineCommand:
    """Prefill: NIXL (and LMCache with a KV tier); one HTTP port and one NIXL side channel."""
    # DP is rare on prefill (PP4/DP1 is the reference) but, when configured, reaches the engine.
    dp_args = (
        data_parallel_args(role, dp_local=serving.data_parallel_local, rpc_port=None)
        if role.data_parallel_size > 1
        else []
    )
    args = serve_args(
        model,
        engine,
        role,
        serving,
        kv_transfer=kv_transfer_config(nixl=True, lmcache=lmcache),
        role_args=dp_args,
        drain_seconds=drain_seconds,
        kv_events=kv_events,
        revision=revision,
        draft_revision=draft_revision,
    )
    # The pipeline spans every NPU the pod claims.
    env = {**engine_env(engine), "RBLN_DEVICES": ",".join(str(i) for i in range(serving.devices)), **role.extra_env}
    ports = [("http", role.port), ("nixl", serving.side_channel_ports[0])]
    if kv_events is not None:
        ports += kv_events.ports(len(serving.rank_ports))
    return EngineCommand(args=args, env=env, ports=ports)


def decode_command(
    model: ModelSpec,
    engine: Engine,
    role: Decode,
    serving: RoleServing,
    *,
    nixl: bool,
    drain_seconds: int,
    kv_events: KvEvents | None = None,
    revision: str = "main",
    draft_revision: str = "main",
) -> EngineCommand:
    """Decode: the DP ranks' HTTP ports, the DP RPC port, one NIXL side channel per rank; NIXL only in P/D."""
    args = serve_args(
        model,
        engine,
        role,
        serving,
        kv_transfer=kv_transfer_config(nixl=nixl, lmcache=False),
        role_args=data_parallel_args(role, dp_local=serving.data_parallel_local, rpc_port=role.data_parallel_rpc_port),
        drain_seconds=drain_seconds,
        kv_events=kv_events,
        revision=revision,
        draft_revision=draft_revision,
    )
    ports = [(f"http-{i}", p) for i, p in enumerate(serving.rank_ports)]
    if role.data_parallel_size > 1:
        ports.append(("dp-rpc", role.data_parallel_rpc_port))
    ports += [(f"nixl-{i}", p) for i, p in enumerate(serving.side_channel_ports)]
    if kv_events is not None:
        ports += kv_events.ports(len(serving.rank_ports))
    return EngineCommand(args=args, env={**engine_env(engine), **role.extra_env}, ports=ports)


def tokenizer_command(model: ModelSpec, engine: Engine, port: int, *, revision: str = "main") -> EngineCommand:
    """The EPP's tokenizer container (router.prefixCache precise): `vllm launch render` of the served model at the
    revision the weights volume holds, offline from that volume as the engines read it, refusing the prompts they
    refuse (`--max-model-len`)."""
    args = [model.name, "--revision", revision, "--max-model-len", str(engine.max_model_len), "--port", str(port)]
    env = {"HF_HOME": HF_HOME, "HF_HUB_OFFLINE": "1", "HOME": "/tmp", "VLLM_CACHE_ROOT": "/tmp/vllm"}
    return EngineCommand(args=args, env=env, ports=[("tokenizer", port)])


@dataclasses.dataclass(frozen=True)
class KvEvents:
    """Where an engine publishes its KV events (router.prefixCache precise): a ZMQ publisher bound on `port` (rank r
    of a DP engine on port + r: vllm/distributed/kv_events.py offset_endpoint_port), under `topic`."""

    port: int
    topic: str

    def config(self) -> dict[str, Any]:
        """vLLM's `--kv-events-config`."""
        return {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": f"tcp://*:{self.port}",
            "topic": self.topic,
        }

    def ports(self, ranks: int) -> list[tuple[str, int]]:
        """The named container ports of an engine of `ranks` DP ranks."""
        return [(f"kv-events-{rank}", self.port + rank) for rank in range(ranks)]


def sidecar_args(role: Decode, serving: RoleServing, *, pool_namespace: str, pool_name: str) -> list[str]:
    """Arguments of the routing sidecar: its first port, rank 0's port, one proxy port per DP rank of the pod
    (`serving`: decode's resolved values); the
    engine-port flag is the one the pinned sidecar's generation reads (core/versions/router.py GENERATIONS).

    SSRF protection, wherever the pinned sidecar can run it (router_versions.sidecar_can_protect): the EPP only ever
    sets x-prefiller-host-port, so on a decode-only decision a client's own header reaches the sidecar unchanged, and
    an unprotected sidecar POSTs the prompt to whatever host:port it names. A protected one calls only hosts of the
    pods of the InferencePool `pool_namespace/pool_name` (it lists and watches them through the API:
    objects.decode_pool gives it a ServiceAccount) and refuses others (403)."""
    version = image_version(role.sidecar.image)
    generation = router_versions.generation_for_pin(version)
    args = [
        "--port",
        str(role.sidecar.port),
        generation.engine_port_flag,
        str(role.port),
        "--data-parallel-size",
        str(serving.data_parallel_local),
        "--kv-connector",
        role.sidecar.kv_connector,
        "--secure-proxy=false",
    ]
    if router_versions.sidecar_can_protect(version):
        args += [
            f"{router_versions.SSRF_PROTECTION_FLAG}=true",
            router_versions.SSRF_POOL_FLAG,
            f"{pool_namespace}/{pool_name}",
        ]
    return args
