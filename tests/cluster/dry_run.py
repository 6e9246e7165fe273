"""Server-side dry-run against the local cluster over plain HTTPS (urllib, the instance's CA and token), many
requests at once in a thread pool: a verdict of the real API server per object, in milliseconds.

    api = DryRun.from_kubeconfig(local_cluster.kubeconfig)
    verdicts = api.apply_all([obj, ...])   # [Verdict(accepted, status, message)], in order
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import pathlib
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import yaml

FIELD_MANAGER = "rebel100-tests"


@dataclasses.dataclass(frozen=True)
class Verdict:
    accepted: bool
    status: int
    message: str


class DryRun:
    def __init__(self, server: str, token: str, ca_file: str, workers: int = 8):
        if urllib.parse.urlsplit(server).hostname != "127.0.0.1":
            raise ValueError(f"refusing to talk to {server}: the tests only use a local instance on 127.0.0.1")
        self.server = server.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.context = ssl.create_default_context(cafile=ca_file)
        self.workers = workers
        self.sent = 0
        self._count = threading.Lock()
        self._resources: dict[tuple[str, str], tuple[str, bool]] | None = None

    @classmethod
    def from_kubeconfig(cls, path: pathlib.Path) -> DryRun:
        config = yaml.safe_load(pathlib.Path(path).read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        return cls(cluster["server"], user["token"], cluster["certificate-authority"])

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """One request; asked again (a few times, with a pause) when a busy server answers that it timed out or is
        throttling (429, 503, 504): those say nothing about the object."""
        for attempt in range(5):
            status, answer = self._request_once(method, path, body, content_type)
            if status not in (429, 503, 504):
                break
            time.sleep(1 + attempt)
        return status, answer

    def _request_once(self, method: str, path: str, body: bytes | None, content_type: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.server + path,
            data=body,
            method=method,
            headers={**self.headers, "Content-Type": content_type, "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=60) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            text = error.read()
            try:
                return error.code, json.loads(text)
            except json.JSONDecodeError:
                return error.code, {"message": text.decode(errors="replace")}

    def resources(self) -> dict[tuple[str, str], tuple[str, bool]]:
        """{(apiVersion, kind): (plural, namespaced)} from the server's discovery."""
        if self._resources is None:
            found: dict[tuple[str, str], tuple[str, bool]] = {}
            versions = ["v1"]
            _, groups = self.request("GET", "/apis")
            versions += [v["groupVersion"] for g in groups.get("groups", []) for v in g["versions"]]
            for version in versions:
                _, listing = self.request("GET", f"/api/{version}" if version == "v1" else f"/apis/{version}")
                for resource in listing.get("resources", []):
                    if "/" not in resource["name"]:
                        found[(version, resource["kind"])] = (resource["name"], resource["namespaced"])
            self._resources = found
        return self._resources

    def path(self, obj: dict, namespace: str = "default") -> str:
        plural, namespaced = self.resources()[(obj["apiVersion"], obj["kind"])]
        base = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
        if namespaced:
            base += f"/namespaces/{(obj.get('metadata') or {}).get('namespace') or namespace}"
        return f"{base}/{plural}"

    def apply(self, obj: dict) -> Verdict:
        """Server-side apply with dryRun=All and strict field validation: nothing is stored."""
        name = urllib.parse.quote((obj.get("metadata") or {}).get("name") or "", safe="")
        query = f"dryRun=All&fieldManager={FIELD_MANAGER}&force=true&fieldValidation=Strict"
        if not name:
            # A name the URL cannot carry: a dry-run create reports the same validation.
            status, body = self.request(
                "POST", f"{self.path(obj)}?dryRun=All&fieldValidation=Strict", json.dumps(obj).encode()
            )
        else:
            status, body = self.request(
                "PATCH", f"{self.path(obj)}/{name}?{query}", json.dumps(obj).encode(), "application/apply-patch+yaml"
            )
        with self._count:
            self.sent += 1
        return self._verdict(status, body)

    def create(self, obj: dict) -> Verdict:
        """A dry-run create (POST): the object's name travels in the body, whatever characters it has."""
        status, body = self.request(
            "POST", f"{self.path(obj)}?dryRun=All&fieldValidation=Strict", json.dumps(obj).encode()
        )
        with self._count:
            self.sent += 1
        return self._verdict(status, body)

    @staticmethod
    def _verdict(status: int, body: Any) -> Verdict:
        message = body.get("message", "") if isinstance(body, dict) else str(body)
        if status in (200, 201, 409):  # 409: the name exists, so it passed validation
            return Verdict(True, status, message)
        if status in (400, 422):
            return Verdict(False, status, message)
        raise AssertionError(f"unexpected answer {status} from the API server: {message}")

    def ensure_namespace(self, name: str) -> None:
        """Create a namespace for real (dry-run objects in a namespace that does not exist are refused)."""
        status, body = self.request(
            "POST",
            "/api/v1/namespaces",
            json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).encode(),
        )
        if status not in (201, 409):
            raise AssertionError(f"cannot create namespace {name!r}: {status} {body.get('message', body)}")

    def create_all(self, objects: list[dict]) -> list[Verdict]:
        with concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(self.create, objects))

    def apply_all(self, objects: list[dict]) -> list[Verdict]:
        with concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(self.apply, objects))
