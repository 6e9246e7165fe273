"""The local site's node agent: for each Running pod of a namespace, what the kubelet and the container runtime
would do. It gives the pod a network namespace with its pod IP (netns.Site), starts what its containers would run
(programs.plan), restarts a program that exits (with a back-off, like CrashLoopBackOff), and stops them when the
pod is deleted or replaced. It also runs the site's gateway role (the `localsite/gateway` program, a stand-in for
the Gateway's Envoy) in front of the InferencePool the stack's HTTPRoute names, and relays the API server into the
site, where the EPP reaches it with its own ServiceAccount's token.

Everything it starts is recorded by pid (procs.Registry) and stopped by pid, newest first, when it ends.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pathlib
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

from localsite import autoscaler, kube, netns, procs, programs
from localsite import binaries as site_binaries
from policy.read.objects import label_selector_matches

POLL_SECONDS = 0.5
BACKOFF_MAX = 10.0  # seconds between restarts of a program that keeps exiting
API_PORT_IN_SITE = 443
API_SERVER_NAME = "kubernetes.default.svc"  # a name of the apiserver's certificate (scripts/cluster ensure_pki)

log = logging.getLogger("localsite")


@dataclass
class Running:
    """A program of a pod: its plan, its process, and when it may be restarted."""

    program: programs.Program
    process: procs.Recorded | None = None
    restarts: int = 0
    not_before: float = 0.0


@dataclass
class PodRun:
    name: str
    uid: str
    ip: str
    ns: netns.Namespace | None = None
    programs: list[Running] = field(default_factory=list)
    problem: str | None = None
    listening: bool = False  # every program took connections once since it (re)started


def relay(
    listener: socket.socket, target: tuple[str, int], stop: threading.Event, connect: Callable | None = None
) -> None:
    """Accept on `listener` (a socket of another namespace) and pipe each connection to `target` from here (or
    through `connect(target)`, which makes the connection in a namespace of its choice)."""
    connect = connect or (lambda address: socket.create_connection(address, timeout=5))
    listener.settimeout(0.5)
    while not stop.is_set():
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        try:
            upstream = connect(target)
        except OSError:
            client.close()
            continue
        upstream.settimeout(None)
        client.settimeout(None)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _selects(selector: dict, pod: dict) -> bool:
    """A LabelSelector (the pool's) or a Service's plain selector map matches the pod's labels."""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": selector}
    return label_selector_matches(selector, pod["metadata"].get("labels") or {})


class Agent:
    def __init__(
        self,
        folder: pathlib.Path,
        kubeconfig: str,
        namespace: str,
        binaries: programs.Binaries,
        gateway: str,
        listener: socket.socket,
        sim_extra: tuple[str, ...] = (),
    ):
        self.dir = folder
        self.client = kube.Client(kubeconfig)
        self.namespace = namespace
        self.binaries = binaries
        self.gateway_binary = gateway
        self.listener = listener
        self.sim_extra = sim_extra
        self.registry = procs.Registry(folder)
        self.pods: dict[str, PodRun] = {}
        self.gateway_args: list[str] | None = None
        self.gateway_process: procs.Recorded | None = None
        self.stop_event = threading.Event()
        self.site: netns.Site | None = None
        self.autoscaling: autoscaler.SiteAutoscaling | None = None
        self.autoscaling_checked = False
        self.adapter_relay: socket.socket | None = None

    @property
    def live_site(self) -> netns.Site:
        """The site's namespaces, which `start` sets up before anything runs in them."""
        assert self.site is not None, "the agent has not started"
        return self.site

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.site = netns.Site(self.registry)
        api = urllib.parse.urlsplit(self.client.server)
        api_listener = netns.listener_in(self.site.ns, str(netns.SITE_ADDRESS), API_PORT_IN_SITE)
        threading.Thread(
            target=relay, args=(api_listener, (api.hostname, api.port or 443), self.stop_event), daemon=True
        ).start()

    def start_autoscaling(self) -> None:
        """KEDA and Prometheus (localsite/autoscaler.py) when the namespace has ScaledObjects: looked for once, at
        the first reconcile that can read them (an API error leaves it to the next)."""
        try:
            scaled = self.client.items(f"/apis/keda.sh/v1alpha1/namespaces/{self.namespace}/scaledobjects")
        except kube.ApiError as err:  # no KEDA CRD: nothing to scale
            if err.status != 404:
                raise
            scaled = []
        if not scaled:
            self.autoscaling_checked = True
            return
        try:
            found = {name: site_binaries.program(name) for name in autoscaler.SiteAutoscaling.PROGRAMS}
        except site_binaries.Missing as err:
            log.warning(
                "the namespace's ScaledObjects will not scale anything: %s (scripts/consumers build keda prometheus)",
                err,
            )
            self.autoscaling_checked = True
            return
        mismatch = autoscaler.describe_mismatch(autoscaler.trigger_addresses(scaled))
        if mismatch:
            log.warning("autoscaling: %s", mismatch)
        if self.adapter_relay is None:  # once: a start that failed at the API is tried again with the same relay
            self.adapter_relay = netns.listener_in(None, "127.0.0.1", 0)
            site_ns = self.live_site.ns

            def into_site(address: tuple[str, int]) -> socket.socket:
                return netns.connect_in(site_ns, *address)

            threading.Thread(
                target=relay,
                args=(self.adapter_relay, ("127.0.0.1", autoscaler.ADAPTER_PORT), self.stop_event, into_site),
                daemon=True,
            ).start()
        port = self.adapter_relay.getsockname()[1]
        crds = pathlib.Path(found["keda-operator"]).parent.parent / "crds"
        started = autoscaler.SiteAutoscaling(self, found, crds)
        started.start(f"https://{netns.SITE_ADDRESS}:{API_PORT_IN_SITE}", API_SERVER_NAME, port)
        self.autoscaling, self.autoscaling_checked = started, True
        log.info(
            "autoscaling: Prometheus at %s, KEDA's metrics API server behind port %d",
            autoscaler.PROMETHEUS_ADDRESS,
            port,
        )

    def run(self, until: Callable[[], bool]) -> None:
        while not until():
            try:
                self.reconcile()
            except (kube.ApiError, OSError) as err:  # the API server away: keep what runs, try again
                log.warning("reconcile: %s", err)
            self.write_status()
            time.sleep(POLL_SECONDS)

    def close(self) -> None:
        self.stop_event.set()
        if self.gateway_process:
            self.registry.stop("gateway")
        for name in list(self.pods):
            self.stop_pod(name)
        self.registry.stop_all()
        self.write_status()

    # --- pods --------------------------------------------------------------------------------------------------
    def reconcile(self) -> None:
        pods = self.client.items(f"/api/v1/namespaces/{self.namespace}/pods")
        wanted = {
            p["metadata"]["name"]: p
            for p in pods
            if p.get("status", {}).get("phase") == "Running"
            and p["status"].get("podIP")
            and not p["metadata"].get("deletionTimestamp")
        }
        for name, run in list(self.pods.items()):
            pod = wanted.get(name)
            if pod is None or pod["metadata"]["uid"] != run.uid or pod["status"]["podIP"] != run.ip:
                self.stop_pod(name)
        for name, pod in wanted.items():
            if name not in self.pods:
                self.start_pod(pod)
        for run in self.pods.values():
            self.keep_running(run)
        self.registry.reap()
        self.ensure_gateway(pods)
        if not self.autoscaling_checked:
            self.start_autoscaling()
        if self.autoscaling is not None:
            self.autoscaling.reconcile(pods)

    def start_pod(self, pod: dict) -> None:
        meta = pod["metadata"]
        run = PodRun(meta["name"], meta["uid"], pod["status"]["podIP"])
        self.pods[run.name] = run
        try:
            config_maps = {
                c["metadata"]["name"]: c for c in self.client.items(f"/api/v1/namespaces/{self.namespace}/configmaps")
            }
            plan = programs.plan(pod, self.binaries, config_maps)
        except programs.Unsupported as err:
            run.problem = str(err)
            log.warning("pod %s not served: %s", run.name, err)
            self.client.event(pod, "NoLocalProgram", f"the local site cannot run this pod: {err}")
            return
        try:
            run.ns = self.live_site.attach(f"pod-{run.name}", run.ip)
        except netns.NetnsError as err:  # tried again at the next reconcile
            log.warning("pod %s: its network could not be made: %s", run.name, err)
            del self.pods[run.name]
            return
        folder = self.dir / "pods" / run.name
        for program in plan:
            if program.argv[0] == self.binaries.sim:
                program.argv += list(self.sim_extra)
            program.argv = [a.replace("{pod}", str(folder)) for a in program.argv]
            for relative, content in program.files.items():
                path = folder / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
            if program.service_account:
                token = self.client.service_account_token(self.namespace, program.service_account)
                config = folder / "kubeconfig"
                config.parent.mkdir(parents=True, exist_ok=True)
                config.write_text(
                    self.client.kubeconfig_for(
                        token, f"https://{netns.SITE_ADDRESS}:{API_PORT_IN_SITE}", API_SERVER_NAME
                    )
                )
                config.chmod(0o600)
                program.env["KUBECONFIG"] = str(config)
            run.programs.append(Running(program))
        log.info("pod %s (%s): %s", run.name, run.ip, ", ".join(r.program.container for r in run.programs))
        self.keep_running(run)

    def keep_running(self, run: PodRun) -> None:
        """Start programs that do not run; one that exited waits out its back-off first."""
        now = time.monotonic()
        assert run.ns is not None  # attached when the pod was taken in
        for item in run.programs:
            if item.process is not None and item.process.alive():
                continue
            if item.process is not None:  # it ran and exited: back off as the kubelet does
                code = item.process.exit_code()
                item.restarts += 1
                item.not_before = now + min(BACKOFF_MAX, 0.5 * 2 ** min(item.restarts, 5))
                # The simulator exits 0 on a configuration it refuses: its last line says why, not its code.
                log.warning(
                    "pod %s: %s exited (%s), restart %d in %.1fs; its last line: %s",
                    run.name,
                    item.program.container,
                    code,
                    item.restarts,
                    item.not_before - now,
                    self.last_line(f"pod-{run.name}-{item.program.container}"),
                )
                item.process = None
            if now < item.not_before:
                continue
            run.listening = False
            env = {"PATH": "/usr/bin:/bin", **item.program.env}
            item.process = self.registry.start(
                f"pod-{run.name}-{item.program.container}", run.ns.command(item.program.argv), env=env
            )

    def last_line(self, name: str) -> str:
        try:
            lines = (self.registry.logs / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1][:300] if lines else "(empty log)"

    def stop_pod(self, name: str) -> None:
        run = self.pods.pop(name)
        for item in reversed(run.programs):
            if item.process is not None:
                self.registry.stop(f"pod-{name}-{item.program.container}")
        if run.ns is not None:
            self.registry.stop(f"pod-{name}")
        log.info("pod %s stopped", name)

    # --- the gateway role ----------------------------------------------------------------------------------------
    def ensure_gateway(self, pods: list[dict]) -> None:
        """The gateway program in front of the pool the HTTPRoute names, with the EPP the pool names; restarted when
        the EPP's address changes (its pod was replaced) or the program exited."""
        target = self.epp_target(pods)
        if target is None:
            return
        address, failure_mode, fallbacks = target
        args = [
            self.gateway_binary,
            "--listen-fd",
            str(self.listener.fileno()),
            "--epp",
            address,
            "--failure-mode",
            failure_mode,
        ]
        if failure_mode == "FailOpen":  # Envoy then routes to the pool's endpoints without the EPP
            args += ["--fallback-endpoints", ",".join(fallbacks)]
        if self.gateway_process and self.gateway_process.alive() and args == self.gateway_args:
            return
        if self.gateway_process:
            self.registry.stop("gateway")
        self.gateway_args = args
        self.gateway_process = self.registry.start(
            "gateway", self.live_site.ns.command(args), pass_fds=(self.listener.fileno(),)
        )
        log.info("gateway: EPP %s (%s)", address, failure_mode)

    def epp_target(self, pods: list[dict]) -> tuple[str, str, list[str]] | None:
        """The EPP's pod address, the pool's failure mode and its endpoints, from HTTPRoute -> InferencePool ->
        Service -> pod."""
        base = f"/apis/gateway.networking.k8s.io/v1/namespaces/{self.namespace}/httproutes"
        pools = [
            ref["name"]
            for route in self.client.items(base)
            for rule in route["spec"].get("rules") or []
            for ref in rule.get("backendRefs") or []
            if ref.get("kind") == "InferencePool"
        ]
        if not pools:
            return None
        pool = self.client.get(
            f"/apis/inference.networking.k8s.io/v1/namespaces/{self.namespace}/inferencepools/{pools[0]}"
        )
        picker = pool["spec"]["endpointPickerRef"]
        service = self.client.get(f"/api/v1/namespaces/{self.namespace}/services/{picker['name']}")
        port = next(p for p in service["spec"]["ports"] if p["port"] == picker["port"]["number"])
        selector = service["spec"].get("selector") or {}
        failure_mode = picker.get("failureMode", "FailClose")
        fallbacks = sorted(
            f"{run.ip}:{p['number']}"
            for pod in pods
            if _selects(pool["spec"]["selector"], pod) and (run := self.pods.get(pod["metadata"]["name"])) and run.ns
            for p in pool["spec"]["targetPorts"][:1]
        )
        for pod in pods:
            run = self.pods.get(pod["metadata"]["name"])
            if _selects(selector, pod) and run and run.ns and run.ip:
                return f"{run.ip}:{port.get('targetPort', port['port'])}", failure_mode, fallbacks
        # No EPP pod: a Service without endpoints refuses connections (kube-proxy's reject rule); the site's own
        # address, where nothing listens on that port, does the same.
        return f"{netns.SITE_ADDRESS}:{port['port']}", failure_mode, fallbacks

    # --- status --------------------------------------------------------------------------------------------------
    def listening(self, run: PodRun) -> bool:
        """Every program of the pod accepts connections on its ports (the site's readiness; kwok's Ready condition
        does not wait for it, so the EPP may pick a pod whose programs are still starting)."""
        if run.ns is None or not run.programs:
            return False
        if run.listening:
            return True
        for item in run.programs:
            for port in item.program.ports:
                try:
                    netns.connect_in(self.live_site.ns, run.ip, port, timeout=0.2).close()
                except OSError:
                    return False
        run.listening = True
        return True

    def serving(self) -> bool:
        """The gateway runs and the EPP it points at takes connections: the base URL can be given out."""
        args = self.gateway_args
        if not (self.gateway_process and self.gateway_process.alive()) or args is None:
            return False
        address = args[args.index("--epp") + 1]
        return any(run.ip == address.rsplit(":", 1)[0] and self.listening(run) for run in self.pods.values())

    def write_status(self) -> None:
        status = {
            "pods": {
                name: {
                    "ip": run.ip,
                    "problem": run.problem,
                    "listening": self.listening(run),
                    "programs": {
                        r.program.container: {
                            "pid": r.process.pid if r.process and r.process.alive() else None,
                            "restarts": r.restarts,
                            "binary": r.program.argv[0],
                            "ports": list(r.program.ports),
                        }
                        for r in run.programs
                    },
                }
                for name, run in self.pods.items()
            },
            "gateway": {
                "pid": self.gateway_process.pid if self.gateway_process and self.gateway_process.alive() else None,
                "args": self.gateway_args,
            },
            "site_netns_pid": self.site.ns.anchor.pid if self.site else None,
        }
        tmp = self.dir / "status.json.tmp"
        tmp.write_text(json.dumps(status, indent=1))
        tmp.replace(self.dir / "status.json")
