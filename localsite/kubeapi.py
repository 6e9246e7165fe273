"""The few Kubernetes API calls the local site makes, over the admin kubeconfig scripts/cluster writes (a bearer
token and a CA file). Standard library and pyyaml only."""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import yaml


def now() -> str:
    """This moment as the API writes a timestamp (RFC 3339, seconds, UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Client:
    def __init__(self, kubeconfig: str):
        with open(kubeconfig) as f:
            config = yaml.safe_load(f)
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = cluster["server"].rstrip("/")
        self.ca_file = cluster["certificate-authority"]
        with open(self.ca_file, "rb") as f:
            self.ca_pem = f.read()
        self.token = user["token"]
        self.ssl = ssl.create_default_context(cafile=self.ca_file)

    def request(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        timeout: float = 10,
        content_type: str = "application/json",
    ) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": content_type,
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raise ApiError(
                err.code, f"{method} {path}: {err.code} {err.read()[:300].decode(errors='replace')}"
            ) from None

    def apply(self, path: str, obj: dict) -> Any:
        """Server-side apply of `obj` at `path` (JSON is YAML), as the site's own field manager."""
        return self.request(
            "PATCH",
            f"{path}?fieldManager=rebel100-localsite&force=true",
            obj,
            content_type="application/apply-patch+yaml",
        )

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def items(self, path: str) -> list[dict]:
        return self.get(path).get("items") or []

    def service_account_token(self, namespace: str, name: str, seconds: int = 86400) -> str:
        """A token of the ServiceAccount (TokenRequest), what the kubelet mounts into a pod."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        return self.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)["status"][
            "token"
        ]

    def kubeconfig_for(self, token: str, server: str, server_name: str) -> str:
        """A kubeconfig for a program of the site: `server` as seen from its pod, the apiserver's CA, the token."""
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "site",
                "clusters": [
                    {
                        "name": "site",
                        "cluster": {
                            "server": server,
                            "tls-server-name": server_name,
                            "certificate-authority-data": base64.b64encode(self.ca_pem).decode(),
                        },
                    }
                ],
                "users": [{"name": "site", "user": {"token": token}}],
                "contexts": [{"name": "site", "context": {"cluster": "site", "user": "site"}}],
            }
        )

    def event(self, pod: dict, reason: str, message: str, kind: str = "Warning") -> None:
        """An Event on the pod, as the kubelet writes for a failed image pull (`kubectl describe pod` shows it)."""
        meta = pod["metadata"]
        stamp = now()
        self.request(
            "POST",
            f"/api/v1/namespaces/{meta['namespace']}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
                    "apiVersion": "v1",
                },
                "reason": reason,
                "message": message,
                "type": kind,
                "source": {"component": "rebel100-localsite"},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            },
        )
