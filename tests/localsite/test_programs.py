"""What the local site runs for a pod: the image mapping and the `vllm serve` -> simulator translation, against
command lines written out by hand (the prod-4p4d render's, as tests/golden has them)."""

from __future__ import annotations

import copy
import re

import pytest

from localsite import programs

BIN = programs.Binaries(sim="/b/sim", epp="/b/epp", sidecar="/b/sidecar")

DECODE_ARGS = [
    "MiniMaxAI/MiniMax-M2.7",
    "--revision",
    "main",
    "--served-model-name",
    "MiniMaxAI/MiniMax-M2.7",
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
    "--enable-prefix-caching",
    "--enable-chunked-prefill",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "minimax_m2",
    "--reasoning-parser",
    "minimax_m2",
    "--speculative-config",
    '{"method":"eagle3"}',
    "--kv-transfer-config",
    '{"kv_connector":"RblnNixlConnector"}',
    "--shutdown-timeout",
    "90",
]


def pod(containers: list[dict], init: list[dict] = (), volumes: list[dict] = ()) -> dict:
    return {
        "metadata": {"name": "p-1", "namespace": "rebel100", "uid": "u"},
        "spec": {
            "containers": containers,
            "initContainers": list(init),
            "volumes": list(volumes),
            "nodeName": "rebel100-node-0",
            "serviceAccountName": "minimax-m27-epp",
        },
        "status": {"podIP": "127.1.0.7", "phase": "Running"},
    }


ENGINE = {
    "name": "vllm",
    "image": "rebellions/vllm-rbln:0.12.0",
    "command": ["vllm", "serve"],
    "args": DECODE_ARGS,
    "env": [
        {"name": "A", "value": "1"},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "S", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
    ],
}
SIDECAR = {
    "name": "routing-proxy",
    "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1",
    "restartPolicy": "Always",
    "args": ["--port", "8000", "--vllm-port", "8200", "--data-parallel-size", "4"],
}
WAIT = {"name": "wait-for-weights", "image": "python:3.12.11-slim", "command": ["sh", "-c", "true"]}


def test_the_decode_engine_becomes_a_simulator_with_its_serving_shape():
    [program] = programs.plan(pod([ENGINE]), BIN, {})
    assert program.argv == [
        "/b/sim",
        "--model",
        "MiniMaxAI/MiniMax-M2.7",
        "--served-model-name",
        "MiniMaxAI/MiniMax-M2.7",
        "--port",
        "8200",
        "--max-model-len",
        "204800",
        "--max-num-seqs",
        "1",
        "--data-parallel-size",
        "4",
        "--enable-kvcache",  # --enable-prefix-caching
        "--block-size",
        "128",  # the largest the simulator takes that divides the engine's 4096-token block
        "--mode",
        "echo",
        "--force-dummy-tokenizer",
    ]
    assert program.ports == (8200, 8201, 8202, 8203)  # what the site waits for before calling the pod up
    assert program.env == {
        "POD_NAME": "p-1",
        "POD_NAMESPACE": "rebel100",
        "POD_IP": "127.1.0.7",
        "A": "1",
        "IP": "127.1.0.7",
    }  # a secret is not handed to a simulator


KV_EVENTS = '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","topic":"kv@$(IP)@coder"}'


def test_an_engine_that_publishes_kv_events_is_a_relay_and_a_simulator_per_rank():
    """vLLM binds one publisher per DP rank (5557 + r) under the rendered topic; the simulator dials out and publishes
    every rank of one process under one topic. So: the pod's relay binds 5557-5560 (the EPP's side) and 15557-15560
    (the simulators' side), and each rank is a simulator of its own on its port, publishing to its relay socket under
    kv@<POD_IP>@<the topic's model>."""
    engine = {**ENGINE, "args": [*DECODE_ARGS, "--kv-events-config", KV_EVENTS]}
    relay, *ranks = programs.plan(pod([engine]), BIN, {})
    assert relay.container == "vllm-kv-events"
    assert relay.argv[1:] == [
        "-m",
        "localsite.kvrelay",
        "127.1.0.7",
        "5557:15557",
        "5558:15558",
        "5559:15559",
        "5560:15560",
    ]
    assert relay.ports == (5557, 5558, 5559, 5560)
    assert [r.container for r in ranks] == ["vllm", "vllm-rank1", "vllm-rank2", "vllm-rank3"]
    for rank, program in enumerate(ranks):
        argv = program.argv
        assert argv[0] == "/b/sim"
        assert "--data-parallel-size" not in argv
        assert argv[argv.index("--port") + 1] == str(8200 + rank)
        assert argv[argv.index("--data-parallel-rank") + 1] == str(rank)
        assert argv[argv.index("--zmq-endpoint") + 1] == f"tcp://127.1.0.7:{15557 + rank}"
        assert argv[argv.index("--model") + 1] == "coder"  # the simulator's topic is kv@<POD_IP>@<--model>
        assert argv.count("--model") == 1 and "--enable-kvcache" in argv
        assert program.ports == (8200 + rank,)
        assert program.env["POD_IP"] == "127.1.0.7"


