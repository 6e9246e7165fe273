"""core.serving: the LMCache environment per KV tier mode, and the engines' command lines written out by hand
from the reference design (section 4)."""

import json

import pytest

from core import serving
from core.config import KvTier, Speculative
from core.derive import derive, engine_commands
from core.gate import load_config
from core.serving import lmcache_env
from tests.conftest import stack_config


def test_rds_env():
    env = lmcache_env(KvTier())
    assert env["LMCACHE_CHUNK_SIZE"] == "4096"
    assert json.loads(env["LMCACHE_EXTRA_CONFIG"]) == {"rds_max_chunks": 1000}
    assert env["LMCACHE_ENABLE_KV_EVENTS"] == "True"
    assert env["LMCACHE_PRE_CACHING_HASH_ALGORITHM"] == "sha256_cbor_64bit"


def test_cpu_env_keeps_events_and_hash():
    env = lmcache_env(KvTier(mode="cpu", cpu_size_gib=32))
    assert env["LMCACHE_LOCAL_CPU"] == "True" and env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "32"
    assert "LMCACHE_EXTRA_CONFIG" not in env
    assert env["LMCACHE_PRE_CACHING_HASH_ALGORITHM"] == lmcache_env(KvTier())["LMCACHE_PRE_CACHING_HASH_ALGORITHM"]


def test_off_has_no_env():
    assert lmcache_env(KvTier(mode="off")) == {}


# --- the `vllm serve` command lines of the target configuration (reference design section 4) -----------

MODEL = "MiniMaxAI/MiniMax-M2.7"
SPECULATIVE = (
    '{"method":"eagle3","model":"asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k",'
    '"num_speculative_tokens":3,"revision":"d1"}'
)
NIXL = (
    '{"kv_connector":"RblnNixlConnector","kv_role":"kv_both","kv_buffer_device":"rbln",'
    '"kv_connector_extra_config":{"name":"nixl"}}'
)
# Section 4: common to both roles, in the order serve_args writes them.
COMMON_TAIL = [
    "--enable-prefix-caching",
    "--enable-chunked-prefill",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "minimax_m2",
    "--reasoning-parser",
    "minimax_m2",
]


def target(**overrides):
    return load_config(stack_config("prod-4p4d", **overrides))


def resolved(cfg, role):
    """The role's values as the derived facts resolve them (what the stack passes the commands)."""
    return derive(cfg).roles[role].serving


def test_prefill_command_of_the_target_configuration():
    cfg = target()
    prefill = resolved(cfg, "prefill")
    command = serving.prefill_command(
        cfg.model, cfg.engine, cfg.prefill, prefill, lmcache=True, drain_seconds=90, revision="r1", draft_revision="d1"
    )
    assert command.args == [
        MODEL,
        "--revision",
        "r1",
        "--served-model-name",
        MODEL,
        "--port",
        "8000",
        "--block-size",
        "4096",
        "--max-model-len",
        "204800",
        "--max-num-batched-tokens",
        "512",
        "--max-num-seqs",
        "4",
        "--kv-cache-dtype",
        "fp8",
        "--pipeline-parallel-size",
        "4",
        *COMMON_TAIL,
        "--gpu-memory-utilization",
        "0.8",
        "--speculative-config",
        SPECULATIVE,
        "--kv-transfer-config",
        '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":'
        '{"connectors":[' + NIXL + ',{"kv_connector":"RBLNLMCacheConnectorV1","kv_role":"kv_both"}]}}',
        "--shutdown-timeout",
        "90",
    ]
    assert command.env == {
        "RBLN_FORCE_CCL_ASYNC": "1",
        "VLLM_RBLN_USE_DEVICE_TENSOR": "1",
        "VLLM_RBLN_USE_VLLM_MODEL": "1",
        "VLLM_RBLN_AUTO_PORT": "1",
        "VLLM_RBLN_SUB_BLOCK_CACHE": "1",
        "VLLM_ENGINE_READY_TIMEOUT_S": "9600",
        "VLLM_RPC_TIMEOUT": "1800000",
        "VLLM_CACHE_ROOT": "/workspace/.cache",
        "HF_HOME": "/models",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NIXL_SIDE_CHANNEL_PORT": "5600",
        "RBLN_DEVICES": "0,1,2,3",
    }
    assert command.ports == [("http", 8000), ("nixl", 5600)]


