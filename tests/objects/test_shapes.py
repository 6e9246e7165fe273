"""The objects of each stack against fragments written out by hand (issue 25): ports and targetPorts, DRA claims and
their constraints, node affinity per KV mode, annotations, env and envFrom, the routing sidecar's and the EPP's args.

The other render tests compare the offline render with the program, and both call the same builders, so a wrong
object is equal on both sides. Here the expected values come from the reference design (README, docs/what-it-deploys.md:
prefill PP4 on one rank at 8000; decode DP4 ranks 8200-8203 behind the sidecar's 8000-8003; NIXL side channels from
5600; 4 NPUs and 2 RDMA NICs on one NUMA node per pod; RDS nodes for an RDS prefill only) and are written as literals,
never computed by a call into core/ or objects/. Each stack file, and boundary configs: a decode pod that fills its
node (DP 8 of 8 NPUs, 8 target ports, the most an InferencePool takes), no RDMA NICs, and each KV mode.
"""

from __future__ import annotations

import pytest

from core.gate import ConfigError, load_config
from objects.stack import stack_objects
from tests.conftest import stack_config

NS, STACK = "rebel100", "minimax-m27"
PREFILL, DECODE, EPP, POOL, LMCACHE = (f"{STACK}-{part}" for part in ("prefill", "decode", "epp", "pool", "lmcache"))
PD_STACKS = ("dev", "prod-4p4d", "pd-router07")
STACKS = (*PD_STACKS, "agg")


def objects_of(stack: str, **overrides) -> dict[tuple[str, str], dict]:
    """The stack's manifests by (kind, name), the config passed through the gate first (as `up` does)."""
    cfg = load_config(stack_config(stack, **overrides))
    return {(m["kind"], m["metadata"]["name"]): m for m in stack_objects(cfg).manifests()}


def pod_spec(found: dict, role: str) -> dict:
    return found[("Deployment", f"{STACK}-{role}")]["spec"]["template"]["spec"]


def container(spec: dict, name: str) -> dict:
    matches = [c for c in (spec.get("containers") or []) + (spec.get("initContainers") or []) if c["name"] == name]
    assert len(matches) == 1, [c["name"] for c in spec["containers"]]
    return matches[0]


def ports(c: dict) -> list[tuple[str, int]]:
    assert all(p["protocol"] == "TCP" for p in c["ports"])
    return [(p["name"], p["containerPort"]) for p in c["ports"]]


# The boundary configs. DP 8 on one decode pod takes all 8 NPUs of a node; 2 such pods and 4 prefill pods of 4 NPUs
# fill the 4 nodes of prod-4p4d (2 x 8 + 4 x 4 = 32).
FILLS_NODE = {"decode": {"replicas": 2, "dataParallelSize": 8}}
NO_NICS = {"hardware": {"rdmaNicsPerPod": 0}}


# --- ports and targetPorts -----------------------------------------------------------------------------------------

