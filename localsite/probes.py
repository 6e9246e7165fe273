"""A pod's probes and preStop hooks as the kubelet runs them, for the local site's node agent (localsite/agent.py):
read from the container spec with the API's defaults, and run against the pod's programs from the site's network
(httpGet, tcpSocket and grpc at the pod IP, as the kubelet dials them) or inside the pod's network namespace (exec).

The site may scale the probes' clock down (`scale`, the agent's `--time-scale`): periods and initial delays are
multiplied by it, so a pod is seen Ready within a second instead of ten; failure thresholds are divided by it, so how
long a failing probe is borne (period x failureThreshold: a program's start, a busy moment) stays the render's.
Timeouts, preStop sleeps and grace periods are not scaled: they stand for how long the programs take (to answer, to
finish the requests they hold), which is no shorter on the site. Scaled, a 12 s startup budget restarted an EPP whose
ext_proc port opens after its RSA-4096 certificate (16 s on a busy machine), and a 1.5 s preStop let a decode engine
stop while its sidecar still waited on a 4.7 s prefill leg of a request the EPP had given it before the deletion.

exec runs the container's command on this machine inside the pod's network namespace, but only where the command is
one the site knows to be a probe of the render (`python3 -c`, `sh -c`, `sleep`): an image's other binaries are not
here. Anything else is `Unsupported`, and the agent leaves the pod not Ready (as a probe that cannot run fails).
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from localsite import netns

# The API's defaults for a probe (k8s.io/api core/v1 Probe).
PERIOD_DEFAULT = 10.0
TIMEOUT_DEFAULT = 1.0
FAILURE_THRESHOLD_DEFAULT = 3
SUCCESS_THRESHOLD_DEFAULT = 1
# The programs an exec probe or hook may name (argv[0]), and what runs them here.
EXEC_PROGRAMS = {"python3": sys.executable, "sh": "/bin/sh", "sleep": "/bin/sleep"}


class Unsupported(ValueError):
    """The site cannot run this probe or hook; the message says why."""


@dataclass(frozen=True)
class Target:
    """Where a check runs: the site's namespace (dialling the pod IP) and the pod's own."""

    site: netns.Namespace
    pod: netns.Namespace
    ip: str


@dataclass(frozen=True)
class HttpGet:
    port: int
    path: str
    scheme: str

    def check(self, target: Target, timeout: float) -> bool:
        """A status of 200-399, as the kubelet's HTTP prober counts success."""
        if self.scheme != "HTTP":
            raise Unsupported(f"httpGet with scheme {self.scheme}")
        conn = http.client.HTTPConnection(target.ip, self.port, timeout=timeout)
        try:
            conn.sock = netns.connect_in(target.site, target.ip, self.port, timeout)
            conn.request("GET", self.path, headers={"User-Agent": "kube-probe/1.35", "Accept": "*/*"})
            status = conn.getresponse().status
        except OSError:
            return False
        finally:
            conn.close()
        return 200 <= status < 400


@dataclass(frozen=True)
class TcpSocket:
    port: int

    def check(self, target: Target, timeout: float) -> bool:
        try:
            netns.connect_in(target.site, target.ip, self.port, timeout).close()
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class Grpc:
    """The gRPC health protocol (grpc.health.v1.Health/Check) over cleartext HTTP/2, as the kubelet's gRPC prober
    asks it: SERVING is success, anything else (NOT_SERVING, an error status, no answer) is not."""

    port: int
    service: str

    def check(self, target: Target, timeout: float) -> bool:
        try:
            sock = netns.connect_in(target.site, target.ip, self.port, timeout)
        except OSError:
            return False
        with contextlib.closing(sock):
            try:
                return grpc_health_serving(sock, f"{target.ip}:{self.port}", self.service, timeout)
            except (OSError, ValueError):
                return False


@dataclass(frozen=True)
class Exec:
    argv: tuple[str, ...]

    def check(self, target: Target, timeout: float) -> bool:
        """Exit code 0 within the timeout."""
        try:
            proc = subprocess.run(
                target.pod.command(exec_argv(self.argv)),
                capture_output=True,
                timeout=timeout,
                env={"PATH": "/usr/bin:/bin"},
            )
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0


