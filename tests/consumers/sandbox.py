"""Run one real program in a network namespace of its own, with a discovery-only Kubernetes API beside it.

    unshare --net python3 tests/consumers/sandbox.py SPEC.json

The namespace has only a loopback interface (brought up here), so nothing the program does can leave the
machine or reach the local cluster's pod and service ranges; its ports (the EPP's :9002, the sidecar's :8000)
cannot collide with anyone's. The API stub answers discovery (/version, /api, /apis) with empty lists and
everything else with 404: the EPP finds no InferencePool CRD and no pods, which is all it needs to read its
configuration. Standard library only (it runs under the system python3 inside the namespace).

Objects the spec gives (`objects`) are also served as a namespaced collection: a list (with a `metadata.name=`
field selector and an equality label selector, which is refused as the API server refuses it: 400 on a value that is
no label value) and a watch: a streaming list (`sendInitialEvents=true`, as client-go's reflectors ask) sends the
objects, then the bookmark that ends the initial events; any watch then stays open and sends nothing. A sidecar with
SSRF protection lists and watches its InferencePool before it listens; pods are an empty list.

SPEC: {"argv": [...], "pass": "...", "fail": ["..."], "timeout": 20, "listen": [ports], "objects": [...]}. The
program runs until a line contains `pass` or one of `fail` (or, with `listen`, until every port accepts a
connection), then it is stopped by its pid with SIGTERM (SIGKILL 10 s later). One JSON line goes to stdout: the
outcome ("passed", "failed", "exited", "timeout"), the exit code after SIGTERM, the program's log lines and the
API requests the stub answered (`requests`: method, path and status).
"""

from __future__ import annotations

import fcntl
import http.server
import json
import os
import pathlib
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import ClassVar

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


class Discovery(http.server.BaseHTTPRequestHandler):
    """A Kubernetes API that serves discovery only: no groups, no resources, nothing else."""

    BODIES: ClassVar[dict[str, dict]] = {
        "/version": {"major": "1", "minor": "35", "gitVersion": "v1.35.4", "platform": "linux/amd64"},
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    }

    OBJECTS: ClassVar[
        list[dict]
    ] = []  # served as collections: /api/v1/... and /apis/GROUP/VERSION/namespaces/NS/RESOURCE
    REQUESTS: ClassVar[list[dict]] = []
    WATCH_SECONDS = 60.0  # a watch stays open, sending nothing, longer than any run

    def do_GET(self) -> None:  # the base class's name
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        status, body = (200, self.BODIES[url.path]) if url.path in self.BODIES else self.collection(url.path, query)
        self.REQUESTS.append({"method": "GET", "path": self.path, "status": status})
        if status == 200 and query.get("watch", [""])[0] in ("true", "1"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if query.get("sendInitialEvents", [""])[0] == "true":  # a streaming list (client-go's WatchList)
                for item in body["items"]:
                    self.chunk({"type": "ADDED", "object": item})
                self.chunk(
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": body["kind"].removesuffix("List"),
                            "apiVersion": body["apiVersion"],
                            "metadata": {"resourceVersion": "1", "annotations": {"k8s.io/initial-events-end": "true"}},
                        },
                    }
                )
            self.wfile.flush()
            time.sleep(self.WATCH_SECONDS)
            return
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def chunk(self, event: dict) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def log_message(self, *args) -> None:
        pass

    @classmethod
    def collection(cls, path: str, query: dict) -> tuple[int, dict]:
        """The objects of a namespaced collection path (with objects to serve, pods too: none)."""
        found = re.fullmatch(
            r"/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/namespaces/(?P<ns>[^/]+)"
            r"/(?P<resource>[a-z]+)",
            path,
        )
        if not found:
            return 404, failure(404, "NotFound", "not served by the stub")
        api_version = found["core"] or f"{found['group']}/{found['version']}"
        kinds = {o["kind"] for o in cls.OBJECTS if o.get("apiVersion") == api_version} | (
            {"Pod"} if found["core"] and cls.OBJECTS else set()
        )
        kind = next((k for k in kinds if k.lower() + "s" == found["resource"]), None)
        if kind is None:
            return 404, failure(404, "NotFound", f"{found['resource']} is not served by the stub")
        items = [
            o
            for o in cls.OBJECTS
            if o.get("apiVersion") == api_version
            and o["kind"] == kind
            and o["metadata"].get("namespace") == found["ns"]
        ]
        for selector in query.get("fieldSelector", []):
            name = selector.removeprefix("metadata.name=")
            items = [o for o in items if o["metadata"]["name"] == name]
        for selector in query.get("labelSelector", []):
            pairs = [term.split("=", 1) for term in selector.split(",") if term]
            bad = [v for _, v in pairs if not re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", v)]
            if any(len(pair) != 2 for pair in pairs) or bad:
                return 400, failure(400, "BadRequest", f"unable to parse requirement: {selector}")
            items = [o for o in items if all(o["metadata"].get("labels", {}).get(k) == v for k, v in pairs)]
        return 200, {
            "kind": f"{kind}List",
            "apiVersion": api_version,
            "metadata": {"resourceVersion": "1"},
            "items": [
                {**o, "metadata": {"resourceVersion": "1", "uid": o["metadata"]["name"], **o["metadata"]}}
                for o in items
            ],
        }


def failure(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }


def start_api(folder: pathlib.Path) -> pathlib.Path:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Discovery)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "stub",
                "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
                "users": [{"name": "stub", "user": {}}],
                "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": "default"}}],
            }
        )
    )
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
    Discovery.OBJECTS = list(spec.get("objects") or [])
    # The sandbox's own folder (the program's kubeconfig and working directory), removed when the run ends.
    with tempfile.TemporaryDirectory(prefix="consumer.") as tmp:
        return _run_in(spec, pathlib.Path(tmp))


def _run_in(spec: dict, folder: pathlib.Path) -> dict:
    env = {**os.environ, "KUBECONFIG": str(start_api(folder)), "NAMESPACE": "default", "POD_NAME": "sandbox"}
    lines: list[str] = []
    proc = subprocess.Popen(
        spec["argv"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=folder
    )
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
    return {
        "outcome": outcome,
        "returncode": code,
        "log": [line.rstrip("\n") for line in lines],
        "requests": list(Discovery.REQUESTS),
    }


if __name__ == "__main__":
    print(json.dumps(run(json.loads(pathlib.Path(sys.argv[1]).read_text()))))
