"""The real pack process, started as the engine starts it and queried over gRPC.

`python -u -m pulumi.policy <engine-address> policy/` from the project root, with a stand-in
Engine service on 127.0.0.1 that records the pack's log calls. The test reads the analyzer port the
pack prints, then speaks the Analyzer protocol: GetAnalyzerInfo, Configure, AnalyzeStack and Analyze
with the prod-4p4d render as `kubernetes:<group/version>:<Kind>` resources. A pack that does not load
(import error, bad policy definition) fails here.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from concurrent import futures

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, engine_pb2_grpc

from core.stackfile import PROJECT_ROOT
from policy import catalog
from policy.pack import type_token as resource_type
from tests.policy.fixtures import DECODE, DECODE_CLAIM, EPP, PREFILL, engine, get, npu_request, set_arg, sidecar

START_TIMEOUT_S = 60
MANDATORY, ADVISORY = analyzer_pb2.EnforcementLevel.MANDATORY, analyzer_pb2.EnforcementLevel.ADVISORY


class RecordingEngine(engine_pb2_grpc.EngineServicer):
    """The engine side the pack may log to."""

    def __init__(self) -> None:
        self.logs: list[str] = []

    def Log(self, request, context):
        self.logs.append(request.message)
        return empty_pb2.Empty()


def urn(manifest: dict) -> str:
    return f"urn:pulumi:prod-4p4d::rebel100-serving::{resource_type(manifest)}::{manifest['metadata']['name']}"


def analyzer_resource(manifest: dict) -> analyzer_pb2.AnalyzerResource:
    properties = struct_pb2.Struct()
    json_format.ParseDict(manifest, properties)
    return analyzer_pb2.AnalyzerResource(
        type=resource_type(manifest), properties=properties, urn=urn(manifest), name=manifest["metadata"]["name"]
    )


@pytest.fixture(scope="module")
def pack():
    """(Analyzer stub, recording engine) of a running pack process; stopped after the module."""
    recorder = RecordingEngine()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    engine_pb2_grpc.add_EngineServicer_to_server(recorder, server)
    engine_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    env = {**os.environ, "PULUMI_PROJECT": "rebel100-serving", "PULUMI_STACK": "prod-4p4d", "PULUMI_DRY_RUN": "true"}
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", f"127.0.0.1:{engine_port}", "policy/"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = process.stdout.readline().decode().strip()
        if not line.isdigit():
            process.kill()
            raise AssertionError(
                f"the pack did not start: stdout {line!r}, stderr {process.communicate(timeout=10)[1].decode()}"
            )
        channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT_S)
        yield analyzer_pb2_grpc.AnalyzerStub(channel), recorder
        channel.close()
    finally:
        process.kill()
        process.wait(timeout=10)
        server.stop(0)


def diagnostics(response) -> list[tuple[str, int, str, str]]:
    return [(d.policyName, d.enforcementLevel, d.urn, d.message) for d in response.diagnostics]


def test_pack_describes_every_policy(pack):
    stub, _ = pack
    info = stub.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == catalog.PACK_NAME
    assert [p.name for p in info.policies] == [spec.name for spec in catalog.POLICIES]
    by_name = {p.name: p for p in info.policies}
    assert by_name["router-autotune-block-unit"].enforcementLevel == ADVISORY
    assert by_name["rds-memory-budget"].enforcementLevel == MANDATORY
    schema = json_format.MessageToDict(by_name["rds-memory-budget"].configSchema)
    assert schema["properties"]["nvmeDrivesPerNode"]["default"] == 2
    assert schema["properties"]["rdsStagingBufferMib"]["default"] == 512
    assert by_name["npu-claim-matches-parallelism"].policy_type == analyzer_pb2.PolicyType.POLICY_TYPE_STACK
    assert by_name["pp-with-dp"].policy_type == analyzer_pb2.PolicyType.POLICY_TYPE_RESOURCE


def test_prod_render_has_no_mandatory_violation(pack, renders):
    stub, recorder = pack
    response = stub.AnalyzeStack(
        analyzer_pb2.AnalyzeStackRequest(resources=[analyzer_resource(m) for m in renders["prod-4p4d"]])
    )
    found = diagnostics(response)
    assert [d for d in found if d[1] == MANDATORY] == []
    assert [d[0] for d in found] == []
    for manifest in renders["prod-4p4d"]:
        reply = stub.Analyze(
            analyzer_pb2.AnalyzeRequest(
                type=resource_type(manifest),
                urn=urn(manifest),
                name=manifest["metadata"]["name"],
                properties=analyzer_resource(manifest).properties,
            )
        )
        assert diagnostics(reply) == [], manifest["metadata"]["name"]
    assert not [log for log in recorder.logs if "error" in log.lower()]


def test_stack_violation_names_the_edit_and_the_urn(pack, renders):
    stub, _ = pack
    manifests = copy.deepcopy(renders["prod-4p4d"])
    npu_request(manifests, DECODE_CLAIM)["count"] = 8
    set_arg(sidecar(manifests), "--vllm-port", "8001")
    response = stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[analyzer_resource(m) for m in manifests]))
    mandatory = {d[0]: d for d in diagnostics(response) if d[1] == MANDATORY}
    assert set(mandatory) == {"npu-claim-matches-parallelism", "sidecar-matches-decode"}
    decode_urn = urn(get(manifests, "Deployment", DECODE))
    claim = mandatory["npu-claim-matches-parallelism"]
    assert claim[2] == decode_urn
    assert "claims 8 NPUs" in claim[3] and "TP 1 x PP 1 x DP-local 4 = 4" in claim[3]
    assert (
        f"Deployment rebel100/{DECODE}: routing sidecar routing-proxy arg --vllm-port 8001"
        in mandatory["sidecar-matches-decode"][3]
    )


def test_resource_violation_and_config(pack, renders):
    """A resource policy on one Deployment (the `--flag=value` form), then the same after Configure
    changes the facts of a policy (a model of 3 layers) as `--policy-pack-config` would."""
    stub, _ = pack
    prefill = copy.deepcopy(get(renders["prod-4p4d"], "Deployment", PREFILL))
    manifests = [prefill]
    set_arg(engine(manifests, PREFILL), "--data-parallel-size", "2", equals=True)
    request = analyzer_pb2.AnalyzeRequest(
        type=resource_type(prefill), urn=urn(prefill), name=PREFILL, properties=analyzer_resource(prefill).properties
    )
    found = diagnostics(stub.Analyze(request))
    assert [(d[0], d[1]) for d in found] == [("pp-with-dp", MANDATORY)]
    assert "pipeline parallel size 4 together with data parallel size 2" in found[0][3]

    properties = struct_pb2.Struct()
    properties.update({"modelLayers": 3})
    stub.Configure(
        analyzer_pb2.ConfigureAnalyzerRequest(
            policyConfig={
                "parallelism-fits-model": analyzer_pb2.PolicyConfig(enforcementLevel=MANDATORY, properties=properties)
            }
        )
    )
    original = get(renders["prod-4p4d"], "Deployment", PREFILL)
    found = diagnostics(
        stub.Analyze(
            analyzer_pb2.AnalyzeRequest(
                type=resource_type(original),
                urn=urn(original),
                name=PREFILL,
                properties=analyzer_resource(original).properties,
            )
        )
    )
    assert [(d[0], d[1]) for d in found] == [("parallelism-fits-model", MANDATORY)]
    assert "62 layers" not in found[0][3] and "model's 3 layers (modelLayers)" in found[0][3]
    stub.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))


def test_plugin_info(pack):
    stub, _ = pack
    assert stub.GetPluginInfo(empty_pb2.Empty()).version


def test_value_unknown_in_preview_is_not_judged(pack, renders):
    """An image computed from another resource is unknown during preview: the SDK reports that the
    policies cannot run yet (advisory) instead of a verdict on a guessed value."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    stub, _ = pack
    prefill = copy.deepcopy(get(renders["prod-4p4d"], "Deployment", PREFILL))
    engine([prefill], PREFILL)["image"] = UNKNOWN_STRING_VALUE
    found = diagnostics(
        stub.Analyze(
            analyzer_pb2.AnalyzeRequest(
                type=resource_type(prefill),
                urn=urn(prefill),
                name=PREFILL,
                properties=analyzer_resource(prefill).properties,
            )
        )
    )
    assert found and all(d[1] == ADVISORY and "can't be known during preview" in d[3] for d in found)