@pytest.mark.parametrize(
    "config, says",
    [
        ('{"enable_kv_cache_events":true,"endpoint":"ipc:///tmp/x","topic":"kv@a@m"}', "not a ZMQ endpoint"),
        ('{"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","topic":"m"}', "is not kv@<pod>@<model>"),
        ("not json", "not a ZMQ endpoint"),
    ],
)
def test_kv_events_the_site_cannot_serve_are_said(config, says):
    engine = {**ENGINE, "args": [*DECODE_ARGS, "--kv-events-config", config]}
    with pytest.raises(programs.Unsupported, match=says):
        programs.plan(pod([engine]), BIN, {})


def test_kv_events_turned_off_are_one_simulator_as_before():
    off = '{"enable_kv_cache_events":false,"endpoint":"tcp://*:5557","topic":"kv@a@m"}'
    [program] = programs.plan(pod([{**ENGINE, "args": [*DECODE_ARGS, "--kv-events-config", off]}]), BIN, {})
    assert program.ports == (8200, 8201, 8202, 8203)


def test_the_epps_tokenizer_is_a_simulator_serving_the_render_routes_with_the_engines_tokenizer():
    tokenizer = {
        "name": "tokenizer",
        "image": "vllm/vllm-openai-cpu:v0.30.0",
        "command": ["vllm", "launch", "render"],
        "args": ["MiniMaxAI/MiniMax-M2.7", "--revision", "main", "--max-model-len", "204800", "--port", "8100"],
    }
    [program] = programs.plan(pod([tokenizer]), BIN, {})
    assert program.argv == [
        "/b/sim",
        "--model",
        "MiniMaxAI/MiniMax-M2.7",
        "--port",
        "8100",
        "--max-model-len",
        "204800",
        "--mode",
        "echo",
        "--force-dummy-tokenizer",
    ]
    assert program.ports == (8100,)
    with pytest.raises(programs.Unsupported, match="not 'vllm launch render'"):
        programs.plan(pod([{**tokenizer, "command": ["vllm", "serve"]}]), BIN, {})


def test_the_native_sidecar_runs_first_and_the_plain_init_container_not_at_all():
    plan = programs.plan(pod([ENGINE], init=[WAIT, SIDECAR]), BIN, {})
    assert [p.container for p in plan] == ["routing-proxy", "vllm"]
    assert plan[0].argv == ["/b/sidecar", "--port", "8000", "--vllm-port", "8200", "--data-parallel-size", "4"]
    assert plan[0].ports == (8000, 8001, 8002, 8003)


def test_the_epp_reads_a_copy_of_its_mounted_config_map_and_runs_as_its_service_account():
    epp = {
        "name": "epp",
        "image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
        "args": ["--pool-name", "pool", "--config-file", "/etc/epp/epp-config.yaml", "--other=/etc/epp/x"],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/epp"}],
    }
    volumes = [{"name": "config", "configMap": {"name": "minimax-m27-epp-config"}}]
    [program] = programs.plan(
        pod([epp], volumes=volumes), BIN, {"minimax-m27-epp-config": {"data": {"epp-config.yaml": "kind: X\n"}}}
    )
    assert program.argv == [
        "/b/epp",
        "--pool-name",
        "pool",
        "--config-file",
        "{pod}/volumes/config/epp-config.yaml",
        "--other={pod}/volumes/config/x",
    ]
    assert program.files == {"volumes/config/epp-config.yaml": "kind: X\n"}
    assert program.service_account == "minimax-m27-epp"
    assert program.ports == (9002,)  # --grpc-port's default