@dataclass(frozen=True)
class Sleep:
    seconds: float

    def check(self, target: Target, timeout: float) -> bool:
        time.sleep(self.seconds)
        return True


Action = HttpGet | TcpSocket | Grpc | Exec | Sleep


@dataclass(frozen=True)
class Probe:
    """One probe of a container, its timings already scaled."""

    action: Action
    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int


def exec_argv(argv: tuple[str, ...]) -> list[str]:
    if not argv or argv[0] not in EXEC_PROGRAMS:
        raise Unsupported(f"exec of {argv[0] if argv else '(nothing)'!r} (the site runs {', '.join(EXEC_PROGRAMS)})")
    return [EXEC_PROGRAMS[argv[0]], *argv[1:]]


def port_of(value: object, container: dict) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(value, int):
        return value
    for port in container.get("ports") or []:
        if port.get("name") == value:
            return int(port["containerPort"])
    raise Unsupported(f"port {value!r} is neither a number nor a port of container {container.get('name')}")


def action(spec: dict, container: dict) -> Action:
    """The handler of a probe or lifecycle hook."""
    if "httpGet" in spec:
        get = spec["httpGet"]
        return HttpGet(port_of(get["port"], container), get.get("path") or "/", get.get("scheme") or "HTTP")
    if "tcpSocket" in spec:
        return TcpSocket(port_of(spec["tcpSocket"]["port"], container))
    if "grpc" in spec:
        return Grpc(int(spec["grpc"]["port"]), spec["grpc"].get("service") or "")
    if "sleep" in spec:
        return Sleep(float(spec["sleep"]["seconds"]))
    if "exec" in spec:
        argv = tuple(spec["exec"].get("command") or ())
        if len(argv) == 2 and argv[0] == "sleep":  # the common preStop, without a process
            with contextlib.suppress(ValueError):
                return Sleep(float(argv[1]))
        exec_argv(argv)  # refused now, not at its first run
        return Exec(argv)
    raise Unsupported(f"a handler of none of the kinds the site runs: {sorted(spec)}")


def probe(spec: dict | None, container: dict, scale: float) -> Probe | None:
    """The container's probe `spec` (None: the container has none), with the API's defaults and scaled timings."""
    if not spec:
        return None
    return Probe(
        action(spec, container),
        initial_delay=float(spec.get("initialDelaySeconds", 0)) * scale,
        period=float(spec.get("periodSeconds", PERIOD_DEFAULT)) * scale,
        timeout=float(spec.get("timeoutSeconds", TIMEOUT_DEFAULT)),
        success_threshold=int(spec.get("successThreshold", SUCCESS_THRESHOLD_DEFAULT)),
        failure_threshold=math.ceil(int(spec.get("failureThreshold", FAILURE_THRESHOLD_DEFAULT)) / scale),
    )


def pre_stop(container: dict) -> Action | None:
    hook = ((container.get("lifecycle") or {}).get("preStop")) or None
    return action(hook, container) if hook else None


@dataclass
class Prober:
    """A probe's state in one run of its container, as the kubelet keeps it: when it runs next, its consecutive
    results, and its verdict (None until the thresholds decide one)."""

    probe: Probe
    next_at: float
    successes: int = 0
    failures: int = 0
    verdict: bool | None = None

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, ok: bool, now: float) -> bool | None:
        """Count one result; the verdict when a threshold is reached (the last verdict otherwise)."""
        self.next_at = now + self.probe.period
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.probe.success_threshold:
                self.verdict = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.failures >= self.probe.failure_threshold:
                self.verdict = False
        return self.verdict


