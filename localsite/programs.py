"""What the local site runs for each container of a pod: the image mapped to a local program, the pod's rendered
arguments given to it (translated where the program is a simulator). Pure: a pod object in, a plan out.

The image (any registry, any tag) and the program:

- `vllm-rbln` (the engines): llm-d-inference-sim, the `vllm serve` args translated (SIM_FLAGS); an engine that
  publishes KV events (`--kv-events-config`) runs one simulator per DP rank, each publishing to the pod's KV-event
  relay (localsite/kvrelay.py), which binds the sockets the engine would;
- `vllm-openai-cpu` running `vllm launch render` (the EPP's tokenizer): llm-d-inference-sim, which serves the same
  render routes with the dummy tokenizer the simulated engines count tokens with;
- `llm-d-router-disagg-sidecar`, `llm-d-routing-sidecar`: the real P/D sidecar, the rendered args as they are;
- `llm-d-router-endpoint-picker`, `llm-d-inference-scheduler`: the real EPP, the rendered args; mounted ConfigMap
  paths point at a copy of the ConfigMap;
- anything else: none, the pod is not served (like an image that cannot be pulled).

Init containers that are not native sidecars are not run: the site's kwok has already reported them completed
(the weights check reads a volume the site does not have). NetworkPolicies are not enforced (no CNI).

A container the kubelet would give an API token (`api_account`: the pod's automounted one, or a projected
serviceAccountToken volume it mounts) runs with `KUBECONFIG` holding a token of the pod's ServiceAccount (the agent
asks the API for one), so the rendered Role is what it gets: the EPP, and the P/D sidecar, whose SSRF protection
lists the InferencePool's pods. Client-go reads `KUBECONFIG` before the in-cluster files the site cannot mount.
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass, field

from core import sizing
from core.cmdline import parse_flags
from core.podenv import container_env
from core.serving import SUB_BLOCK_CACHE_ENV, rds_tier_tokens
from core.versions import engine, image_name, router, vllm_args
from localsite import kvrelay

# `vllm serve` flags and what the simulator makes of them. A value: the simulator's flag of the same meaning.
SIM_FLAGS = {
    "--served-model-name": "--served-model-name",
    "--port": "--port",
    "--max-num-seqs": "--max-num-seqs",
    "--max-model-len": "--max-model-len",
    "--data-parallel-size": "--data-parallel-size",  # one process serving rank r on port + r, as external-LB DP does
}
# `vllm serve` flags with no meaning for a simulator, and why. A flag in neither table leaves the pod not served,
# so a new serving flag is a decision here, not a silent drop.
NOT_SIMULATED = {
    "--revision": "weights are not loaded",
    "--block-size": "the simulator's block is sim_block_size() of the engine's prefix-reuse unit",
    "--max-num-batched-tokens": "no scheduler budget is simulated (the sub-block size: sim_block_size())",
    "--kv-cache-dtype": "no KV cache memory is simulated",
    "--gpu-memory-utilization": "no device memory is simulated",
    "--pipeline-parallel-size": "one process stands for the pipeline's 4 NPUs",
    "--tensor-parallel-size": "one process stands for the tensor-parallel group",
    "--enable-expert-parallel": "no experts",
    "--data-parallel-size-local": "all ranks are local (one simulator process)",
    "--data-parallel-multi-port-external-lb": "the simulator serves each rank on its own port already",
    "--data-parallel-rpc-port": "no DP coordination between ranks",
    "--data-parallel-address": "no DP coordination between ranks",
    "--enable-prefix-caching": "the simulator's own prefix cache (--enable-kvcache), in blocks of sim_block_size()",
    "--enable-chunked-prefill": "no scheduler is simulated",
    "--enable-auto-tool-choice": "echo mode: no tool calls",
    "--tool-call-parser": "echo mode: no tool calls",
    "--reasoning-parser": "echo mode: no reasoning",
    "--speculative-config": "no speculative decoding",
    "--kv-transfer-config": "the simulator speaks the nixlv2 P/D protocol (kv_transfer_params) itself",
    "--kv-events-config": "kv_events(): one simulator per rank, publishing through the pod's relay",
    "--shutdown-timeout": (
        "the simulator drains its in-flight requests for a fixed 30 s on SIGTERM (llm-d-inference-sim v0.10.2 "
        "pkg/communication/communication.go)"
    ),
    "--compilation-config": "nothing is compiled",
    "--trust-remote-code": "no model code is loaded",
    "--dtype": "no weights",
    "--quantization": "no weights",
}
# The KV block sizes llm-d-inference-sim v0.10.2 takes (pkg/common/config.go validate), in tokens.
SIM_BLOCK_SIZES = (8, 16, 32, 64, 128)
VLLM_DEFAULT_BLOCK_SIZE = 16  # vLLM's block when the line passes no --block-size
SIM_DEFAULT_KV_BLOCKS = 1024  # the simulator's --kv-cache-size when none is passed (pkg/common/config.go)
# Always: answer with the prompt (tests compare it), no tokenizer download (a model hub is never contacted). The
# dummy tokenizer counts a word or a punctuation mark as one token.
SIM_FIXED = ("--mode", "echo", "--force-dummy-tokenizer")


class Unsupported(ValueError):
    """The site cannot run this container; the message says why (shown like an image-pull failure)."""


@dataclass(frozen=True)
class Binaries:
    """The local programs the images map to."""

    sim: str
    epp: str
    sidecar: str


@dataclass
class Program:
    """One process of a pod: what to run and what it needs written first."""

    container: str
    argv: list[str]
    env: dict[str, str]
    files: dict[str, str | bytes] = field(default_factory=dict)  # relative path under the pod's folder -> content
    service_account: str | None = None  # runs with this ServiceAccount's token (api_account)
    ports: tuple[int, ...] = ()  # where it serves once up (the site's readiness)


def flag_value(args: list[str], name: str) -> str | None:
    """The value of `name` in a Go program's command line (the sidecar's, the EPP's, the simulator's), else None."""
    value = parse_flags(args, go_style=True).get(name)
    return None if value is None else str(value)


def rank_ports(args: list[str], port_flag: str, default: int) -> tuple[int, ...]:
    """The ports a program serves on once up: its port and one more per data-parallel rank (the simulator and the
    sidecar both serve rank r on port + r)."""
    first = int(flag_value(args, port_flag) or default)
    return tuple(sizing.rank_ports(first, int(flag_value(args, "--data-parallel-size") or 1)))


def sim_block_size(reuse_unit: int) -> int:
    """The simulator's KV block for an engine that reuses prefixes in units of `reuse_unit` tokens (core.sizing
    prefix_reuse_unit): the largest block the simulator takes that divides the unit, so a prefix the engine would reuse
    is whole blocks in the simulator too (Rebel100's 512-token sub-blocks: 128). The simulator reports this block in
    `vllm:cache_config_info`, where the engine reports its `--block-size`."""
    fitting = [block for block in SIM_BLOCK_SIZES if reuse_unit % block == 0]
    if not fitting:
        raise Unsupported(
            f"the engine reuses prefixes in units of {reuse_unit} tokens, which no block size the simulator takes "
            f"({', '.join(map(str, SIM_BLOCK_SIZES))}) divides"
        )
    return max(fitting)


def _cache_args(parsed, env: dict[str, str]) -> list[str]:
    """The simulator's prefix cache for the engine's: on unless the line turns it off (vLLM's own default is on),
    in blocks of sim_block_size() of the reuse unit the engine's block, batch budget and sub-block switch make.
    Its size: sim_cache_blocks()."""
    if parsed.enable_prefix_caching is False:
        return []
    batched = int(parsed.max_num_batched_tokens or 0)
    unit = sizing.prefix_reuse_unit(
        int(parsed.block_size or VLLM_DEFAULT_BLOCK_SIZE), batched, env.get(SUB_BLOCK_CACHE_ENV) == "1" and batched > 0
    )
    block = sim_block_size(unit)
    size = [] if (blocks := sim_cache_blocks(block, env)) is None else ["--kv-cache-size", str(blocks)]
    return ["--enable-kvcache", "--block-size", str(block), *size]


def sim_cache_blocks(block: int, env: dict[str, str]) -> int | None:
    """The simulator's cache, in `block`-token blocks, for an engine of LMCache environment `env`: an engine with an
    RDS tier reuses what the tier holds (LMCache stores every chunk it computes there, so the tier, not the device,
    bounds what a rank finds again): rds_max_chunks x chunk size. None, any other engine: the simulator's default
    (SIM_DEFAULT_KV_BLOCKS), since the device's KV capacity is what the engine measures at start, which no render
    says."""
    tier = rds_tier_tokens(env)
    return None if tier is None else tier // block


def sim_args(command: list[str], args: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The simulator's flags for a rendered `vllm serve` command line and the container's `env` (its envFrom
    ConfigMaps' included: `engine_env`; SIM_FLAGS,
    NOT_SIMULATED, the prefix cache, SIM_FIXED), read with vLLM's own parser (core.versions.vllm_args): a line vLLM
    would refuse is refused here too, in its words."""
    argv = [*command, *args]
    if argv[:2] != ["vllm", "serve"]:
        raise Unsupported(f"the engine container runs {' '.join(argv[:2]) or '(nothing)'!r}, not 'vllm serve'")
    tokens = vllm_args.normalize(argv[2:])
    parser = vllm_args.parser()
    try:
        parsed, unknown = parser.parse_known_args(tokens)
    except vllm_args.Refused as refused:
        raise Unsupported(f"`vllm serve` would refuse the engine's arguments: {refused}") from None
    if unknown:
        raise Unsupported(
            f"`vllm serve` would refuse the engine's arguments: unrecognized arguments: {' '.join(unknown)}"
        )
    out = ["--model", parsed.model_tag]
    for token in tokens:
        if not token.startswith("--"):
            continue
        action = parser._option_string_actions[token.split("=", 1)[0]]
        name = next(o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-"))
        value = getattr(parsed, action.dest)
        if name in SIM_FLAGS:
            out += [SIM_FLAGS[name], ",".join(value) if isinstance(value, list) else str(value)]
        elif name not in NOT_SIMULATED:
            raise Unsupported(
                f"the vllm flag {name} has no meaning the site knows (localsite/programs.py SIM_FLAGS "
                "or NOT_SIMULATED must say what the simulator makes of it)"
            )
    return [*out, *_cache_args(parsed, env or {}), *SIM_FIXED]


@dataclass(frozen=True)
class KvEvents:
    """An engine's `--kv-events-config` as the site serves it: the rank-0 port the EPP dials, the model its topic
    names (`kv@<pod>@<model>`, which the simulator builds from its `--model`)."""

    port: int
    model: str


def kv_events(command: list[str], args: list[str]) -> KvEvents | None:
    """The KV events a rendered `vllm serve` line publishes (None: none), read with vLLM's parser."""
    parsed, _unknown = vllm_args.parser().parse_known_args(vllm_args.normalize([*command, *args][2:]))
    raw = getattr(parsed, "kv_events_config", None)
    if not raw:
        return None
    try:
        config = json.loads(raw)
        endpoint, topic = str(config["endpoint"]), str(config.get("topic", ""))
        port = int(endpoint.rsplit(":", 1)[1])
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise Unsupported(
            f"--kv-events-config {raw!r} is not a ZMQ endpoint and topic the site can serve: {err}"
        ) from None
    if not config.get("enable_kv_cache_events"):
        return None
    parts = topic.split("@")
    if len(parts) != 3 or parts[0] != "kv":
        raise Unsupported(f"--kv-events-config topic {topic!r} is not kv@<pod>@<model>, which the simulator publishes")
    return KvEvents(port, parts[2])


def engine_programs(
    name: str, sim: str, argv: list[str], events: KvEvents | None, env: dict[str, str], account: str | None
) -> list[Program]:
    """The simulator of an engine container: one for all its ranks, or, when it publishes KV events, the pod's
    relay and one simulator per rank (one process publishes every rank under one topic, where each vLLM rank binds a
    socket of its own), rank 0 under the container's name (its probes), rank r under `<name>-rank<r>`."""
    ranks = rank_ports(argv, "--port", 8000)
    if events is None:
        return [Program(name, [sim, *argv], env, service_account=account, ports=ranks)]
    address = env["POD_IP"]
    outer = [events.port + rank for rank in range(len(ranks))]
    relay = Program(
        f"{name}-kv-events",
        [sys.executable, "-m", "localsite.kvrelay", address, *(f"{o}:{o + kvrelay.INNER_OFFSET}" for o in outer)],
        env,
        ports=tuple(outer),
    )
    base = _without(argv, "--data-parallel-size")
    base = _with(base, "--model", events.model)
    programs = [relay]
    for rank, port in enumerate(ranks):
        rank_argv = _with(base, "--port", str(port))
        rank_argv += [
            "--data-parallel-rank",
            str(rank),
            "--zmq-endpoint",
            f"tcp://{address}:{outer[rank] + kvrelay.INNER_OFFSET}",
        ]
        label = name if rank == 0 else f"{name}-rank{rank}"
        programs.append(Program(label, [sim, *rank_argv], env, service_account=account, ports=(port,)))
    return programs


def _without(argv: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
            continue
        if token == flag:
            skip = True
            continue
        if token.startswith(flag + "="):
            continue
        out.append(token)
    return out


def _with(argv: list[str], flag: str, value: str) -> list[str]:
    return [*_without(argv, flag), flag, value]


def tokenizer_args(command: list[str], args: list[str]) -> list[str]:
    """The simulator's flags for the EPP's tokenizer (`vllm launch render MODEL ...`, the `vllm serve` parser's
    arguments): the model, its port and max-model-len, the dummy tokenizer the engines count with, no cache."""
    if [*command, *args][:3] != list(engine.TOKENIZER_COMMAND):
        raise Unsupported(f"the tokenizer container runs {' '.join(command)!r}, not 'vllm launch render'")
    parsed, _unknown = vllm_args.parser().parse_known_args(vllm_args.normalize([*command, *args][3:]))
    out = ["--model", parsed.model_tag, "--port", str(parsed.port or 8000)]
    if parsed.max_model_len:
        out += ["--max-model-len", str(parsed.max_model_len)]
    return [*out, *SIM_FIXED]


def literal_env(container: dict, pod: dict) -> dict[str, str]:
    """The container's env with plain values and the downward API fields a pod's programs read."""
    fields = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "status.podIP": pod["status"].get("podIP", ""),
        "spec.nodeName": pod["spec"].get("nodeName", ""),
    }
    env = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif (ref := (item.get("valueFrom") or {}).get("fieldRef")) and ref.get("fieldPath") in fields:
            env[item["name"]] = fields[ref["fieldPath"]]
    return env


def engine_env(container: dict, pod: dict, config_maps: dict[str, dict]) -> dict[str, str]:
    """What the engine reads of its environment: its envFrom ConfigMaps under its literal env (core.podenv), the
    downward API fields of literal_env included. A ConfigMap the namespace lacks adds nothing."""
    return {
        **container_env(container, lambda name: (config_maps.get(name) or {}).get("data")),
        **literal_env(container, pod),
    }


def _mounts_token(volume: dict) -> bool:
    return any("serviceAccountToken" in source for source in (volume.get("projected") or {}).get("sources") or [])


def api_account(pod: dict, container: dict) -> str | None:
    """The ServiceAccount whose token the kubelet would give this container, or None: every container gets the
    automounted one unless the pod (or, where the pod says nothing, its ServiceAccount, taken as the default: yes)
    turns it off; a container that mounts a projected serviceAccountToken volume gets it either way."""
    spec = pod["spec"]
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    if spec.get("automountServiceAccountToken", True) is not False:
        return account
    token_volumes = {v["name"] for v in spec.get("volumes") or [] if _mounts_token(v)}
    mounted = any(m.get("name") in token_volumes for m in container.get("volumeMounts") or [])
    return account if mounted else None


def served_containers(pod: dict) -> list[dict]:
    """Native sidecars (init containers that keep running) then the main containers: what runs while Ready."""
    spec = pod["spec"]
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    return [*sidecars, *spec.get("containers", [])]


def _mounted_config(
    pod: dict, container: dict, config_maps: dict[str, dict], secrets: dict[str, dict]
) -> tuple[dict[str, str | bytes], dict[str, str]]:
    """ConfigMap and Secret volumes of a container: files to write (relative path -> content) and mount path ->
    folder. A Secret's values are base64, as the API serves them; the files hold them decoded, as the kubelet
    writes them."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    files: dict[str, str | bytes] = {}
    mounts: dict[str, str] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"]) or {}
        if "configMap" in volume:
            kind, name, found = "ConfigMap", volume["configMap"]["name"], config_maps
        elif "secret" in volume:
            kind, name, found = "Secret", volume["secret"]["secretName"], secrets
        else:
            continue
        data = (found.get(name) or {}).get("data")
        if data is None:
            raise Unsupported(f"the {kind} {name} that {container['name']} mounts does not exist")
        folder = f"volumes/{mount['name']}"
        for key, content in data.items():
            files[f"{folder}/{key}"] = base64.b64decode(content) if kind == "Secret" else content
        mounts[mount["mountPath"].rstrip("/")] = folder
    return files, mounts


def plan(
    pod: dict, binaries: Binaries, config_maps: dict[str, dict], secrets: dict[str, dict] | None = None
) -> list[Program]:
    """The programs of a Running pod, in start order; Unsupported when one of its containers has none.
    `config_maps` and `secrets` are the namespace's, by name (what the EPP's volumes mount)."""
    meta = pod["metadata"]
    base_env = {"POD_NAME": meta["name"], "POD_NAMESPACE": meta["namespace"], "POD_IP": pod["status"]["podIP"]}
    programs = []
    for container in served_containers(pod):
        name, image = container["name"], container.get("image", "")
        repository = image_name(image)
        env = {**base_env, **literal_env(container, pod)}
        if engine.is_engine_image(image):
            command, args = container.get("command") or [], container.get("args") or []
            argv = sim_args(command, args, {**env, **engine_env(container, pod, config_maps)})
            account = api_account(pod, container)
            programs += engine_programs(name, binaries.sim, argv, kv_events(command, args), env, account)
        elif engine.is_tokenizer_image(image):
            argv = tokenizer_args(container.get("command") or [], container.get("args") or [])
            programs.append(Program(name, [binaries.sim, *argv], env, ports=rank_ports(argv, "--port", 8000)))
        elif repository in router.SIDECAR_IMAGE_NAMES:
            args = container.get("args") or []
            programs.append(
                Program(
                    name,
                    [binaries.sidecar, *args],
                    env,
                    service_account=api_account(pod, container),
                    ports=rank_ports(args, "--port", 8000),
                )
            )
        elif repository in router.EPP_IMAGE_NAMES:
            files, mounts = _mounted_config(pod, container, config_maps, secrets or {})
            args = [_local_path(arg, mounts) for arg in container.get("args") or []]
            programs.append(
                Program(
                    name,
                    [binaries.epp, *args],
                    env,
                    files,
                    api_account(pod, container),
                    (int(flag_value(args, "--grpc-port") or 9002),),
                )
            )
        else:
            raise Unsupported(
                f"container {name}: the site has no program for image {image!r} "
                "(localsite/programs.py maps vllm-rbln, the vLLM tokenizer, the llm-d EPP and the P/D sidecar)"
            )
    return programs


def _local_path(arg: str, mounts: dict[str, str]) -> str:
    """An argument naming a mounted volume or a file in it (`PATH` or `--flag=PATH`), pointed at the site's copy
    (`{pod}` is the pod's folder, filled in by the agent)."""
    flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    for mount_path, folder in mounts.items():
        if value == mount_path or value.startswith(mount_path + "/"):
            return flag + eq + "{pod}/" + folder + value[len(mount_path) :]
    return arg
