"""A stack served on a local site of its own, for the request tests (tests/localsite) and `make bench`: a control
plane (scripts/cluster, in a folder of its own, pod IPs on loopback), the stack's offline render applied with
kubectl (deploying it is what tests/cluster proves; here the requests are judged), and `python -m localsite run`.
Everything is stopped by pid on exit; `leftovers()` names anything recorded that still runs."""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import selectors
import signal
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from core.stackfile import stack_file
from host import ports
from localsite import netns, procs
from localsite.agent import is_ready
from objects.stack import placeholder_certificate
from stacks.certificate import self_signed

PROJECT = pathlib.Path(__file__).resolve().parent.parent
CLUSTER = PROJECT / "scripts" / "cluster"
READY_TIMEOUT = 180.0
# The site's clock for the render's probe periods and initial delays (`localsite run --time-scale`): a tenth, so that a
# new pod is seen Ready within a second or two (preStop sleeps and grace periods stay the render's).
TIME_SCALE = 0.1


@dataclass
class Answer:
    """An HTTP answer through the gateway, with the headers the tests read."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def destination(self) -> str:
        """The endpoint the gateway forwarded to (the EPP's pick), as the gateway role reports it."""
        return self.headers.get("x-gateway-destination-endpoint", "")

    @property
    def prefiller(self) -> str:
        """The prefill endpoint the EPP chose (empty: decode-only), as the gateway role reports it."""
        return self.headers.get("x-gateway-prefiller-host-port", "")

    @property
    def pod(self) -> str:
        """The pod whose engine answered (the simulator's own header)."""
        return self.headers.get("x-inference-pod", "")


class ServedSite:
    """Start with `with ServedSite(folder, stack, namespace, sim_args) as site:`."""

    def __init__(
        self,
        folder: pathlib.Path,
        stack: str,
        namespace: str = "rebel100",
        sim_args: tuple[str, ...] = (),
        render: pathlib.Path | None = None,
        config_file: pathlib.Path | None = None,
        render_edit: Callable[[pathlib.Path], None] | None = None,
        probe_headers: Callable[[ServedSite], dict[str, str]] | None = None,
        time_scale: float = TIME_SCALE,
        engine_start_delay: float = 0.0,
    ):
        self.folder = folder
        self.stack = stack
        self.namespace = namespace
        self.sim_args = sim_args
        self.render = render
        self.config_file = config_file  # a stack file other than Pulumi.<stack>.yaml (`stacks render --config-file`)
        self.render_edit = render_edit  # a change to the render folder before it is applied (a bench's yardstick)
        self.probe_headers = probe_headers  # what the site's first request carries, for a router edited to need it
        self.time_scale = time_scale
        self.engine_start_delay = engine_start_delay
        self.cluster_dir = folder / "cluster"
        self.site_dir = folder / "site"
        self.kubeconfig: pathlib.Path | None = None
        self.kubectl_path: str | None = None
        self.process: subprocess.Popen | None = None
        self.base_url = ""

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> ServedSite:
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        proc = subprocess.run(
            [
                str(CLUSTER),
                "start",
                "--dir",
                str(self.cluster_dir),
                "--port",
                str(ports.random_free_block(6)),
                "--kubelet-namespace",
                self.namespace,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"scripts/cluster start failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        self.kubeconfig = pathlib.Path(proc.stdout.strip().splitlines()[-1])
        self.kubectl_path = str(
            pathlib.Path(json.loads((self.cluster_dir / "instance.json").read_text())["bin_dir"]) / "kubectl"
        )
        self.deploy()
        self.wait_for("every engine pod Running with an IP", self.engines_running)
        self.site_dir.mkdir(parents=True, exist_ok=True)
        with open(self.site_dir / "site.log", "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "localsite",
                    "run",
                    "--kubeconfig",
                    str(self.kubeconfig),
                    "--namespace",
                    self.namespace,
                    "--dir",
                    str(self.site_dir),
                    *[f"--sim-arg={a}" for a in self.sim_args],
                    "--kubelet",
                    f"--time-scale={self.time_scale}",
                    f"--engine-start-delay={self.engine_start_delay}",
                ],
                cwd=PROJECT,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                text=True,
            )
        self.base_url = self._first_line(READY_TIMEOUT)
        if not self.base_url.startswith("http://127."):
            raise RuntimeError(f"the site did not start serving: {self.base_url!r}\n{self.log()}")
        self.wait_for("a first answer through the gateway", self._answers)
        # The gateway answers once one decode and one prefill engine serve; a test that reads every engine (its
        # metrics, its latency) must find each one listening (CI: one prefill engine Ready 12 s after the answer).
        self.wait_for("every pod Ready", self.every_pod_ready)

    def _first_line(self, timeout: float) -> str:
        """The site's first stdout line (its base URL, printed once it serves), or "" after `timeout` or its exit."""
        assert self.process is not None and self.process.stdout is not None  # started, its stdout a pipe
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if selector.select(timeout):
                return self.process.stdout.readline().strip()
        return ""

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        procs.stop_recorded(self.site_dir)
        subprocess.run([str(CLUSTER), "stop", "--dir", str(self.cluster_dir)], capture_output=True, timeout=120)

    def leftovers(self) -> list[str]:
        """Processes of the site or its cluster still running (after exit: none expected)."""
        found = procs.recorded(self.site_dir) + procs.recorded(self.cluster_dir)
        return [f"{p.name} (pid {p.pid})" for p in found]

    # --- the cluster -------------------------------------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        assert self.kubectl_path is not None, "the site has not started"
        proc = subprocess.run(
            [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        return proc

    def get(self, *args: str) -> Any:
        found = json.loads(self.kubectl("get", *args, f"--namespace={self.namespace}", "-o", "json").stdout)
        return found["items"] if found.get("kind", "").endswith("List") else found

    def deploy(self) -> None:
        """The stack's offline render applied in the order Pulumi creates it where it matters: the namespace, then
        ServiceAccounts (the token controller deletes a token Secret whose account does not exist yet), then the
        rest."""
        out = self.render or self.folder / "render"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "stacks",
                "render",
                self.stack,
                "--out",
                str(out),
                *(["--config-file", str(self.config_file)] if self.config_file else []),
            ],
            cwd=PROJECT,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"python -m stacks render {self.stack} failed:\n{proc.stdout}{proc.stderr}")
        if self.render_edit is not None:
            self.render_edit(out)
        files = {f: (yaml.safe_load(f.read_text()) or {}).get("kind") for f in sorted(out.rglob("*.yaml"))}
        for f in [f for f, kind in files.items() if kind == "Secret"]:
            if not self.certificate_made(f):
                del files[f]
        for wave in ({"Namespace"}, {"ServiceAccount"}, None):
            batch = [
                f
                for f, kind in files.items()
                if (kind in wave if wave else kind not in ("Namespace", "ServiceAccount"))
            ]
            if batch:
                self.kubectl("apply", "--server-side", *[f"--filename={f}" for f in batch])

    def certificate_made(self, path: pathlib.Path) -> bool:
        """What `pulumi up` does with the EPP's certificate Secret, whose data the offline render leaves a placeholder
        (objects.stack placeholder_certificate): made at its creation (written into the file, True: apply it), kept
        after (False: leave it out). Any other Secret: True."""
        secret = yaml.safe_load(path.read_text())
        if secret.get("type") != "kubernetes.io/tls" or secret.get("data") != placeholder_certificate():
            return True
        meta = secret["metadata"]
        if self.kubectl("get", "secret", meta["name"], f"--namespace={meta['namespace']}", check=False).returncode == 0:
            return False
        secret["data"] = self_signed(meta["name"].removesuffix("-tls"), meta["namespace"])
        path.write_text(yaml.safe_dump(secret))
        return True

    def pods(self, role: str | None = None) -> list[dict]:
        return [
            p
            for p in self.get("pods")
            if role is None or (p["metadata"].get("labels") or {}).get("llm-d.ai/role") == role
        ]

    def ips(self, role: str) -> dict[str, str]:
        """Pod IP -> name of the role's Running pods."""
        return {
            p["status"]["podIP"]: p["metadata"]["name"]
            for p in self.pods(role)
            if p["status"].get("phase") == "Running" and p["status"].get("podIP")
        }

    def engines_running(self) -> bool:
        engines = self.pods("prefill") + self.pods("decode")
        return bool(engines) and all(
            p["status"].get("phase") == "Running" and p["status"].get("podIP") for p in engines
        )

    def every_pod_ready(self) -> bool:
        """Every pod of the stack not run to completion is Ready, as the site's kubelet reports it."""
        pods = [p for p in self.pods() if p["status"].get("phase") != "Succeeded"]
        return bool(pods) and all(is_ready(p) for p in pods)

    # --- the site ----------------------------------------------------------------------------------------------
    def status(self) -> dict:
        return json.loads((self.site_dir / "status.json").read_text())

    def served(self) -> dict[str, dict]:
        """The pods the site runs programs for, with their programs' pids."""
        return self.status()["pods"]

    def simulator_endpoints(self, sim_binary: str) -> list[tuple[str, int]]:
        """(pod IP, port) of every engine rank the site serves with the simulator `sim_binary`."""
        return [
            (pod["ip"], port)
            for pod in self.served().values()
            if pod["ip"]
            for program in pod["programs"].values()
            if program.get("binary") == sim_binary
            for port in program.get("ports", ())
        ]

    def engine_ranks(self, sim_binary: str, role: str) -> list[tuple[str, int]]:
        """(pod IP, port) of every rank of the role's Running engines, in pod-major order."""
        role_ips = self.ips(role)
        return sorted((ip, port) for ip, port in self.simulator_endpoints(sim_binary) if ip in role_ips)

    def set_engine_latency(self, sim_binary: str, time_to_first_token: str) -> None:
        """Every simulated engine rank answers after `time_to_first_token` (e.g. "100ms"; "0s": at once), set through
        the simulator's own admin API (llm-d-inference-sim: POST /admin/config rebuilds its latency model at once)."""
        for ip, port in self.simulator_endpoints(sim_binary):
            conn = self.connection_in_site(ip, port)
            try:
                conn.request(
                    "POST",
                    "/admin/config",
                    json.dumps({"time-to-first-token": time_to_first_token}),
                    {"Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                body = resp.read()
            finally:
                conn.close()
            if resp.status != 200:
                raise RuntimeError(
                    f"the simulator at {ip}:{port} refused the latency {time_to_first_token}: {body[:200]!r}"
                )

    def site_ns(self) -> netns.Namespace:
        pid = self.status()["site_netns_pid"]
        return netns.Namespace(procs.Recorded("site-netns", pid, procs.start_time(pid)))

    def post(
        self,
        path: str,
        body: dict,
        timeout: float = 30,
        conn: http.client.HTTPConnection | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """POST `body` as JSON through the gateway, with the client's own `headers` besides."""
        own = conn is None
        conn = conn or self.gateway_connection(timeout)
        try:
            conn.request(
                "POST",
                urllib.parse.urlsplit(self.base_url).path + path,
                json.dumps(body),
                {"Content-Type": "application/json", **(headers or {})},
            )
            resp = conn.getresponse()
            return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            if own:
                conn.close()

    def gateway_connection(self, timeout: float = 30) -> http.client.HTTPConnection:
        """An HTTP connection to the gateway role, as a client on this machine makes it (kept alive across requests)."""
        url = urllib.parse.urlsplit(self.base_url)
        assert url.hostname is not None  # http://127.x.y.z:port/v1, checked when the site started
        return http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)

    def connection_in_site(self, ip: str, port: int, timeout: float = 10) -> http.client.HTTPConnection:
        """An HTTP connection made from inside the site's network (to a pod IP), as an in-cluster client's."""
        conn = http.client.HTTPConnection(ip, port, timeout=timeout)
        conn.sock = netns.connect_in(self.site_ns(), ip, port, timeout)
        return conn

    def get_in_site(self, ip: str, port: int, path: str, headers: dict | None = None) -> tuple[int, str]:
        conn = self.connection_in_site(ip, port)
        try:
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = READY_TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the site exited ({self.process.returncode}) waiting for {what}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.log()}")
            time.sleep(0.5)

    def epp_account(self, lines: int = 20) -> str:
        """What the EPP logged other than info (each message once, with its count) and the gateway's last requests:
        why requests went where they went, for a failure's message (pytest keeps a run's logs only a while)."""
        counts: dict[str, int] = {}
        for path in sorted((self.site_dir / "logs").glob("pod-*-epp-*-epp.log")):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and entry.get("level") not in (None, "info"):
                    text = f"{path.name}: {entry.get('level')}: {entry.get('msg')} {str(entry.get('error', ''))[:200]}"
                    counts[text] = counts.get(text, 0) + 1
        logged = "\n".join(f"  {n}x {text}" for text, n in sorted(counts.items(), key=lambda c: -c[1])[:lines])
        gateway = self.log("gateway", lines)
        return f"the EPP logged (not info):\n{logged or '  nothing'}\nthe gateway's last lines:\n{gateway}"

    def log(self, name: str = "", lines: int = 40) -> str:
        path = self.site_dir / "logs" / f"{name}.log" if name else self.site_dir / "site.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return f"(no {path})"

    def _answers(self) -> bool:
        try:
            headers = self.probe_headers(self) if self.probe_headers else None
            return self.post("/completions", completion("hello"), timeout=5, headers=headers).status == 200
        except OSError:
            return False


def stack_file_variant(
    stack: str, folder: pathlib.Path, edit: Callable[[dict[str, Any]], None], base: pathlib.Path | None = None
) -> pathlib.Path:
    """`Pulumi.<stack>.yaml` in `folder`: the project's stack file (or `base`, a variant of it) with its config values
    changed by `edit` (given the `config` mapping, keys such as `rebel100:decode`), for a ServedSite's `config_file`."""
    document = yaml.safe_load((base or stack_file(stack)).read_text())
    edit(document["config"])
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def long_prompt(words: int = 400) -> str:
    """A prompt no engine has seen (a fresh id leads, so no prefix is shared with any earlier prompt): the P/D
    decider sends it through prefill."""
    return f"{uuid.uuid4().hex} " + " ".join(f"word{i}" for i in range(words))


def completion(prompt: str, **extra) -> dict:
    return {"model": "MiniMaxAI/MiniMax-M2.7", "prompt": prompt, "max_tokens": 16, **extra}
