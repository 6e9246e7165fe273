"""localsite.probes: a container's probes read with the API's defaults, the kubelet's thresholds, and the gRPC health
call checked against grpcio's own server (an implementation of its own)."""

from __future__ import annotations

import socket
from concurrent import futures

import grpc
import pytest

from localsite import probes

ENGINE = {
    "name": "vllm",
    "ports": [{"name": "http-0", "containerPort": 8200}],
    "startupProbe": {
        "httpGet": {"path": "/health", "port": 8200},
        "initialDelaySeconds": 15,
        "periodSeconds": 30,
        "timeoutSeconds": 5,
        "failureThreshold": 240,
    },
    "readinessProbe": {
        "exec": {"command": ["python3", "-c", "import sys", "8200"]},
        "periodSeconds": 10,
        "timeoutSeconds": 10,
        "failureThreshold": 3,
    },
    "livenessProbe": {"httpGet": {"path": "/health", "port": "http-0"}, "periodSeconds": 30},
    "lifecycle": {"preStop": {"sleep": {"seconds": 15}}},
}


def test_a_probe_with_the_api_defaults_and_scaled_timings():
    found = probes.probe({"tcpSocket": {"port": 8000}}, ENGINE, 1.0)
    assert found == probes.Probe(probes.TcpSocket(8000), 0.0, 10.0, 1.0, 1, 3)
    scaled = probes.probe(ENGINE["startupProbe"], ENGINE, 0.1)
    # Looked at ten times as often, borne as long: 3 s x 2400 = the render's 30 s x 240.
    assert scaled == probes.Probe(probes.HttpGet(8200, "/health", "HTTP"), 1.5, 3.0, 5.0, 1, 2400)
    assert probes.probe(None, ENGINE, 1.0) is None


def test_named_ports_grpc_exec_and_hooks():
    assert probes.probe(ENGINE["livenessProbe"], ENGINE, 1.0).action == probes.HttpGet(8200, "/health", "HTTP")
    epp = {"grpc": {"port": 9003, "service": "inference-extension"}, "periodSeconds": 5}
    assert probes.probe(epp, {}, 1.0).action == probes.Grpc(9003, "inference-extension")
    assert probes.probe(ENGINE["readinessProbe"], ENGINE, 1.0).action == probes.Exec(
        ("python3", "-c", "import sys", "8200")
    )
    assert probes.pre_stop(ENGINE) == probes.Sleep(15)  # the render's: not scaled
    assert probes.pre_stop({"lifecycle": {"preStop": {"exec": {"command": ["sleep", "20"]}}}}) == probes.Sleep(20)
    assert probes.pre_stop({"name": "x"}) is None


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"exec": {"command": ["/opt/check"]}}, "exec of '/opt/check'"),
        ({"httpGet": {"port": "metrics"}}, "port 'metrics'"),
        ({"unknownHandler": {}}, "none of the kinds"),
    ],
)
def test_what_the_site_cannot_run_is_refused_when_read(spec, why):
    with pytest.raises(probes.Unsupported, match=why):
        probes.probe(spec, ENGINE, 1.0)


def test_thresholds_decide_the_verdict():
    prober = probes.Prober(probes.Probe(probes.TcpSocket(1), 0, 10, 1, success_threshold=2, failure_threshold=3), 0)
    assert prober.record(True, 0) is None  # one success of two
    assert prober.record(True, 10) is True
    assert prober.next_at == 20
    assert prober.record(False, 20) is True  # one failure of three: still ready
    assert prober.record(False, 30) is True
    assert prober.record(False, 40) is False
    assert prober.record(True, 50) is False  # one success of two again
    assert prober.record(True, 60) is True


def test_startup_gates_readiness_and_liveness():
    results: dict[type, list[bool]] = {
        probes.HttpGet: [False, True, True, True],
        probes.Exec: [True, False, False, False],
    }

    def check(action, timeout):
        return results[type(action)].pop(0)

    state = probes.ContainerProbes.begin(ENGINE, 1.0, now=0.0)
    state.step(check, 10.0)  # before the startup probe's initial delay: nothing runs
    assert results[probes.HttpGet] == [False, True, True, True] and not state.started
    state.step(check, 15.0)  # startup fails once (of 240)
    state.step(check, 30.0)  # not due again until 45
    assert not state.started and state.failed is None
    state.step(check, 45.0)  # startup passes; readiness runs at once
    assert state.started and not state.ready
    state.step(check, 45.0)
    assert state.ready  # readiness passed once; liveness passed too
    for at in (55.0, 65.0, 75.0):
        state.step(check, at)
    assert not state.ready and state.failed is None  # three readiness failures: not ready, not restarted


def test_a_container_without_probes_is_ready_once_it_runs():
    state = probes.ContainerProbes.begin({"name": "plain"}, 1.0, now=0.0)
    assert state.started and not state.ready
    state.step(lambda action, timeout: pytest.fail("no probe to run"), 0.0)
    assert state.ready


def test_health_status_reads_the_response_message():
    assert probes.health_status(b"\x08\x01") == probes.SERVING
    assert probes.health_status(b"\x08\x02") == 2  # NOT_SERVING
    assert probes.health_status(b"") == 0  # UNKNOWN
    assert probes.health_status(b"\x12\x03abc\x08\x01") == probes.SERVING  # an unknown field first


class _Health(grpc.GenericRpcHandler):
    """grpc.health.v1.Health/Check answering from a table, as an independent server implementation."""

    def __init__(self, table: dict[str, int]):
        self.table = table

    def service(self, details):
        if details.method != "/grpc.health.v1.Health/Check":
            return None

        def check(request: bytes, context):
            service = request[2:].decode() if request else ""
            if service not in self.table:
                context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
            return b"\x08" + bytes([self.table[service]])

        return grpc.unary_unary_rpc_method_handler(check)


@pytest.fixture
def health_server():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    table: dict[str, int] = {}
    server.add_generic_rpc_handlers((_Health(table),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port, table
    server.stop(None)


def ask(port: int, service: str) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        return probes.grpc_health_serving(sock, f"127.0.0.1:{port}", service, timeout=2)


def test_grpc_health_against_grpcio(health_server):
    port, table = health_server
    table["inference-extension"] = probes.SERVING
    assert ask(port, "inference-extension")
    table["inference-extension"] = 2  # NOT_SERVING: a standby EPP, or one draining
    assert not ask(port, "inference-extension")
    assert not ask(port, "another")  # NOT_FOUND: an error status, no message
    table[""] = probes.SERVING
    assert ask(port, "")