SIDECAR_PORTS = [("proxy-0", 8000), ("proxy-1", 8001), ("proxy-2", 8002), ("proxy-3", 8003)]
DECODE_PORTS = [
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
PREFILL_PORTS = [("http", 8000), ("nixl", 5600)]


@pytest.mark.parametrize(
    "stack, overrides, target_ports, sidecar, decode, prefill",
    [
        *[
            pytest.param(stack, {}, [8000, 8001, 8002, 8003], SIDECAR_PORTS, DECODE_PORTS, PREFILL_PORTS, id=stack)
            for stack in PD_STACKS
        ],
        # AGG: no sidecar, the pool targets the decode ranks themselves.
        pytest.param("agg", {}, [8200, 8201, 8202, 8203], None, DECODE_PORTS, None, id="agg"),
        pytest.param(
            "prod-4p4d",
            FILLS_NODE,
            [8000, 8001, 8002, 8003, 8004, 8005, 8006, 8007],
            [(f"proxy-{i}", 8000 + i) for i in range(8)],
            [
                *[(f"http-{i}", 8200 + i) for i in range(8)],
                ("dp-rpc", 5555),
                *[(f"nixl-{i}", 5600 + i) for i in range(8)],
            ],
            PREFILL_PORTS,
            id="decode-fills-a-node-8-target-ports",
        ),
    ],
)
def test_the_pool_targets_the_ports_the_pods_listen_on(stack, overrides, target_ports, sidecar, decode, prefill):
    found = objects_of(stack, **overrides)
    pool = found[("InferencePool", POOL)]["spec"]
    assert pool["targetPorts"] == [{"number": port} for port in target_ports]
    assert pool["endpointPickerRef"] == {"name": EPP, "failureMode": "FailOpen", "port": {"number": 9002}}
    decode_spec = pod_spec(found, "decode")
    assert ports(container(decode_spec, "vllm")) == decode
    if sidecar is None:
        assert [c["name"] for c in decode_spec["initContainers"]] == ["wait-for-weights"]
    else:
        routing = container(decode_spec, "routing-proxy")
        assert ports(routing) == sidecar
        assert routing["readinessProbe"] == {"tcpSocket": {"port": 8000}, "periodSeconds": 10}
        assert routing["restartPolicy"] == "Always"  # a native sidecar: it outlives the init phase
    if prefill is None:
        assert ("Deployment", PREFILL) not in found
    else:
        assert ports(container(pod_spec(found, "prefill"), "vllm")) == prefill


@pytest.mark.parametrize("stack", STACKS)
def test_the_epp_service_sends_each_port_to_the_listener_of_its_name(stack):
    found = objects_of(stack)
    service = found[("Service", EPP)]["spec"]
    assert service["ports"] == [
        {"name": "grpc-ext-proc", "appProtocol": "http2", "port": 9002, "protocol": "TCP", "targetPort": 9002},
        {"name": "grpc-health", "port": 9003, "protocol": "TCP", "targetPort": 9003},
        {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": 9090},
    ]
    assert service["selector"] == {
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/name": EPP,
        "app.kubernetes.io/part-of": STACK,
    }
    assert ports(container(pod_spec(found, "epp"), "epp")) == [("grpc", 9002), ("grpc-health", 9003), ("metrics", 9090)]


@pytest.mark.parametrize(
    "stack, role, probe_ports",
    [
        ("prod-4p4d", "prefill", [8000]),
        ("prod-4p4d", "decode", [8200, 8201, 8202, 8203]),
        ("agg", "decode", [8200, 8201, 8202, 8203]),
    ],
)
def test_engines_are_probed_on_their_rank_ports(stack, role, probe_ports):
    vllm = container(pod_spec(objects_of(stack), role), "vllm")
    assert vllm["startupProbe"]["httpGet"] == {"path": "/health", "port": probe_ports[0]}
    assert vllm["livenessProbe"]["httpGet"] == {"path": "/health", "port": probe_ports[0]}
    readiness = vllm["readinessProbe"]
    if len(probe_ports) == 1:
        assert readiness["httpGet"] == {"path": "/v1/models", "port": probe_ports[0]}
    else:  # every rank answers /v1/models, or the pod is not ready
        assert readiness["exec"]["command"][:2] == ["python3", "-c"]
        assert readiness["exec"]["command"][3:] == [str(port) for port in probe_ports]


# --- DRA claims and their constraints -------------------------------------------------------------------------------


def npus(count: int) -> dict:
    return {
        "name": "npu",
        "exactly": {"allocationMode": "ExactCount", "count": count, "deviceClassName": "npu.rebellions.ai"},
    }


TWO_NICS = {"name": "rdma", "exactly": {"allocationMode": "ExactCount", "count": 2, "deviceClassName": "dranet"}}
ONE_NUMA_NODE = [{"matchAttribute": "resource.kubernetes.io/numaNode", "requests": ["npu", "rdma"]}]


def claims(found: dict) -> dict[str, dict]:
    """Role -> the devices its pods claim, through the template the Deployment names."""
    result = {}
    for role in ("prefill", "decode"):
        if ("Deployment", f"{STACK}-{role}") not in found:
            continue
        spec = pod_spec(found, role)
        (claim,) = spec["resourceClaims"]
        assert claim["name"] == "npu-rdma"
        template = found[("ResourceClaimTemplate", claim["resourceClaimTemplateName"])]
        assert template["metadata"]["name"].startswith(f"{STACK}-{role}-npu-rdma-")
        assert template["spec"]["metadata"]["labels"]["llm-d.ai/role"] == role
        assert container(spec, "vllm")["resources"]["claims"] == [{"name": "npu-rdma"}]
        result[role] = template["spec"]["spec"]["devices"]
    return result


FOUR_NPUS_TWO_NICS = {"requests": [npus(4), TWO_NICS], "constraints": ONE_NUMA_NODE}


@pytest.mark.parametrize(
    "stack, overrides, expected",
    [
        *[
            pytest.param(stack, {}, {"prefill": FOUR_NPUS_TWO_NICS, "decode": FOUR_NPUS_TWO_NICS}, id=stack)
            for stack in PD_STACKS
        ],
        pytest.param("agg", {}, {"decode": FOUR_NPUS_TWO_NICS}, id="agg"),
        pytest.param(
            "prod-4p4d",
            FILLS_NODE,
            {"prefill": FOUR_NPUS_TWO_NICS, "decode": {"requests": [npus(8), TWO_NICS], "constraints": ONE_NUMA_NODE}},
            id="decode-fills-a-node",
        ),
        # No NICs: no NIC request (a count of 0 is refused by the API) and nothing to keep on the NPUs' NUMA node.
        pytest.param(
            "prod-4p4d",
            NO_NICS,
            {"prefill": {"requests": [npus(4)]}, "decode": {"requests": [npus(4)]}},
            id="no-rdma-nics",
        ),
        pytest.param(
            "prod-4p4d",
            {
                "hardware": {
                    "rdmaNicsPerPod": 1,
                    "nicDeviceClass": "rdma.example.com",
                    "numaAttribute": "example.com/numa",
                }
            },
            {
                role: {
                    "requests": [
                        npus(4),
                        {
                            "name": "rdma",
                            "exactly": {
                                "allocationMode": "ExactCount",
                                "count": 1,
                                "deviceClassName": "rdma.example.com",
                            },
                        },
                    ],
                    "constraints": [{"matchAttribute": "example.com/numa", "requests": ["npu", "rdma"]}],
                }
                for role in ("prefill", "decode")
            },
            id="one-nic-of-another-class",
        ),
    ],
)
def test_each_pod_claims_its_npus_and_nics_on_one_numa_node(stack, overrides, expected):
    assert claims(objects_of(stack, **overrides)) == expected


def test_a_claim_that_asks_for_something_else_is_a_template_of_another_name():
    """A template's spec is immutable: a changed ask must be a new template, never a patch of the old one."""
    names = {}
    for label, overrides in (("default", {}), ("fills", FILLS_NODE), ("no-nics", NO_NICS)):
        found = objects_of("prod-4p4d", **overrides)
        names[label] = {
            role: pod_spec(found, role)["resourceClaims"][0]["resourceClaimTemplateName"]
            for role in ("prefill", "decode")
        }
    assert names["fills"]["prefill"] == names["default"]["prefill"]  # prefill asks for the same
    assert names["fills"]["decode"] != names["default"]["decode"]
    assert names["no-nics"]["prefill"] != names["default"]["prefill"]
    assert names["no-nics"]["decode"] != names["default"]["decode"]


# --- node affinity per KV mode, and the spread ------------------------------------------------------------------------

NPU_NODE = [
    {"key": "rebellions.ai/npu.present", "operator": "In", "values": ["true"]},
    {"key": "rebellions.ai/npu.product", "operator": "In", "values": ["RBLN-CR13"]},
]
RDS_NODE = [*NPU_NODE, {"key": "rebellions.ai/rds.present", "operator": "In", "values": ["true"]}]


def node_expressions(found: dict, role: str) -> list[dict]:
    required = pod_spec(found, role)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = required["nodeSelectorTerms"]
    return term["matchExpressions"]


@pytest.mark.parametrize(
    "stack, overrides, prefill, decode",
    [
        pytest.param("prod-4p4d", {}, RDS_NODE, NPU_NODE, id="prod-rds"),
        pytest.param("dev", {}, RDS_NODE, NPU_NODE, id="dev-rds"),
        pytest.param("pd-router07", {}, RDS_NODE, NPU_NODE, id="pd-router07-rds"),
        # The CPU tier keeps KV in host memory: any NPU node will do, RDS or not.
        pytest.param("prod-4p4d", {"kvTier": {"mode": "cpu"}}, NPU_NODE, NPU_NODE, id="cpu"),
        pytest.param("prod-4p4d", {"kvTier": {"mode": "off"}}, NPU_NODE, NPU_NODE, id="off"),
        pytest.param("agg", {}, None, NPU_NODE, id="agg"),
        pytest.param(
            "prod-4p4d",
            {"hardware": {"npuProduct": "RBLN-CA25"}, "kvTier": {"mode": "cpu"}},
            [NPU_NODE[0], {"key": "rebellions.ai/npu.product", "operator": "In", "values": ["RBLN-CA25"]}],
            [NPU_NODE[0], {"key": "rebellions.ai/npu.product", "operator": "In", "values": ["RBLN-CA25"]}],
            id="another-npu-product",
        ),
    ],
)
def test_engines_land_on_npu_nodes_and_an_rds_prefill_on_rds_nodes(stack, overrides, prefill, decode):
    found = objects_of(stack, **overrides)
    assert node_expressions(found, "decode") == decode
    if prefill is None:
        assert ("Deployment", PREFILL) not in found
    else:
        assert node_expressions(found, "prefill") == prefill


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_one_pod_of_a_role_per_node_unless_spreading_is_off(role):
    anti = pod_spec(objects_of("prod-4p4d"), role)["affinity"]["podAntiAffinity"]
    assert anti == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app.kubernetes.io/part-of": STACK, "llm-d.ai/role": role}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
    assert (
        "podAntiAffinity" not in pod_spec(objects_of("prod-4p4d", placement={"spreadRoles": False}), role)["affinity"]
    )


# --- annotations ------------------------------------------------------------------------------------------------------

EXCEPTIONS = (
    "runAsRoot: the RBLN runtime opens the NPU device nodes and NIXL registers RDMA memory as root; "
    "readOnlyRootFilesystem=false: vLLM and the RBLN compiler write caches and temp files outside the "
    "mounted volumes; capabilities IPC_LOCK: pin RDMA buffers for NIXL"
)


def annotations(found: dict, role: str) -> dict:
    return found[("Deployment", f"{STACK}-{role}")]["spec"]["template"]["metadata"]["annotations"]


def active(ports_text: str) -> dict:
    """Both keys the EPP generations read (v0.10 the first, v0.7 the second)."""
    return {"llm-d.ai/active-ports": ports_text, "inference.networking.k8s.io/active-ports": ports_text}


@pytest.mark.parametrize(
    "stack, overrides, prefill, decode",
    [
        *[pytest.param(stack, {}, active("8000"), active("8000,8001,8002,8003"), id=stack) for stack in PD_STACKS],
        pytest.param("agg", {}, None, active("8200,8201,8202,8203"), id="agg"),
        pytest.param(
            "prod-4p4d",
            FILLS_NODE,
            active("8000"),
            active("8000,8001,8002,8003,8004,8005,8006,8007"),
            id="decode-fills-a-node",
        ),
    ],
)
def test_pods_declare_the_target_ports_they_serve_on(stack, overrides, prefill, decode):
    found = objects_of(stack, **overrides)
    common = {"rebel100.ai/model-revision": "main", "rebel100.ai/security-exceptions": EXCEPTIONS}
    assert annotations(found, "decode") == {**decode, **common}
    if prefill is not None:
        assert annotations(found, "prefill") == {**prefill, **common}


def test_pod_annotations_of_the_config_and_fewer_exceptions_when_the_engine_needs_fewer():
    found = objects_of(
        "prod-4p4d",
        engine={"podAnnotations": {"rebel100.local/ready-delay": "5"}},
        security={"engineRunAsRoot": False, "engineCapabilities": []},
    )
    for role in ("prefill", "decode"):
        assert annotations(found, role)["rebel100.local/ready-delay"] == "5"
        assert annotations(found, role)["rebel100.ai/security-exceptions"] == (
            "readOnlyRootFilesystem=false: vLLM and the RBLN compiler write caches and temp files outside the mounted "
            "volumes"
        )


def test_the_lmcache_config_map_records_the_rds_budget_it_was_checked_with():
    found = objects_of("prod-4p4d")
    assert found[("ConfigMap", LMCACHE)]["metadata"]["annotations"]["rebel100.ai/rds-budget"] == (
        '{"nvmeDrives":2,"chunkOverheadMib":2.0,"stagingBufferMib":512.0,"hbmPerChipletGib":36.0}'
    )
    assert "rebel100.ai/rds-budget" not in (
        objects_of("prod-4p4d", kvTier={"mode": "cpu"})[("ConfigMap", LMCACHE)]["metadata"].get("annotations") or {}
    )


# --- env and envFrom --------------------------------------------------------------------------------------------------

ENGINE_ENV = [
    ("RBLN_FORCE_CCL_ASYNC", "1"),
    ("VLLM_RBLN_USE_DEVICE_TENSOR", "1"),
    ("VLLM_RBLN_USE_VLLM_MODEL", "1"),
    ("VLLM_RBLN_AUTO_PORT", "1"),
    ("VLLM_RBLN_SUB_BLOCK_CACHE", "1"),
    ("VLLM_ENGINE_READY_TIMEOUT_S", "9600"),
    ("VLLM_RPC_TIMEOUT", "1800000"),
    ("VLLM_CACHE_ROOT", "/workspace/.cache"),
    ("HF_HOME", "/models"),
    ("HF_HUB_OFFLINE", "1"),
    ("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600"),
]
BY_REFERENCE = [
    {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    # Optional: none of the stacks downloads a gated repository, and a missing required Secret stops the kubelet
    # from starting the container (and KEDA from scaling its Deployment).
    {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}}},
]


def literal(pairs) -> list[dict]:
    return [{"name": name, "value": value} for name, value in pairs]


@pytest.mark.parametrize("stack", STACKS)
def test_engine_env_literal_values_then_the_pod_ip_and_the_token_by_reference(stack):
    found = objects_of(stack)
    assert container(pod_spec(found, "decode"), "vllm")["env"] == literal(ENGINE_ENV) + BY_REFERENCE
    if stack != "agg":
        # Prefill (PP4 on one rank) names its four devices; decode's DP ranks each take their own.
        assert (
            container(pod_spec(found, "prefill"), "vllm")["env"]
            == literal([*ENGINE_ENV, ("RBLN_DEVICES", "0,1,2,3")]) + BY_REFERENCE
        )


RDS_ENV = {
    "LMCACHE_CHUNK_SIZE": "4096",
    "LMCACHE_ENABLE_KV_EVENTS": "True",
    "LMCACHE_EXTRA_CONFIG": '{"rds_max_chunks":1000}',
    "LMCACHE_LOCAL_CPU": "False",
    "LMCACHE_PRE_CACHING_HASH_ALGORITHM": "sha256_cbor_64bit",
}
CPU_ENV = {
    "LMCACHE_CHUNK_SIZE": "4096",
    "LMCACHE_ENABLE_KV_EVENTS": "True",
    "LMCACHE_LOCAL_CPU": "True",
    "LMCACHE_MAX_LOCAL_CPU_SIZE": "64",
    "LMCACHE_PRE_CACHING_HASH_ALGORITHM": "sha256_cbor_64bit",
}


@pytest.mark.parametrize(
    "overrides, lmcache_env",
    [
        pytest.param({}, RDS_ENV, id="rds"),
        pytest.param(
            {"kvTier": {"mode": "rds", "rdsMaxChunks": 1}},
            {**RDS_ENV, "LMCACHE_EXTRA_CONFIG": '{"rds_max_chunks":1}'},
            id="rds-one-chunk",
        ),
        pytest.param({"kvTier": {"mode": "cpu"}}, CPU_ENV, id="cpu"),
        pytest.param(
            {"kvTier": {"mode": "cpu", "cpuSizeGib": 8}}, {**CPU_ENV, "LMCACHE_MAX_LOCAL_CPU_SIZE": "8"}, id="cpu-8-gib"
        ),
        pytest.param({"kvTier": {"mode": "off"}}, None, id="off"),
    ],
)
def test_prefill_takes_the_kv_tiers_lmcache_env_from_its_config_map_and_decode_none(overrides, lmcache_env):
    found = objects_of("prod-4p4d", **overrides)
    prefill = container(pod_spec(found, "prefill"), "vllm")
    assert "envFrom" not in container(pod_spec(found, "decode"), "vllm")
    if lmcache_env is None:
        assert "envFrom" not in prefill and ("ConfigMap", LMCACHE) not in found
    else:
        assert prefill["envFrom"] == [{"configMapRef": {"name": LMCACHE}}]
        assert found[("ConfigMap", LMCACHE)]["data"] == lmcache_env


def test_extra_env_of_the_config_is_a_literal_entry_of_its_role_only():
    found = objects_of("prod-4p4d", decode={"extraEnv": {"NCCL_DEBUG": "INFO"}})
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in container(pod_spec(found, "decode"), "vllm")["env"]
    assert "NCCL_DEBUG" not in {e["name"] for e in container(pod_spec(found, "prefill"), "vllm")["env"]}


# --- the routing sidecar's and the EPP's args -----------------------------------------------------------------------

SIDECAR_V0_7 = [
    "--port",
    "8000",
    "--vllm-port",
    "8200",
    "--data-parallel-size",
    "4",
    "--kv-connector",
    "nixlv2",
    "--secure-proxy=false",
]
# v0.10 protects against SSRF: it calls only prefill pods of the pool it names (and so reads the API).
SIDECAR_V0_10 = [*SIDECAR_V0_7, "--enable-ssrf-protection=true", "--inference-pool", f"{NS}/{POOL}"]


@pytest.mark.parametrize(
    "stack, overrides, image, args, reads_api",
    [
        pytest.param(
            "prod-4p4d", {}, "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0", SIDECAR_V0_10, True, id="prod"
        ),
        pytest.param("dev", {}, "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0", SIDECAR_V0_10, True, id="dev"),
        pytest.param(
            "pd-router07", {}, "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1", SIDECAR_V0_7, False, id="pd-router07"
        ),
        pytest.param(
            "prod-4p4d",
            FILLS_NODE,
            "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
            [
                "--port",
                "8000",
                "--vllm-port",
                "8200",
                "--data-parallel-size",
                "8",
                "--kv-connector",
                "nixlv2",
                "--secure-proxy=false",
                "--enable-ssrf-protection=true",
                "--inference-pool",
                f"{NS}/{POOL}",
            ],
            True,
            id="decode-fills-a-node",
        ),
    ],
)
def test_the_sidecar_fronts_each_decode_rank(stack, overrides, image, args, reads_api):
    found = objects_of(stack, **overrides)
    spec = pod_spec(found, "decode")
    routing = container(spec, "routing-proxy")
    assert (routing["image"], routing["args"]) == (image, args)
    token = {"name": "api-token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
    if reads_api:
        assert routing["volumeMounts"] == [token]
        assert spec["serviceAccountName"] == DECODE
        assert found[("Role", DECODE)]["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
            {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": ["list", "watch"]},
        ]
    else:
        assert "volumeMounts" not in routing and "serviceAccountName" not in spec
        assert ("Role", DECODE) not in found
    assert spec["automountServiceAccountToken"] is False  # the engine container gets no API credential


EPP_ARGS = [
    "--pool-name",
    POOL,
    "--pool-namespace",
    NS,
    "--pool-group",
    "inference.networking.k8s.io",
    "--config-file",
    "/etc/epp/epp-config.yaml",
    "--grpc-port",
    "9002",
    "--grpc-health-port",
    "9003",
    "--metrics-port",
    "9090",
    "--refresh-metrics-interval=50ms",  # upstream's default, written out
    "--zap-encoder",
    "json",
    "--tracing=false",
]


V0100 = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"


@pytest.mark.parametrize(
    "stack, image, drain, alpha",
    [
        # v0.10.0 drains 30 s after SIGTERM (upstream's default, written out) and loads session affinity's Alpha
        # plugins only with their flag; v0.7.1 has neither flag (nor session affinity).
        ("prod-4p4d", V0100, ["--drain-timeout=30s"], ["--allow-experimental-plugins=true"]),
        ("dev", V0100, ["--drain-timeout=30s"], ["--allow-experimental-plugins=true"]),
        ("agg", V0100, ["--drain-timeout=30s"], ["--allow-experimental-plugins=true"]),
        ("pd-router07", "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1", [], []),
    ],
)
def test_the_epp_serves_its_pool_on_the_services_ports(stack, image, drain, alpha):
    epp = container(pod_spec(objects_of(stack), "epp"), "epp")
    # Its certificate mounted (router.certificate: stack, the default): a restart does not make one first.
    assert (epp["image"], epp["args"]) == (image, EPP_ARGS + drain + ["--cert-path=/etc/epp-tls"] + alpha)


def test_the_epp_ports_of_the_config_reach_its_args_its_container_and_its_service():
    found = objects_of("prod-4p4d", router={"grpcPort": 9102, "healthPort": 9103, "metricsPort": 9190})
    epp = container(pod_spec(found, "epp"), "epp")
    assert epp["args"][8:14] == ["--grpc-port", "9102", "--grpc-health-port", "9103", "--metrics-port", "9190"]
    assert ports(epp) == [("grpc", 9102), ("grpc-health", 9103), ("metrics", 9190)]
    assert [(p["name"], p["port"], p["targetPort"]) for p in found[("Service", EPP)]["spec"]["ports"]] == [
        ("grpc-ext-proc", 9102, 9102),
        ("grpc-health", 9103, 9103),
        ("metrics", 9190, 9190),
    ]
    assert found[("InferencePool", POOL)]["spec"]["endpointPickerRef"]["port"] == {"number": 9102}


# --- node groups, and the heads of the claim templates and the LMCache ConfigMap (found by mutation, issue 25) ------


def role_labels(role: str) -> dict:
    return {
        "app.kubernetes.io/component": role,
        "app.kubernetes.io/name": f"{STACK}-{role}",
        "app.kubernetes.io/part-of": STACK,
        "llm-d.ai/inference-serving": "true",
        "llm-d.ai/role": role,
    }


def test_two_node_groups_are_a_deployment_each_pinned_to_its_group():
    """placement.groups 2: each role splits its 4 pods over minimax-m27-<role>-g0 and -g1, 2 each, on the nodes
    labelled rebel100.ai/pool-group g0 and g1."""
    found = objects_of("prod-4p4d", placement={"groups": 2})
    for role, base in (("prefill", RDS_NODE), ("decode", NPU_NODE)):
        for group in ("g0", "g1"):
            deployment = found[("Deployment", f"{STACK}-{role}-{group}")]
            assert deployment["spec"]["replicas"] == 2
            assert deployment["spec"]["template"]["metadata"]["labels"]["rebel100.ai/pool"] == f"{STACK}-{role}-{group}"
            required = deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]
            assert required["nodeSelectorTerms"] == [
                {"matchExpressions": [*base, {"key": "rebel100.ai/pool-group", "operator": "In", "values": [group]}]}
            ]
        assert ("Deployment", f"{STACK}-{role}") not in found


def test_claim_templates_and_the_lmcache_config_map_are_of_their_api_in_the_stacks_namespace():
    found = objects_of("prod-4p4d")
    for role in ("prefill", "decode"):
        name = pod_spec(found, role)["resourceClaims"][0]["resourceClaimTemplateName"]
        template = found[("ResourceClaimTemplate", name)]
        assert (template["apiVersion"], template["metadata"]["namespace"], template["metadata"]["labels"]) == (
            "resource.k8s.io/v1",
            NS,
            role_labels(role),
        )
    config_map = found[("ConfigMap", LMCACHE)]
    assert (config_map["apiVersion"], config_map["metadata"]["namespace"], config_map["metadata"]["labels"]) == (
        "v1",
        NS,
        {"app.kubernetes.io/part-of": STACK},
    )


def test_a_gated_repository_makes_the_engines_token_required():
    found = objects_of("dev", weights={"gated": True, "tokenSecretExists": True})
    token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": False}}}
    for role in ("prefill", "decode"):  # both pools pass the flag on (a prefill that dropped it survived mutation)
        assert token in container(pod_spec(found, role), "vllm")["env"]


def test_the_epp_scrapes_at_the_router_sections_interval():
    epp = container(pod_spec(objects_of("prod-4p4d", router={"refreshMetricsIntervalMs": 200}), "epp"), "epp")
    assert [a for a in epp["args"] if a.startswith("--refresh-metrics-interval")] == [
        "--refresh-metrics-interval=200ms"
    ]


def test_an_interval_below_the_one_v0_10_clamps_to_is_refused():
    with pytest.raises(ConfigError) as info:
        load_config(stack_config("prod-4p4d", router={"refreshMetricsIntervalMs": 49}))
    assert "rebel100:router.refreshMetricsIntervalMs" in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "router, drain, grace",
    [
        # The drain window, and SIGKILL 10 s after it: the EPP's grace period outlasts its drain.
        pytest.param({}, ["--drain-timeout=30s"], 40, id="upstream-default"),
        pytest.param({"drainSeconds": 120}, ["--drain-timeout=120s"], 130, id="longer"),
        pytest.param({"drainSeconds": 0}, ["--drain-timeout=0s"], 10, id="none"),
        # An EPP without the flag: none passed, and Kubernetes' own grace period.
        pytest.param({"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"}, [], None, id="v0.7.1"),
    ],
)
def test_the_epp_drains_inside_its_grace_period_and_rolls_out_before_it_stops(router, drain, grace):
    found = objects_of("prod-4p4d", router=router)
    spec = found[("Deployment", f"{STACK}-epp")]["spec"]
    epp = container(spec["template"]["spec"], "epp")
    assert [a for a in epp["args"] if a.startswith("--drain-timeout")] == drain
    assert spec["template"]["spec"].get("terminationGracePeriodSeconds") == grace
    # The new EPP is up before the old one is stopped.
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