def test_decode_command_of_the_target_configuration():
    cfg = target()
    decode = resolved(cfg, "decode")
    command = serving.decode_command(
        cfg.model, cfg.engine, cfg.decode, decode, nixl=True, drain_seconds=90, revision="r1", draft_revision="d1"
    )
    assert command.args == [
        MODEL,
        "--revision",
        "r1",
        "--served-model-name",
        MODEL,
        "--port",
        "8200",
        "--block-size",
        "4096",
        "--max-model-len",
        "204800",
        "--max-num-batched-tokens",
        "512",
        "--max-num-seqs",
        "1",
        "--kv-cache-dtype",
        "fp8",
        "--data-parallel-size",
        "4",
        "--data-parallel-size-local",
        "4",
        "--data-parallel-multi-port-external-lb",
        "--data-parallel-rpc-port",
        "5555",
        "--enable-expert-parallel",
        *COMMON_TAIL,
        "--speculative-config",
        SPECULATIVE,
        "--kv-transfer-config",
        NIXL,
        "--shutdown-timeout",
        "90",
    ]
    assert command.ports == [
        ("http-0", 8200),
        ("http-1", 8201),
        ("http-2", 8202),
        ("http-3", 8203),
        ("dp-rpc", 5555),
        ("nixl-0", 5600),
        ("nixl-1", 5601),
        ("nixl-2", 5602),
        ("nixl-3", 5603),
    ]
    assert "RBLN_DEVICES" not in command.env
    sidecar = serving.sidecar_args(cfg.decode, decode, pool_namespace="rebel100", pool_name="minimax-m27-pool")
    assert sidecar == [
        "--port",
        "8000",
        "--vllm-port",
        "8200",
        "--data-parallel-size",
        "4",
        "--kv-connector",
        "nixlv2",
        "--secure-proxy=false",
        "--enable-ssrf-protection=true",
        "--inference-pool",
        "rebel100/minimax-m27-pool",
    ]


def test_serve_args_defaults_and_optional_flags():
    cfg = target(
        model={"servedName": "m27"},
        decode={"tensorParallelSize": 2, "gpuMemoryUtilization": 0.85, "extraArgs": ["--enforce-eager"]},
        engine={
            "enablePrefixCaching": False,
            "enableChunkedPrefill": False,
            "toolCallParser": None,
            "reasoningParser": None,
            "speculative": None,
        },
        hardware={"nodes": 6},
    )
    args = serving.serve_args(
        cfg.model, cfg.engine, cfg.decode, resolved(cfg, "decode"), kv_transfer=None, role_args=["--x"], drain_seconds=0
    )
    assert args[:6] == [MODEL, "--revision", "main", "--served-model-name", "m27", "--port"]
    assert args[17:] == [
        "--tensor-parallel-size",
        "2",
        "--x",
        "--enable-expert-parallel",
        "--no-enable-prefix-caching",  # vLLM's default is on: turned off by name
        "--no-enable-chunked-prefill",
        "--gpu-memory-utilization",
        "0.85",
        "--enforce-eager",
    ]
    drained = serving.serve_args(
        cfg.model, cfg.engine, cfg.decode, resolved(cfg, "decode"), kv_transfer=None, role_args=[], drain_seconds=5
    )
    # The drain is the last generated flag: extraArgs come after it.
    assert drained[-3:] == ["--shutdown-timeout", "5", "--enforce-eager"]
    assert "--kv-transfer-config" not in args and "--speculative-config" not in args
    assert "--shutdown-timeout" not in args  # no drain: vLLM's own 0, nothing passed