def test_security_policies_are_advice_by_default_and_name_the_urn(pack, renders):
    """Without a config file the new security policies report as advice, on the offending resource's URN:
    a ClusterRoleBinding for the EPP (stack policy) and an EPP without seccomp (resource policy)."""
    stub, _ = pack
    manifests = copy.deepcopy(renders["prod-4p4d"])
    role, binding = get(manifests, "Role", EPP), get(manifests, "RoleBinding", EPP)
    role["kind"], binding["kind"], binding["roleRef"]["kind"] = "ClusterRole", "ClusterRoleBinding", "ClusterRole"
    del role["metadata"]["namespace"], binding["metadata"]["namespace"]
    found = [
        d
        for d in diagnostics(
            stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[analyzer_resource(m) for m in manifests]))
        )
        if d[0] == "rbac-least-privilege"
    ]
    assert [(d[1], d[2]) for d in found] == [(ADVISORY, urn(binding))]
    assert f"ClusterRoleBinding {EPP}: ClusterRoleBinding {EPP} binds ClusterRole {EPP}" in found[0][3]

    epp = copy.deepcopy(get(renders["prod-4p4d"], "Deployment", EPP))
    epp["spec"]["template"]["spec"].pop("securityContext")
    found = diagnostics(
        stub.Analyze(
            analyzer_pb2.AnalyzeRequest(
                type=resource_type(epp), urn=urn(epp), name=EPP, properties=analyzer_resource(epp).properties
            )
        )
    )
    assert [(d[0], d[1]) for d in found] == [("pod-security-context", ADVISORY)]
    assert "seccompProfile.type is unset" in found[0][3]