@dataclass
class ContainerProbes:
    """A container's three probes in one run of its program (made anew when the program starts again)."""

    startup: Prober | None
    readiness: Prober | None
    liveness: Prober | None
    started: bool = False
    ready: bool = False
    failed: str | None = None  # why the kubelet would kill the container (startup or liveness probe failed)
    log: list[str] = field(default_factory=list)

    @classmethod
    def begin(cls, container: dict, scale: float, now: float) -> ContainerProbes:
        def made(key: str) -> Prober | None:
            found = probe(container.get(key), container, scale)
            return Prober(found, now + found.initial_delay) if found else None

        startup = made("startupProbe")
        return cls(startup, made("readinessProbe"), made("livenessProbe"), started=startup is None)

    def step(self, run_check: Callable[[Action, float], bool], now: float) -> None:
        """Run the probes that are due (startup until it passes; readiness and liveness after), as the kubelet."""
        if not self.started:
            assert self.startup is not None
            if not self.startup.due(now):
                return
            verdict = self.startup.record(run_check(self.startup.probe.action, self.startup.probe.timeout), now)
            if verdict is True:
                self.started = True
                for prober in (self.readiness, self.liveness):  # they begin once the container has started
                    if prober is not None:
                        prober.next_at = max(prober.next_at, now)
            elif verdict is False:
                self.failed = "startup probe failed"
            return
        if self.readiness is None:
            self.ready = True
        elif self.readiness.due(now):
            self.ready = bool(
                self.readiness.record(run_check(self.readiness.probe.action, self.readiness.probe.timeout), now)
            )
        live = self.liveness
        if live is not None and live.due(now):
            alive = run_check(live.probe.action, live.probe.timeout)
            if live.record(alive, now) is False:
                self.failed = "liveness probe failed"


# --- gRPC health over cleartext HTTP/2 (RFC 9113 frames; the request's headers as literals, no Huffman) ---------
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
_END_STREAM, _END_HEADERS, _ACK = 0x1, 0x4, 0x1
SERVING = 1  # grpc.health.v1.HealthCheckResponse.ServingStatus


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing, new name, no Huffman coding (RFC 7541 6.2.2)."""

    def string(text: str) -> bytes:
        data = text.encode()
        return _integer(len(data), 7, 0x00) + data

    return b"\x00" + string(name) + string(value)


def _integer(value: int, prefix_bits: int, first: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out, value = bytearray([first | limit]), value - limit
    while value >= 128:
        out.append((value % 128) + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def health_status(message: bytes) -> int:
    """The `status` field (1, varint) of a HealthCheckResponse; 0 (UNKNOWN) when absent."""
    at = 0
    while at < len(message):
        key, at = _varint(message, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(message, at)
            if number == 1:
                return value
        elif wire == 2:
            length, at = _varint(message, at)
            at += length
        else:
            raise ValueError(f"wire type {wire} in a HealthCheckResponse")
    return 0


def grpc_health_serving(sock: socket.socket, authority: str, service: str, timeout: float) -> bool:
    """One Health/Check call on a connected socket: True when the answer's status is SERVING."""
    deadline = time.monotonic() + timeout
    body = service.encode()
    request = (b"\x0a" + _integer(len(body), 7, 0) + body) if body else b""
    headers = b"".join(
        _literal(name, value)
        for name, value in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/grpc.health.v1.Health/Check"),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("user-agent", "kube-probe/1.35"),
        )
    )
    sock.sendall(
        _PREFACE
        + _frame(_SETTINGS, 0, 0)
        + _frame(_HEADERS, _END_HEADERS, 1, headers)
        + _frame(_DATA, _END_STREAM, 1, b"\x00" + struct.pack(">I", len(request)) + request)
    )
    buffered, message = b"", b""
    while True:
        while len(buffered) < 9 or len(buffered) < 9 + int.from_bytes(buffered[:3], "big"):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                return False
            buffered += chunk
        length, kind, flags = int.from_bytes(buffered[:3], "big"), buffered[3], buffered[4]
        stream = int.from_bytes(buffered[5:9], "big") & 0x7FFFFFFF
        payload, buffered = buffered[9 : 9 + length], buffered[9 + length :]
        if kind == _SETTINGS and not flags & _ACK:
            sock.sendall(_frame(_SETTINGS, _ACK, 0))
        elif kind == _PING and not flags & _ACK:
            sock.sendall(_frame(_PING, _ACK, 0, payload))
        elif kind in (_GOAWAY, _RST_STREAM) and (kind == _GOAWAY or stream == 1):
            return False
        elif kind == _DATA and stream == 1:
            message += payload
            if len(message) >= 5 and len(message) >= 5 + int.from_bytes(message[1:5], "big"):
                return health_status(message[5 : 5 + int.from_bytes(message[1:5], "big")]) == SERVING
        elif kind == _HEADERS and stream == 1 and flags & _END_STREAM:
            return False  # trailers only: an error status, no message
