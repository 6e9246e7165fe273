"""Run one real program in a network namespace of its own, with a discovery-only Kubernetes API beside it.

    unshare --net python3 tests/consumers/sandbox.py SPEC.json

The namespace has only a loopback interface (brought up here), so nothing the program does can leave the
machine or reach the local cluster's pod and service ranges; its ports (the EPP's :9002, the sidecar's :8000)
cannot collide with anyone's. The API stub answers discovery (/version, /api, /apis) with empty lists and
everything else with 404: the EPP finds no InferencePool CRD and no pods, which is all it needs to read its
configuration. Standard library only (it runs under the system python3 inside the namespace).

SPEC: {"argv": [...], "pass": "...", "fail": ["..."], "timeout": 20, "listen": [ports]}. The program runs until a
line contains `pass` or one of `fail` (or, with `listen`, until every port accepts a connection), then it is
stopped by its pid with SIGTERM (SIGKILL 10 s later). One JSON line goes to stdout: the outcome
("passed", "failed", "exited", "timeout"), the exit code after SIGTERM, and the program's log lines.
"""
from __future__ import annotations

import fcntl
import http.server
import json
import os
import pathlib
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


class Discovery(http.server.BaseHTTPRequestHandler):
    """A Kubernetes API that serves discovery only: no groups, no resources, nothing else."""

    BODIES = {
        "/version": {"major": "1", "minor": "35", "gitVersion": "v1.35.4", "platform": "linux/amd64"},
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    }

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        body = self.BODIES.get(self.path.split("?", 1)[0])
        status = 200 if body is not None else 404
        if body is None:
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def start_api(folder: pathlib.Path) -> pathlib.Path:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Discovery)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "stub",
        "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "stub", "user": {}}],
        "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": "default"}}],
    }))
    return kubeconfig


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
    return proc.wait()


def run(spec: dict) -> dict:
    loopback_up()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="consumer."))
    env = {**os.environ, "KUBECONFIG": str(start_api(folder)), "NAMESPACE": "default", "POD_NAME": "sandbox"}
    lines: list[str] = []
    proc = subprocess.Popen(spec["argv"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=folder)
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    deadline = time.monotonic() + float(spec.get("timeout", 20))
    outcome = "timeout"
    while time.monotonic() < deadline:
        text = "".join(lines)
        if spec.get("pass") and spec["pass"] in text:
            outcome = "passed"
        elif any(marker in text for marker in spec.get("fail", [])):
            outcome = "failed"
        elif spec.get("listen") and all(listening(p) for p in spec["listen"]):
            outcome = "passed"
        elif proc.poll() is not None:
            outcome = "exited"
        if outcome != "timeout":
            break
        time.sleep(0.1)
    code = stop(proc)
    time.sleep(0.2)  # the reader thread drains the last lines
    return {"outcome": outcome, "returncode": code, "log": [line.rstrip("\n") for line in lines]}


if __name__ == "__main__":
    print(json.dumps(run(json.loads(pathlib.Path(sys.argv[1]).read_text()))))
