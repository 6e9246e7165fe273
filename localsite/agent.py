"""The local site's node agent: for each Running pod of a namespace, what the kubelet and the container runtime
would do. It gives the pod a network namespace with its pod IP (netns.Site), starts what its containers would run
(programs.plan), restarts a program that exits (with a back-off, like CrashLoopBackOff), and stops them when the
pod is deleted or replaced. It also runs the site's gateway role (the `localsite/gateway` program, a stand-in for
the Gateway's Envoy) in front of the InferencePool the stack's HTTPRoute names, given the EPP Service's ready
endpoints as EDS would give them to Envoy, and relays the API server into the site, where the EPP reaches it with
its own ServiceAccount's token.

As the kubelet (`kubelet=True`, on a cluster started with `scripts/cluster start --kubelet-namespace` so that kwok
leaves the namespace's pods' readiness and deletion to it), it also honours a pod's life as the render states it:
- readiness: the containers' startup, readiness and liveness probes run against the programs (localsite/probes.py)
  and decide the pod's Ready condition, which it writes to the API (the EPP sees a pod only when it is Ready); a
  liveness or startup failure restarts the program; an engine's program starts `engine_start_delay` seconds after
  its container (or the pod's `rebel100.local/ready-delay`), standing for the compilation before vLLM listens;
- deletion: a pod marked for deletion gets its main containers' preStop hooks, then SIGTERM, then SIGKILL at the
  end of its grace period; its native sidecars the same once the main containers are gone; then the pod object is
  removed, as the kubelet does. The programs drain what they can (the simulator finishes its requests in flight).
`time_scale` multiplies the probes' periods and initial delays (tests use less than 1); preStop sleeps and grace periods
are the render's, as they stand for how long the programs take.

Everything it starts is recorded by pid (procs.Registry) and stopped by pid, newest first, when it ends.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import pathlib
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

from core.cmdline import go_duration_seconds
from core.selectors import label_selector_matches
from localsite import autoscaler, kubeapi, netns, probes, procs, programs
from localsite import binaries as site_binaries

POLL_SECONDS = 0.5
AUTOSCALING_RECHECK_S = 10.0  # seconds between looks for ScaledObjects while the namespace has none
BACKOFF_MAX = 10.0  # seconds between restarts of a program that keeps exiting
API_PORT_IN_SITE = 443
API_SERVER_NAME = "kubernetes.default.svc"  # a name of the apiserver's certificate (scripts/cluster ensure_pki)
READY_DELAY_ANNOTATION = "rebel100.local/ready-delay"  # kwok's Running -> Ready delay (cluster/site/kwok-stages.yaml)
GRACE_DEFAULT = 30.0  # the API's terminationGracePeriodSeconds
SIDECAR_GRACE_MIN = 2.0  # what the kubelet still gives sidecars after the main containers used the grace period
EPP_ENDPOINTS = "epp-endpoints"  # the file under the site's folder the gateway reads the EPP endpoints from
POOL_ENDPOINTS = "pool-endpoints"  # and where, with FailOpen, it sends what the EPP could not route

log = logging.getLogger("localsite")


@dataclass
class Running:
    """A program of a pod: its plan, its container's spec, its process, when it may be (re)started, and its probes
    in this run of it."""

    program: programs.Program
    spec: dict = field(default_factory=dict)
    sidecar: bool = False  # a native sidecar (stopped after the main containers)
    process: procs.Recorded | None = None
    restarts: int = 0
    not_before: float = 0.0
    probes: probes.ContainerProbes | None = None


@dataclass
class PodRun:
    name: str
    uid: str
    ip: str
    ns: netns.Namespace | None = None
    programs: list[Running] = field(default_factory=list)
    problem: str | None = None
    listening: bool = False  # every program took connections once since it (re)started
    ready: bool | None = None  # the Ready condition last written (kubelet mode)
    terminating: bool = False  # its preStop hooks and stop are under way (kubelet mode)
    terminated: threading.Event = field(default_factory=threading.Event)  # every program has stopped
    gone: threading.Event = field(default_factory=threading.Event)  # the agent let go of it: its prober ends


def is_ready(pod: dict) -> bool:
    """The pod's Ready condition is True (what a kubelet reports, and what the site's own agent writes)."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


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
        kubelet: bool = False,
        time_scale: float = 1.0,
        engine_start_delay: float = 0.0,
    ):
        self.dir = folder
        self.client = kubeapi.Client(kubeconfig)
        self.namespace = namespace
        self.binaries = binaries
        self.gateway_binary = gateway
        self.listener = listener
        self.sim_extra = sim_extra
        self.kubelet = kubelet
        self.time_scale = time_scale
        self.engine_start_delay = engine_start_delay
        self.registry = procs.Registry(folder)
        self.pods: dict[str, PodRun] = {}
        self.gateway_args: list[str] | None = None
        self.gateway_process: procs.Recorded | None = None
        self.stop_event = threading.Event()
        self.site: netns.Site | None = None
        self.autoscaling: autoscaler.SiteAutoscaling | None = None
        self.autoscaling_next_check = 0.0  # time.monotonic() of the next look for ScaledObjects (inf: decided)
        self.adapter_relay: socket.socket | None = None
        self.epp_endpoints: list[str] | None = None  # last written to EPP_ENDPOINTS
        self.pool_endpoints: list[str] | None = None  # last written to POOL_ENDPOINTS

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
        """KEDA and Prometheus (localsite/autoscaler.py) once the namespace has ScaledObjects: looked for every
        AUTOSCALING_RECHECK_S until found (the site may run before `up` creates them: `make serve` starts it first,
        since `up` waits for the Ready pods only the site makes), then started once (an API error leaves it to the next
        reconcile)."""
        try:
            scaled = self.client.items(f"/apis/keda.sh/v1alpha1/namespaces/{self.namespace}/scaledobjects")
        except kubeapi.ApiError as err:  # no KEDA CRD: nothing to scale
            if err.status != 404:
                raise
            scaled = []
        if not scaled:
            self.autoscaling_next_check = time.monotonic() + AUTOSCALING_RECHECK_S
            return
        try:
            found = {name: site_binaries.program(name) for name in autoscaler.SiteAutoscaling.PROGRAMS}
        except site_binaries.Missing as err:
            log.warning(
                "the namespace's ScaledObjects will not scale anything: %s (scripts/consumers build keda prometheus)",
                err,
            )
            self.autoscaling_next_check = math.inf
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
        self.autoscaling, self.autoscaling_next_check = started, math.inf
        log.info(
            "autoscaling: Prometheus at %s, KEDA's metrics API server behind port %d",
            autoscaler.PROMETHEUS_ADDRESS,
            port,
        )

    def run(self, until: Callable[[], bool]) -> None:
        while not until():
            try:
                self.reconcile()
            except (kubeapi.ApiError, OSError) as err:  # the API server away: keep what runs, try again
                log.warning("reconcile: %s", err)
            self.write_status()
            time.sleep(POLL_SECONDS)

    def close(self) -> None:
        self.stop_event.set()
        if self.gateway_process:
            self.registry.stop("gateway")
        # Every pod at once, as a kubelet stops them: a program that ignores SIGTERM costs its own pod
        # host.processes.STOP_TIMEOUT, not the whole site's stop one pod after another.
        stoppers = [threading.Thread(target=self.stop_pod, args=(name,), name=f"close-{name}") for name in self.pods]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        self.registry.stop_all()
        self.write_status()

    # --- pods --------------------------------------------------------------------------------------------------
    def reconcile(self) -> None:
        pods = self.client.items(f"/api/v1/namespaces/{self.namespace}/pods")
        by_name = {p["metadata"]["name"]: p for p in pods}
        for name, run in list(self.pods.items()):
            pod = by_name.get(name)
            if run.terminating:
                if run.terminated.is_set():
                    self.stop_pod(name)
                    self.remove(pod, run.uid)
                continue
            if pod is None or pod["metadata"]["uid"] != run.uid or pod["status"].get("podIP") != run.ip:
                self.stop_pod(name)  # gone without a deletion the agent saw (a forced delete): stopped at once
            elif pod["metadata"].get("deletionTimestamp"):
                if self.kubelet:
                    self.begin_termination(run, pod)
                else:
                    self.stop_pod(name)
        for name, pod in by_name.items():
            if name in self.pods:
                continue
            if pod["metadata"].get("deletionTimestamp"):
                if self.kubelet:  # never run here (or already stopped): nothing to wait for
                    self.remove(pod, pod["metadata"]["uid"])
            elif pod.get("status", {}).get("phase") == "Running" and pod["status"].get("podIP"):
                self.start_pod(pod)
        for run in self.pods.values():
            self.keep_running(run)
        if self.kubelet:
            for run in self.pods.values():
                self.write_readiness(run, by_name.get(run.name))
        self.registry.reap()
        self.ensure_gateway(pods)
        if time.monotonic() >= self.autoscaling_next_check:
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
            secrets = {
                s["metadata"]["name"]: s for s in self.client.items(f"/api/v1/namespaces/{self.namespace}/secrets")
            }
            plan = programs.plan(pod, self.binaries, config_maps, secrets)
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
        containers = {c["name"]: c for c in programs.served_containers(pod)}
        sidecars = {c["name"] for c in pod["spec"].get("initContainers") or [] if c.get("restartPolicy") == "Always"}
        try:
            for container in containers.values():  # refused now, as an image that cannot run: never Ready
                for key in ("startupProbe", "readinessProbe", "livenessProbe"):
                    probes.probe(container.get(key), container, self.time_scale)
                probes.pre_stop(container)
        except probes.Unsupported as err:
            run.problem = f"a probe or hook the site cannot run: {err}"
            log.warning("pod %s: %s", run.name, run.problem)
            self.client.event(pod, "NoLocalProbe", f"the local site cannot run this pod's probes: {err}")
        delay = self.engine_start_delay
        if READY_DELAY_ANNOTATION in (meta.get("annotations") or {}):
            found = go_duration_seconds(meta["annotations"][READY_DELAY_ANNOTATION].strip())
            if found is None:
                log.warning("pod %s: %s is not a Go duration", run.name, READY_DELAY_ANNOTATION)
            else:
                delay = found
        first_start = time.monotonic()
        for program in plan:
            if program.argv[0] == self.binaries.sim:
                program.argv += list(self.sim_extra)
            program.argv = [a.replace("{pod}", str(folder)) for a in program.argv]
            for relative, content in program.files.items():
                path = folder / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):  # a Secret's value, as the kubelet writes it
                    path.write_bytes(content)
                else:
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
            is_engine = program.argv[0] == self.binaries.sim
            run.programs.append(
                Running(
                    program,
                    spec=containers.get(program.container, {}),
                    sidecar=program.container in sidecars,
                    # an engine's port opens only after it compiled (vLLM listens once its engine is up)
                    not_before=first_start + delay if is_engine else 0.0,
                )
            )
        log.info("pod %s (%s): %s", run.name, run.ip, ", ".join(r.program.container for r in run.programs))
        if self.kubelet:
            threading.Thread(target=self.probe_pod, args=(run,), name=f"probe-{run.name}", daemon=True).start()
        self.keep_running(run)

    def keep_running(self, run: PodRun) -> None:
        """Start programs that do not run; one that exited waits out its back-off first; one whose startup or
        liveness probe failed is stopped first, as the kubelet kills its container."""
        if run.terminating or not run.programs:  # a pod the site cannot run has none
            return
        now = time.monotonic()
        assert run.ns is not None  # attached when the pod was taken in
        for item in run.programs:
            if item.process is not None and item.probes is not None and item.probes.failed:
                log.warning("pod %s: %s: %s, restarting it", run.name, item.program.container, item.probes.failed)
                procs.terminate(item.process)
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
            item.probes = probes.ContainerProbes.begin(item.spec, self.time_scale, now) if self.kubelet else None
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
        began = time.monotonic()
        run = self.pods.pop(name)
        run.gone.set()
        for item in reversed(run.programs):
            if item.process is not None:
                self.registry.stop(f"pod-{name}-{item.program.container}")
        if run.ns is not None:
            self.registry.stop(f"pod-{name}")
        log.info("pod %s stopped (%.1f s)", name, time.monotonic() - began)

    # --- the kubelet's part: probes, readiness, termination (kubelet mode) --------------------------------------------
    def probe_pod(self, run: PodRun) -> None:
        """The pod's prober (a thread of its own, as the kubelet's probe workers): due probes of running programs."""
        target = probes.Target(self.live_site.ns, run.ns, run.ip) if run.ns is not None else None

        def check(action: probes.Action, timeout: float) -> bool:
            assert target is not None
            try:
                return action.check(target, timeout)
            except probes.Unsupported:
                return False

        while not run.gone.is_set() and target is not None:
            now = time.monotonic()
            for item in list(run.programs):
                state, process = item.probes, item.process
                if state is None or process is None or not process.alive() or state.failed:
                    continue
                state.step(check, now)
            run.gone.wait(0.05 * max(self.time_scale, 0.1))

    def container_ready(self, item: Running) -> bool:
        return bool(
            item.process is not None
            and item.process.alive()
            and item.probes is not None
            and item.probes.started
            and item.probes.ready
            and not item.probes.failed
        )

    def write_readiness(self, run: PodRun, pod: dict | None) -> None:
        """The pod's Ready condition and its containers' ready flags, written when they change (the API's
        PodStatus as the kubelet reports it; the EPP and the EndpointSlices read it)."""
        if pod is None or run.terminating:
            return
        ready = run.problem is None and bool(run.programs) and all(self.container_ready(i) for i in run.programs)
        flags = {i.program.container: (self.container_ready(i), i.restarts) for i in run.programs}
        if ready == run.ready and ready == is_ready(pod):
            return
        status = pod.get("status") or {}

        def statuses(key: str) -> list[dict]:
            out = []
            for entry in status.get(key) or []:
                entry = dict(entry)
                if entry.get("name") in flags:
                    entry["ready"], entry["restartCount"] = flags[entry["name"]]
                out.append(entry)
            return out

        reason = None if ready else ("ContainersNotReady" if run.problem is None else "LocalSiteCannotRun")
        conditions = [
            {
                "type": kind,
                "status": "True" if ready else "False",
                "lastTransitionTime": kubeapi.now(),
                "reason": reason,
            }
            for kind in ("Ready", "ContainersReady")
        ]
        patch = {
            "status": {
                "conditions": conditions,
                "containerStatuses": statuses("containerStatuses"),
                "initContainerStatuses": statuses("initContainerStatuses"),
            }
        }
        try:
            self.client.request(
                "PATCH",
                f"/api/v1/namespaces/{self.namespace}/pods/{run.name}/status",
                patch,
                content_type="application/strategic-merge-patch+json",
            )
        except kubeapi.ApiError as err:
            if err.status not in (404, 409):
                raise
            return
        if ready != run.ready:
            log.info("pod %s %s", run.name, "Ready" if ready else "not Ready")
        run.ready = ready

    def begin_termination(self, run: PodRun, pod: dict) -> None:
        """The kubelet's graceful stop, in a thread of its own: preStop, SIGTERM, SIGKILL at the grace period's end."""
        run.terminating = True
        seconds = pod["metadata"].get("deletionGracePeriodSeconds")
        if seconds is None:
            seconds = pod["spec"].get("terminationGracePeriodSeconds", GRACE_DEFAULT)
        grace = float(seconds)
        log.info("pod %s terminating (grace %.1fs)", run.name, grace)
        threading.Thread(target=self.terminate_pod, args=(run, grace), name=f"stop-{run.name}", daemon=True).start()

    def terminate_pod(self, run: PodRun, grace: float) -> None:
        deadline = time.monotonic() + grace
        target = probes.Target(self.live_site.ns, run.ns, run.ip) if run.ns is not None else None

        def stop(item: Running, until: float) -> None:
            process = item.process
            if process is None or not process.alive():
                return
            try:
                hook = probes.pre_stop(item.spec)
            except probes.Unsupported:
                hook = None
            if hook is not None and target is not None:
                with contextlib.suppress(probes.Unsupported, OSError):
                    if isinstance(hook, probes.Sleep):
                        run.gone.wait(max(0.0, min(hook.seconds, until - time.monotonic())))
                    else:
                        hook.check(target, max(0.1, until - time.monotonic()))
            procs.terminate(process, timeout=max(0.0, until - time.monotonic()))

        mains = [item for item in run.programs if not item.sidecar]
        workers = [threading.Thread(target=stop, args=(item, deadline), daemon=True) for item in mains]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        for item in reversed([item for item in run.programs if item.sidecar]):
            stop(item, max(deadline, time.monotonic() + SIDECAR_GRACE_MIN))
        log.info("pod %s: every container stopped", run.name)
        run.terminated.set()

    def remove(self, pod: dict | None, uid: str) -> None:
        """Delete the pod object at once, as the kubelet does once its containers are gone (this uid only)."""
        if pod is None:
            return
        name = pod["metadata"]["name"]
        try:
            self.client.request(
                "DELETE",
                f"/api/v1/namespaces/{self.namespace}/pods/{name}",
                {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
            )
        except kubeapi.ApiError as err:
            if err.status not in (404, 409):
                raise

    # --- the gateway role ----------------------------------------------------------------------------------------
    def ensure_gateway(self, pods: list[dict]) -> None:
        """The gateway program in front of the pool the HTTPRoute names, given the EPP Service's ready endpoints
        and the pool's (FailOpen's) through files it follows (no restart when pods come and go: connections drain
        as Envoy's would); restarted when the pool's failure mode changes or the program exited."""
        target = self.epp_target(pods)
        if target is None:
            return
        endpoints, failure_mode, fallbacks = target
        if endpoints != self.epp_endpoints:
            self._write_endpoints(EPP_ENDPOINTS, endpoints)
            if self.epp_endpoints is not None:
                log.info("gateway: EPP endpoints %s", ", ".join(endpoints) or "(none)")
            self.epp_endpoints = endpoints
        if fallbacks != self.pool_endpoints:
            self._write_endpoints(POOL_ENDPOINTS, fallbacks)
            self.pool_endpoints = fallbacks
        args = [
            self.gateway_binary,
            "--listen-fd",
            str(self.listener.fileno()),
            "--epp-endpoints-file",
            str(self.dir / EPP_ENDPOINTS),
            "--failure-mode",
            failure_mode,
        ]
        if failure_mode == "FailOpen":  # Envoy then routes to the pool's endpoints without the EPP
            args += ["--fallback-endpoints-file", str(self.dir / POOL_ENDPOINTS)]
        if self.gateway_process and self.gateway_process.alive() and args == self.gateway_args:
            return
        if self.gateway_process:
            self.registry.stop("gateway")
        self.gateway_args = args
        self.gateway_process = self.registry.start(
            "gateway", self.live_site.ns.command(args), pass_fds=(self.listener.fileno(),)
        )
        log.info("gateway: EPP endpoints %s (%s)", ", ".join(endpoints) or "(none)", failure_mode)

    def _write_endpoints(self, name: str, endpoints: list[str]) -> None:
        """One HOST:PORT a line, replaced whole (the gateway never reads half a list)."""
        path = self.dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(f"{e}\n" for e in endpoints))
        tmp.replace(path)

    def epp_target(self, pods: list[dict]) -> tuple[list[str], str, list[str]] | None:
        """The EPP Service's ready endpoints (its selected pods that are Ready, not terminating and run here, at the
        target port), the pool's failure mode and its endpoints, from HTTPRoute -> InferencePool -> Service -> pods."""
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
        # As the EndpointSlice controller: a Service's ready endpoints are its selected pods that are Ready and not
        # terminating (a Service without endpoints refuses connections: the gateway then has none to connect to).
        # FailOpen's are the pool's, at its first target port (the one every role listens on), as a gateway's own
        # load balancing over the pool has them.
        fallbacks = sorted(
            f"{run.ip}:{p['number']}"
            for pod in pods
            if _selects(pool["spec"]["selector"], pod) and (run := self._serving(pod))
            for p in pool["spec"]["targetPorts"][:1]
        )
        endpoints = sorted(
            f"{run.ip}:{port.get('targetPort', port['port'])}"
            for pod in pods
            if _selects(selector, pod) and (run := self._serving(pod))
        )
        return endpoints, failure_mode, fallbacks

    def _serving(self, pod: dict) -> PodRun | None:
        """The pod's run here if the pod is a ready endpoint: Ready, not terminating, its programs started."""
        if not is_ready(pod) or pod["metadata"].get("deletionTimestamp"):
            return None
        run = self.pods.get(pod["metadata"]["name"])
        return run if run and run.ns and not run.terminating else None

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
        """The gateway runs and an EPP endpoint it is given takes connections: the base URL can be given out."""
        if not (self.gateway_process and self.gateway_process.alive()) or not self.epp_endpoints:
            return False
        hosts = {endpoint.rsplit(":", 1)[0] for endpoint in self.epp_endpoints}
        return any(run.ip in hosts and self.listening(run) for run in self.pods.values())

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
                "epp_endpoints": self.epp_endpoints,
            },
            "site_netns_pid": self.site.ns.anchor.pid if self.site else None,
        }
        tmp = self.dir / "status.json.tmp"
        tmp.write_text(json.dumps(status, indent=1))
        tmp.replace(self.dir / "status.json")