def test_the_epp_reads_its_mounted_certificate_decoded_as_the_kubelet_writes_it():
    epp = {
        "name": "epp",
        "image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
        "args": ["--cert-path=/etc/epp-tls", "--cert-path-other=/etc/epp-tlsx"],
        "volumeMounts": [{"name": "tls", "mountPath": "/etc/epp-tls/", "readOnly": True}],
    }
    volumes = [{"name": "tls", "secret": {"secretName": "t-epp-tls"}}]
    secrets = {"t-epp-tls": {"data": {"tls.crt": "Q0VSVA==", "tls.key": "/wA="}}}  # "CERT", and bytes no text is
    [program] = programs.plan(pod([epp], volumes=volumes), BIN, {}, secrets)
    # The folder itself (the EPP reads tls.crt and tls.key in it); a path that only starts alike is left alone.
    assert program.argv == ["/b/epp", "--cert-path={pod}/volumes/tls", "--cert-path-other=/etc/epp-tlsx"]
    assert program.files == {"volumes/tls/tls.crt": b"CERT", "volumes/tls/tls.key": b"\xff\x00"}
    with pytest.raises(programs.Unsupported, match="Secret t-epp-tls that epp mounts does not exist"):
        programs.plan(pod([epp], volumes=volumes), BIN, {}, {})


def test_a_missing_config_map_is_said():
    epp = {
        "name": "epp",
        "image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1",
        "args": [],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/epp"}],
    }
    with pytest.raises(programs.Unsupported, match="ConfigMap cfg that epp mounts does not exist"):
        programs.plan(pod([epp], volumes=[{"name": "config", "configMap": {"name": "cfg"}}]), BIN, {})


def test_an_image_without_a_program_leaves_the_pod_unserved_with_the_reason():
    other = {"name": "proxy", "image": "docker.io/envoyproxy/envoy:v1.37.0"}
    with pytest.raises(
        programs.Unsupported, match=re.escape("no program for image 'docker.io/envoyproxy/envoy:v1.37.0'")
    ):
        programs.plan(pod([ENGINE, other]), BIN, {})


def test_a_serving_flag_the_site_has_not_decided_on_is_refused_by_name():
    engine = copy.deepcopy(ENGINE)
    engine["args"] = [*DECODE_ARGS, "--enforce-eager"]  # vLLM has it; the site has not said what it means
    with pytest.raises(programs.Unsupported, match="--enforce-eager has no meaning"):
        programs.plan(pod([engine]), BIN, {})


def test_arguments_vllm_itself_would_refuse_are_refused_in_its_words():
    engine = copy.deepcopy(ENGINE)
    engine["args"] = [*DECODE_ARGS, "--new-flag", "3"]
    with pytest.raises(
        programs.Unsupported, match="would refuse the engine's arguments: unrecognized arguments: --new-flag 3"
    ):
        programs.plan(pod([engine]), BIN, {})


@pytest.mark.parametrize(
    "args, expected",
    [
        (["m", "--port=9"], ["--model", "m", "--port", "9"]),
        (["--port", "9", "m", "--enable-prefix-caching"], ["--model", "m", "--port", "9"]),
    ],
)
def test_flags_with_equals_or_space_and_the_model_anywhere(args, expected):
    # No --block-size: vLLM's own 16 tokens; prefix caching on whether or not the line says so (vLLM's default).
    cache = ["--enable-kvcache", "--block-size", "16"]
    assert programs.sim_args(["vllm", "serve"], args) == [*expected, *cache, *programs.SIM_FIXED]


@pytest.mark.parametrize(
    "args, sub_block_cache, block",
    [
        (["--block-size", "4096", "--max-num-batched-tokens", "96"], "1", "32"),  # reuse in 96-token sub-blocks
        (["--block-size", "4096", "--max-num-batched-tokens", "96"], "0", "128"),  # reuse in whole 4096 blocks
        (["--block-size", "64", "--max-num-batched-tokens", "512"], "0", "64"),
        (["--block-size", "64"], "1", "64"),  # no batch budget on the line: no sub-block to reuse in
    ],
)
def test_the_simulators_block_divides_the_unit_the_engine_reuses_prefixes_in(args, sub_block_cache, block):
    env = {"VLLM_RBLN_SUB_BLOCK_CACHE": sub_block_cache}
    argv = programs.sim_args(["vllm", "serve"], ["m", *args], env)
    assert argv[argv.index("--enable-kvcache") + 1 : argv.index("--enable-kvcache") + 3] == ["--block-size", block]