@pytest.mark.parametrize(
    "nixl, lmcache, expected",
    [
        (False, False, None),
        (
            True,
            False,
            {
                "kv_connector": "RblnNixlConnector",
                "kv_role": "kv_both",
                "kv_buffer_device": "rbln",
                "kv_connector_extra_config": {"name": "nixl"},
            },
        ),
        (False, True, {"kv_connector": "RBLNLMCacheConnectorV1", "kv_role": "kv_both"}),
    ],
)
def test_kv_transfer_config_one_or_no_connector(nixl, lmcache, expected):
    assert serving.kv_transfer_config(nixl=nixl, lmcache=lmcache) == expected


def test_speculative_json_without_a_draft_model_has_no_revision():
    assert (
        serving.speculative_json(Speculative(method="suffix", model=None), "d1")
        == '{"method":"suffix","num_speculative_tokens":3}'
    )


def test_prefill_with_dp_gets_dp_args_without_rpc_port():
    cfg = target(prefill={"pipelineParallelSize": 1, "dataParallelSize": 2})
    args = serving.prefill_command(
        cfg.model, cfg.engine, cfg.prefill, resolved(cfg, "prefill"), lmcache=False, drain_seconds=0
    ).args
    assert args[args.index("--data-parallel-size") :][:5] == [
        "--data-parallel-size",
        "2",
        "--data-parallel-size-local",
        "2",
        "--data-parallel-multi-port-external-lb",
    ]
    assert "--data-parallel-rpc-port" not in args


def test_commands_default_to_the_main_revision():
    cfg = target()
    for command in (
        serving.prefill_command(
            cfg.model, cfg.engine, cfg.prefill, resolved(cfg, "prefill"), lmcache=False, drain_seconds=0
        ),
        serving.decode_command(cfg.model, cfg.engine, cfg.decode, resolved(cfg, "decode"), nixl=False, drain_seconds=0),
    ):
        assert command.args[1:3] == ["--revision", "main"]
        speculative = command.args[command.args.index("--speculative-config") + 1]
        assert json.loads(speculative)["revision"] == "main"
    args = serving.serve_args(
        cfg.model, cfg.engine, cfg.decode, resolved(cfg, "decode"), kv_transfer=None, role_args=[], drain_seconds=0
    )
    assert json.loads(args[args.index("--speculative-config") + 1])["revision"] == "main"


def test_pipeline_of_two_stages_is_passed():
    cfg = target(prefill={"pipelineParallelSize": 2})
    command = serving.prefill_command(
        cfg.model, cfg.engine, cfg.prefill, resolved(cfg, "prefill"), lmcache=True, drain_seconds=0
    )
    assert command.args[command.args.index("--pipeline-parallel-size") + 1] == "2"
    assert command.env["RBLN_DEVICES"] == "0,1"


def test_decode_with_one_rank_has_no_external_lb_nor_rpc_port():
    cfg = target(decode={"dataParallelSize": 1, "enableExpertParallel": False})
    assert serving.data_parallel_args(cfg.decode, dp_local=1, rpc_port=5555) == [
        "--data-parallel-size",
        "1",
        "--data-parallel-size-local",
        "1",
    ]
    command = serving.decode_command(
        cfg.model, cfg.engine, cfg.decode, resolved(cfg, "decode"), nixl=False, drain_seconds=0
    )
    assert command.ports == [("http-0", 8200), ("nixl-0", 5600)]
    assert "--kv-transfer-config" not in command.args  # agg-style decode: no connector


def test_decode_with_two_ranks_has_its_rpc_port():
    cfg = target(decode={"dataParallelSize": 2})
    command = serving.decode_command(
        cfg.model, cfg.engine, cfg.decode, resolved(cfg, "decode"), nixl=True, drain_seconds=0
    )
    assert command.ports == [("http-0", 8200), ("http-1", 8201), ("dp-rpc", 5555), ("nixl-0", 5600), ("nixl-1", 5601)]


def test_sub_block_cache_off_is_zero_in_the_env():
    cfg = target(engine={"subBlockCache": False}, router={"autoTune": True})
    assert serving.engine_env(cfg.engine)["VLLM_RBLN_SUB_BLOCK_CACHE"] == "0"
    assert serving.engine_env(target().engine)["VLLM_RBLN_SUB_BLOCK_CACHE"] == "1"