def test_an_engine_with_an_rds_tier_simulates_a_cache_of_the_tiers_size():
    """rds_max_chunks x LMCACHE_CHUNK_SIZE tokens (1000 x 4096 in prod-4p4d's ConfigMap), in simulator blocks."""
    config_maps = {"lm": {"data": {"LMCACHE_CHUNK_SIZE": "4096", "LMCACHE_LOCAL_CPU": "False"}}}
    extra = {"name": "LMCACHE_EXTRA_CONFIG", "value": '{"rds_max_chunks":1000}'}
    prefill = {**ENGINE, "envFrom": [{"configMapRef": {"name": "lm"}}], "env": [*ENGINE["env"], extra]}
    [program] = programs.plan(pod([prefill]), BIN, config_maps)
    argv = program.argv
    assert argv[argv.index("--enable-kvcache") : argv.index("--enable-kvcache") + 5] == [
        "--enable-kvcache",
        "--block-size",
        "128",
        "--kv-cache-size",
        "32000",  # 4,096,000 tokens / 128
    ]
    assert "LMCACHE_CHUNK_SIZE" not in program.env  # read for the cache, not handed to the simulator
    [without] = programs.plan(pod([prefill]), BIN, {})  # the ConfigMap missing: no chunk size, no tier
    assert "--kv-cache-size" not in without.argv


def test_envfrom_configmaps_under_the_literal_env_with_their_prefixes():
    container = {
        "envFrom": [
            {"configMapRef": {"name": "a"}},
            {"configMapRef": {"name": "b"}, "prefix": "P_"},
            {"secretRef": {"name": "s"}},
            {"configMapRef": {"name": "absent"}},
        ],
        "env": [{"name": "X", "value": "literal"}],
    }
    config_maps = {"a": {"data": {"X": "a", "Y": "a"}}, "b": {"data": {"Y": "b"}}}
    assert programs.engine_env(container, pod([]), config_maps) == {"X": "literal", "Y": "a", "P_Y": "b"}


def test_an_engine_without_prefix_caching_is_a_simulator_without_a_cache():
    argv = programs.sim_args(["vllm", "serve"], ["m", "--block-size", "4096", "--no-enable-prefix-caching"])
    assert "--enable-kvcache" not in argv and "--block-size" not in argv


def test_a_reuse_unit_no_simulator_block_divides_is_refused_with_the_sizes_it_takes():
    sizes = re.escape("(8, 16, 32, 64, 128)")
    with pytest.raises(programs.Unsupported, match=f"units of 100 tokens, which no block size .* {sizes}"):
        programs.sim_args(["vllm", "serve"], ["m", "--block-size", "100"])


def test_something_else_than_vllm_serve_is_refused():
    with pytest.raises(programs.Unsupported, match="not 'vllm serve'"):
        programs.sim_args(["python", "-m", "x"], [])


TOKEN_VOLUME = {
    "name": "api-token",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        ]
    },
}


def decode_pod(sidecar: dict, volumes: list[dict] = (TOKEN_VOLUME,)) -> dict:
    found = pod([ENGINE], init=[WAIT, sidecar], volumes=list(volumes))
    found["spec"].update(serviceAccountName="minimax-m27-decode", automountServiceAccountToken=False)
    return found


def test_the_sidecar_reads_the_api_as_the_pods_account_and_the_engine_does_not():
    """The rendered decode pod mounts no token but gives its sidecar a projected one (SSRF protection lists the pool
    and its pods): the sidecar runs with a token of the pod's ServiceAccount (the agent writes it into KUBECONFIG,
    which client-go reads before the in-cluster files the site cannot mount), the simulated engine with none."""
    sidecar = {
        **SIDECAR,
        "volumeMounts": [
            {"name": "api-token", "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
        ],
    }
    plan = {p.container: p for p in programs.plan(decode_pod(sidecar), BIN, {})}
    assert plan["routing-proxy"].service_account == "minimax-m27-decode"
    assert plan["vllm"].service_account is None


def test_a_container_without_a_token_gets_no_account():
    plan = {p.container: p for p in programs.plan(decode_pod(SIDECAR), BIN, {})}
    assert plan["routing-proxy"].service_account is None and plan["vllm"].service_account is None


def test_an_automounted_token_reaches_every_container_as_the_default_account():
    found = pod([ENGINE], init=[SIDECAR])
    del found["spec"]["serviceAccountName"]
    assert {p.container: p.service_account for p in programs.plan(found, BIN, {})} == {
        "routing-proxy": "default",
        "vllm": "default",
    }