def test_lmcache_env_of_each_mode_in_full():
    assert lmcache_env(KvTier()) == {
        "LMCACHE_CHUNK_SIZE": "4096",
        "LMCACHE_ENABLE_KV_EVENTS": "True",
        "LMCACHE_PRE_CACHING_HASH_ALGORITHM": "sha256_cbor_64bit",
        "LMCACHE_LOCAL_CPU": "False",
        "LMCACHE_EXTRA_CONFIG": '{"rds_max_chunks":1000}',
    }
    assert lmcache_env(KvTier(mode="cpu", cpu_size_gib=32.5, enable_kv_events=False, extra_config={"x": 1})) == {
        "LMCACHE_CHUNK_SIZE": "4096",
        "LMCACHE_ENABLE_KV_EVENTS": "False",
        "LMCACHE_PRE_CACHING_HASH_ALGORITHM": "sha256_cbor_64bit",
        "LMCACHE_LOCAL_CPU": "True",
        "LMCACHE_MAX_LOCAL_CPU_SIZE": "32.5",
        "LMCACHE_EXTRA_CONFIG": '{"x":1}',
    }


def test_the_rds_tier_is_read_back_from_the_env_lmcache_env_writes():
    assert serving.rds_tier_tokens(lmcache_env(KvTier())) == 1000 * 4096  # reference design section 5: 4.096M
    assert serving.rds_tier_tokens(lmcache_env(KvTier(rds_max_chunks=7, chunk_size=256))) == 1792
    assert serving.rds_tier_tokens(lmcache_env(KvTier(mode="cpu"))) is None
    assert serving.rds_tier_tokens(lmcache_env(KvTier(mode="off"))) is None


@pytest.mark.parametrize(
    "change",
    [
        {"LMCACHE_EXTRA_CONFIG": "rds_max_chunks: 1000"},  # not JSON
        {"LMCACHE_EXTRA_CONFIG": "[1000]"},
        {"LMCACHE_EXTRA_CONFIG": '{"rds_max_chunks": true}'},
        {"LMCACHE_EXTRA_CONFIG": '{"rds_max_chunks": 0}'},
        {"LMCACHE_EXTRA_CONFIG": '{"other": 1}'},
        {"LMCACHE_CHUNK_SIZE": "4k"},
        {"LMCACHE_CHUNK_SIZE": "0"},
        {"LMCACHE_LOCAL_CPU": "True"},
    ],
)
def test_an_rds_tier_lmcache_would_not_read_is_no_tier(change):
    assert serving.rds_tier_tokens({**lmcache_env(KvTier()), **change}) is None


def test_a_precise_router_has_every_engine_publish_its_kv_events_under_the_served_name():
    """vLLM's --kv-events-config (vllm/config/kv_events.py): a ZMQ publisher bound on router.kvEventsPort, rank r on
    port + r (declared as container ports), topic kv@<pod IP>@<served name>, the name requests carry."""
    cfg = load_config(
        stack_config(
            "prod-4p4d", router={"prefixCache": "precise", "kvEventsPort": 6000}, model={"servedName": "coder"}
        )
    )
    commands = engine_commands(cfg, derive(cfg))
    for role, ranks in (("prefill", 1), ("decode", 4)):
        args = commands[role].args
        assert json.loads(args[args.index("--kv-events-config") + 1]) == {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": "tcp://*:6000",
            "topic": "kv@$(VLLM_NIXL_SIDE_CHANNEL_HOST)@coder",
        }
        named = [(n, p) for n, p in commands[role].ports if n.startswith("kv-events")]
        assert named == [(f"kv-events-{r}", 6000 + r) for r in range(ranks)], role
    approximate = load_config(stack_config("prod-4p4d"))
    for command in engine_commands(approximate, derive(approximate)).values():
        assert "--kv-events-config" not in command.args
        assert not [n for n, _ in command.ports if n.startswith("kv-events")]
