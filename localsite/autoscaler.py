"""The local site's autoscaling: what a cluster with KEDA and the Prometheus Operator runs, so that the stack's
ScaledObjects scale its engine Deployments through the controller-manager's HorizontalPodAutoscaler.

    engines' /metrics ──scrape── Prometheus ◄─query── keda-operator ◄─gRPC (mTLS)── keda-adapter
    (pod IPs, site bridge)       127.1.255.254:9090    (ScaledObject -> HPA)          external.metrics.k8s.io
                                                                                      ▲ APIService, via the relay
    kube-controller-manager's HPA ──► kube-apiserver (aggregation layer) ──► 127.0.0.1:<relay> ─┘

- Prometheus (Debian's 2.42 binary; scripts/consumers `prometheus`) runs in the site namespace and listens on the
  site's bridge address, where the stack's triggers find it (`rebel100:observability.prometheusAddress`
  = PROMETHEUS_ADDRESS). Debian builds it without Kubernetes discovery, so the site plays the Prometheus Operator's
  part: each PodMonitor of the namespace becomes a scrape job over a file of targets (`scrape_config`), the pods
  it selects, with the labels the Operator gives (namespace, pod, container, endpoint), rewritten as pods come and
  go.
- KEDA v2.18.1's operator and metrics API server (scripts/consumers `keda`) run in the site namespace too, with the
  admin token through the site's API relay (the site's own infrastructure, not the stack's: the stack's programs
  get their ServiceAccounts' tokens), and a PKI of their own for their mutual TLS (`keda_pki`).
- The API server reaches the metrics API server through the aggregation layer (scripts/cluster's front-proxy
  flags): an APIService whose Service is an ExternalName `localhost` at a port where this process relays into the
  site. The HPA controller of kube-controller-manager reads external.metrics.k8s.io from it, as in a cluster.
- Alerts: Prometheus evaluates the namespace's PrometheusRules, one rule file each as the Operator writes them
  (`rule_file`), every `for:` multiplied by the site option REBEL100_SITE_ALERT_TIME_SCALE (default 1; tests shorten
  the windows with it). The alerts read kube-state-metrics' pod readiness and restarts, which the site serves for the
  namespace's pods from their status (`kube_state_metrics`, a file served in the site on kube-state-metrics' port).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import pathlib
import re
import sys
import time

import yaml

from core.autoscaling import PROMETHEUS_PORT
from core.formats import prometheus_duration_ms
from core.selectors import label_selector_matches
from host import pki
from localsite import kubeapi, netns

log = logging.getLogger("localsite")

PROMETHEUS_ADDRESS = f"http://{netns.SITE_ADDRESS}:{PROMETHEUS_PORT}"
KEDA_NAMESPACE = "keda"
ADAPTER_PORT = 6443  # the metrics API server's secure port, on the site namespace's 127.0.0.1
OPERATOR_GRPC = "127.0.0.1:9666"  # the operator's metrics service, which the adapter asks (KEDA's default port)
METRICS_SERVICE = "keda-metrics-apiserver"
API_SERVICE = "v1beta1.external.metrics.k8s.io"
TARGETS_REFRESH = "5s"
RESTART_SECONDS = 5.0
KUBE_STATE_PORT = 8080  # kube-state-metrics' own port, on the site's address: where the site serves its series
PROMETHEUS_DEFAULT_INTERVAL = "30s"  # the site's scrape and evaluation interval where nothing sets one (the Operator's)
ALERT_TIME_SCALE = "REBEL100_SITE_ALERT_TIME_SCALE"  # the site option: every alert's `for:` x this


def _label_name(key: str) -> str:
    """A label key as Prometheus's Kubernetes discovery names it in __meta_kubernetes_pod_label_<name>."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def scrape_config(
    pod_monitors: list[dict],
    targets_dir: pathlib.Path,
    secrets_dir: pathlib.Path,
    default_interval: str = PROMETHEUS_DEFAULT_INTERVAL,
) -> dict:
    """Prometheus's configuration for the namespace's PodMonitors: one job per podMetricsEndpoint, named as the
    Prometheus Operator names it (`podMonitor/<namespace>/<name>/<index>`), its targets in a file per job
    (`scrape_targets` writes them), an endpoint's `authorization` Secret as a bearer credentials file
    (`secret_file` names it; SiteAutoscaling writes it from the Secret)."""
    jobs = []
    for monitor in pod_monitors:
        meta = monitor["metadata"]
        for index, endpoint in enumerate(monitor["spec"].get("podMetricsEndpoints") or []):
            job = f"podMonitor/{meta['namespace']}/{meta['name']}/{index}"
            config = {
                "job_name": job,
                "scrape_interval": endpoint.get("interval") or default_interval,
                "metrics_path": endpoint.get("path") or "/metrics",
                "scheme": endpoint.get("scheme") or "http",
                "file_sd_configs": [
                    {"files": [str(targets_dir / f"{_file_name(job)}.json")], "refresh_interval": TARGETS_REFRESH}
                ],
            }
            credentials = (endpoint.get("authorization") or {}).get("credentials")
            if credentials:
                config["authorization"] = {
                    "type": (endpoint["authorization"].get("type") or "Bearer"),
                    "credentials_file": str(secrets_dir / secret_file(meta["namespace"], credentials)),
                }
            jobs.append(config)
    return {
        "global": {"scrape_interval": default_interval, "evaluation_interval": default_interval},
        "scrape_configs": jobs,
    }


def secret_file(namespace: str, selector: dict) -> str:
    """The file name a Secret key (a SecretKeySelector) is written to for Prometheus."""
    return f"{namespace}_{selector['name']}_{selector['key']}"


def secret_selectors(pod_monitors: list[dict]) -> set[tuple[str, str, str]]:
    """(namespace, Secret, key) of every endpoint's authorization credentials."""
    return {
        (m["metadata"]["namespace"], c["name"], c["key"])
        for m in pod_monitors
        for e in m["spec"].get("podMetricsEndpoints") or []
        if (c := (e.get("authorization") or {}).get("credentials"))
    }


def _file_name(job: str) -> str:
    return job.replace("/", "_")


def scrape_targets(pod_monitors: list[dict], pods: list[dict]) -> dict[str, list[dict]]:
    """Job name -> its file_sd targets: every Running pod with an IP that the PodMonitor selects, at each container
    port named as the endpoint's `port`, labelled as the Prometheus Operator's relabelling labels it."""
    result: dict[str, list[dict]] = {}
    for monitor in pod_monitors:
        meta, spec = monitor["metadata"], monitor["spec"]
        namespaces = (spec.get("namespaceSelector") or {}).get("matchNames") or [meta["namespace"]]
        for index, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
            job = f"podMonitor/{meta['namespace']}/{meta['name']}/{index}"
            targets = []
            for pod in pods:
                pod_meta, status = pod["metadata"], pod.get("status") or {}
                if pod_meta.get("namespace") not in namespaces or status.get("phase") != "Running":
                    continue
                if not status.get("podIP") or pod_meta.get("deletionTimestamp"):
                    continue
                if not label_selector_matches(spec.get("selector") or {}, pod_meta.get("labels") or {}):
                    continue
                for container in pod["spec"]["containers"]:
                    for port in container.get("ports") or []:
                        if port.get("name") != endpoint.get("port"):
                            continue
                        targets.append(
                            {
                                "targets": [f"{status['podIP']}:{port['containerPort']}"],
                                "labels": {
                                    "namespace": pod_meta["namespace"],
                                    "pod": pod_meta["name"],
                                    "container": container["name"],
                                    "endpoint": endpoint["port"],
                                },
                            }
                        )
            result[job] = targets
    return result


# --- alerts: the namespace's PrometheusRules and kube-state-metrics' series ---------------------------------------


def scaled_duration(text: str, scale: float, floor_ms: int = 1) -> str:
    """A Prometheus duration x `scale`, at least `floor_ms`, in whole seconds where it is one (else milliseconds);
    ValueError for a text that is no Prometheus duration."""
    rendered = prometheus_duration_ms(text)
    if rendered is None:
        raise ValueError(f"{text!r} is not a Prometheus duration")
    ms = max(floor_ms, round(rendered * scale))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def rule_file(rule: dict, scale: float = 1.0) -> dict:
    """A PrometheusRule as the Prometheus Operator hands it to Prometheus, a rule file of its spec.groups, with every
    alert's `for` multiplied by `scale` (the site option; 1 leaves the rule as rendered)."""
    groups = []
    for group in (rule.get("spec") or {}).get("groups") or []:
        rules = []
        for item in group.get("rules") or []:
            if scale != 1 and item.get("for"):
                item = {**item, "for": scaled_duration(str(item["for"]), scale)}
            rules.append(item)
        groups.append({**group, "rules": rules})
    return {"groups": groups}


def alert_time_scale() -> float:
    """The site option REBEL100_SITE_ALERT_TIME_SCALE (1 where unset)."""
    return float(os.environ.get(ALERT_TIME_SCALE) or 1)


def rule_file_name(rule: dict) -> str:
    return f"{rule['metadata']['namespace']}-{rule['metadata']['name']}.yaml"


def alerting_config(config: dict, rules_dir: pathlib.Path, scale: float = 1.0) -> dict:
    """The scrape configuration with the rule files, and a job for the site's kube-state-metrics series (its labels
    kept, as kube-state-metrics is scraped: honor_labels). With the site option's `scale` (not 1) the rules'
    evaluation and that job's scrape are as much faster as their `for:` windows are shorter (at least 1 s), so a
    scaled window is not lost between two evaluations."""
    job = {
        "job_name": "kube-state-metrics",
        "honor_labels": True,
        "static_configs": [{"targets": [f"{netns.SITE_ADDRESS}:{KUBE_STATE_PORT}"]}],
    }
    scaled = dict(config)
    if scale != 1:
        interval = (config.get("global") or {}).get("evaluation_interval") or PROMETHEUS_DEFAULT_INTERVAL
        every = scaled_duration(interval, scale, floor_ms=1000)
        scaled["global"] = {**(config.get("global") or {}), "evaluation_interval": every}
        job["scrape_interval"] = every
    return {**scaled, "rule_files": [str(rules_dir / "*.yaml")], "scrape_configs": [*config["scrape_configs"], job]}


def kube_state_metrics(pods: list[dict]) -> str:
    """The series of kube-state-metrics v2 the alerts read, for these pods as their status says: kube_pod_status_ready
    (one series per condition value, 1 on the pod's Ready condition) and kube_pod_container_status_restarts_total."""
    ready = ["# TYPE kube_pod_status_ready gauge"]
    restarts = ["# TYPE kube_pod_container_status_restarts_total counter"]
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        labels = f'namespace="{meta["namespace"]}",pod="{meta["name"]}",uid="{meta.get("uid", "")}"'
        condition: dict = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        value = str(condition.get("status", "Unknown")).lower()
        for shown in ("true", "false", "unknown"):
            ready.append(f'kube_pod_status_ready{{{labels},condition="{shown}"}} {int(value == shown)}')
        for container in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
            restarts.append(
                f'kube_pod_container_status_restarts_total{{{labels},container="{container["name"]}"}} '
                f"{int(container.get('restartCount', 0))}"
            )
    return "\n".join(ready + restarts) + "\n"


def keda_pki(folder: pathlib.Path) -> pathlib.Path:
    """ca.crt, tls.crt and tls.key for KEDA's operator and adapter (one certificate for both ends, server and client,
    as KEDA's own certificate manager makes it); made once per folder (openssl, host/pki.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "tls.crt").exists():
        return folder
    pki.certificate_authority(folder / "ca.key", folder / "ca.crt", "KEDA")
    names = ["IP:127.0.0.1", "DNS:localhost", "DNS:keda-operator.keda.svc", "DNS:keda-metrics-apiserver.keda.svc"]
    pki.sign(
        folder / "ca.key",
        folder / "ca.crt",
        folder / "tls.key",
        folder / "tls.crt",
        "keda-operator",
        usage="serverAuth,clientAuth",
        alt_names=names,
    )
    return folder


def site_objects(relay_port: int) -> list[dict]:
    """The cluster objects of the site's KEDA install besides its CRDs: its namespace, and the APIService that
    makes the API server proxy external.metrics.k8s.io to the adapter (an ExternalName Service `localhost` at the
    relay's port: the API server runs on the host, the adapter in the site)."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KEDA_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": METRICS_SERVICE, "namespace": KEDA_NAMESPACE},
            "spec": {
                "type": "ExternalName",
                "externalName": "localhost",
                "ports": [{"name": "https", "port": relay_port, "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": API_SERVICE},
            "spec": {
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                # The adapter's certificate is KEDA's own (keda_pki); the site's API server does not pin it.
                "insecureSkipTLSVerify": True,
                "service": {"namespace": KEDA_NAMESPACE, "name": METRICS_SERVICE, "port": relay_port},
            },
        },
    ]


def object_path(obj: dict) -> str:
    """The API path of an object, for a server-side apply."""
    group_version, kind, meta = obj["apiVersion"], obj["kind"], obj["metadata"]
    plural = {
        "Namespace": "namespaces",
        "Service": "services",
        "APIService": "apiservices",
        "CustomResourceDefinition": "customresourcedefinitions",
    }[kind]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    namespace = meta.get("namespace")
    return f"{base}/namespaces/{namespace}/{plural}/{meta['name']}" if namespace else f"{base}/{plural}/{meta['name']}"


def operator_command(binary: str, certs: pathlib.Path, folder: pathlib.Path) -> list[str]:
    """keda-operator as KEDA's own manifests run it, its listeners on the site namespace's 127.0.0.1."""
    return [
        binary,
        "--leader-elect=false",
        "--enable-cert-rotation=false",
        f"--cert-dir={certs}",
        # Extra CAs for scalers that speak TLS (none here: the site's Prometheus is plain HTTP).
        f"--ca-dir={folder / 'scaler-cas'}",
        "--metrics-bind-address=127.0.0.1:8080",
        "--health-probe-bind-address=127.0.0.1:8081",
        f"--metrics-service-bind-address={OPERATOR_GRPC}",
        "--zap-log-level=info",
        "--zap-encoder=console",
    ]


def adapter_command(binary: str, certs: pathlib.Path, kubeconfig: pathlib.Path) -> list[str]:
    """keda-adapter (the metrics API server) as KEDA's manifests run it, on the site namespace's 127.0.0.1."""
    return [
        binary,
        f"--secure-port={ADAPTER_PORT}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={certs}",
        f"--tls-cert-file={certs / 'tls.crt'}",
        f"--tls-private-key-file={certs / 'tls.key'}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--lister-kubeconfig={kubeconfig}",
        f"--metrics-service-address={OPERATOR_GRPC}",
        "--port=9022",
        "--zap-log-level=info",
        "--zap-encoder=console",
    ]


def keda_env(kubeconfig: pathlib.Path, watch_namespace: str) -> dict[str, str]:
    return {
        "KUBECONFIG": str(kubeconfig),
        "WATCH_NAMESPACE": watch_namespace,
        "POD_NAMESPACE": KEDA_NAMESPACE,
        "POD_NAME": "keda-operator",
        "KEDA_CLUSTER_OBJECT_NAMESPACE": KEDA_NAMESPACE,
        "KEDA_HTTP_DEFAULT_TIMEOUT": "3000",
    }


def prometheus_command(binary: str, config: pathlib.Path, data: pathlib.Path) -> list[str]:
    return [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=2h",
        f"--web.listen-address={netns.SITE_ADDRESS}:{PROMETHEUS_PORT}",
        "--log.level=warn",
    ]


def trigger_addresses(scaled_objects: list[dict]) -> set[str]:
    """The Prometheus addresses the ScaledObjects' prometheus triggers query."""
    return {
        (t.get("metadata") or {}).get("serverAddress", "")
        for s in scaled_objects
        for t in (s.get("spec") or {}).get("triggers") or []
        if t.get("type") == "prometheus"
    }


def replace_file(path: pathlib.Path, content: bytes) -> bool:
    """Write `content` (owner-only) when it differs from the file's, atomically: Prometheus watches the folders and
    reads credentials at each scrape, so it never sees half a file. Whether it wrote."""
    try:
        if path.read_bytes() == content:
            return False
    except OSError:
        pass
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(content)
    tmp.chmod(0o600)
    tmp.replace(path)
    return True


def write_json(path: pathlib.Path, content: object) -> bool:
    return replace_file(path, json.dumps(content, indent=1, sort_keys=True).encode())


def write_yaml(path: pathlib.Path, content: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(content, sort_keys=False))


def describe_mismatch(addresses: set[str]) -> str | None:
    """Why the site's Prometheus would not be the one the triggers query (None: it is)."""
    other = sorted(a for a in addresses if a.rstrip("/") != PROMETHEUS_ADDRESS)
    if not other:
        return None
    return (
        f"the ScaledObjects query {', '.join(other)}, but the site's Prometheus is {PROMETHEUS_ADDRESS}: set "
        f"rebel100:observability.prometheusAddress to {PROMETHEUS_ADDRESS} in the stack the site serves"
    )


class SiteAutoscaling:
    """The site's Prometheus, KEDA operator and metrics API server for one namespace, started by the agent when the
    namespace has ScaledObjects; `reconcile` keeps the scrape targets and the processes up to date."""

    PROGRAMS = ("prometheus", "keda-operator", "keda-adapter")

    def __init__(self, agent, binaries: dict[str, str], crds: pathlib.Path):
        self.agent = agent
        self.binaries = binaries
        self.crds = crds
        self.dir = agent.dir / "autoscaling"
        self.targets_dir = self.dir / "targets"
        self.secrets_dir = self.dir / "secrets"  # the PodMonitors' credentials, as the Prometheus Operator mounts them
        self.rules_dir = self.dir / "rules"  # the namespace's PrometheusRules, one rule file each
        self.kube_state_dir = self.dir / "kube-state-metrics"  # its series, served in the site as `/metrics`
        self.commands: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.monitors: list[dict] = []
        self.not_before: dict[str, float] = {}  # a program that exited starts again after RESTART_SECONDS

    def start(self, server: str, server_name: str, relay_port: int) -> None:
        client, namespace = self.agent.client, self.agent.namespace
        self.targets_dir.mkdir(parents=True, exist_ok=True)
        certs = keda_pki(self.dir / "certs")
        (self.dir / "scaler-cas").mkdir(exist_ok=True)
        kubeconfig = self.dir / "kubeconfig"
        kubeconfig.write_text(client.kubeconfig_for(client.token, server, server_name))
        kubeconfig.chmod(0o600)
        for path in sorted(self.crds.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            client.apply(object_path(crd), crd)
        for obj in site_objects(relay_port):
            client.apply(object_path(obj), obj)
        self.refresh_monitors()
        self.secrets_dir.mkdir(parents=True, exist_ok=True)
        self.secrets_dir.chmod(0o700)
        self.write_rules()
        self.kube_state_dir.mkdir(parents=True, exist_ok=True)
        scrape = scrape_config(self.monitors, self.targets_dir, self.secrets_dir)
        write_yaml(self.dir / "prometheus.yml", alerting_config(scrape, self.rules_dir, alert_time_scale()))
        env = keda_env(kubeconfig, namespace)
        self.commands = {
            "prometheus": (
                prometheus_command(self.binaries["prometheus"], self.dir / "prometheus.yml", self.dir / "tsdb"),
                {},
            ),
            # A static file server in the site, kube-state-metrics' stand-in: `reconcile` rewrites the file.
            "kube-state-metrics": (
                [
                    sys.executable,
                    "-m",
                    "http.server",
                    str(KUBE_STATE_PORT),
                    "--bind",
                    str(netns.SITE_ADDRESS),
                    "--directory",
                    str(self.kube_state_dir),
                ],
                {},
            ),
            "keda-operator": (operator_command(self.binaries["keda-operator"], certs, self.dir), env),
            "keda-adapter": (adapter_command(self.binaries["keda-adapter"], certs, kubeconfig), env),
        }

    def refresh_monitors(self) -> None:
        self.monitors = self.agent.client.items(
            f"/apis/monitoring.coreos.com/v1/namespaces/{self.agent.namespace}/podmonitors"
        )

    def write_rules(self) -> None:
        """The namespace's PrometheusRules as rule files (none without the CRD), their `for:` scaled by the site
        option."""
        try:
            rules = self.agent.client.items(
                f"/apis/monitoring.coreos.com/v1/namespaces/{self.agent.namespace}/prometheusrules"
            )
        except kubeapi.ApiError as err:
            if err.status != 404:
                raise
            rules = []
        scale = alert_time_scale()
        self.rules_dir.mkdir(parents=True, exist_ok=True)
        for rule in rules:
            write_yaml(self.rules_dir / rule_file_name(rule), rule_file(rule, scale))
        if rules:
            log.info("alerts: %d PrometheusRule(s), for: windows x %g", len(rules), scale)

    def reconcile(self, pods: list[dict]) -> None:
        for job, targets in scrape_targets(self.monitors, pods).items():
            write_json(self.targets_dir / f"{_file_name(job)}.json", targets)
        namespaced = [p for p in pods if p["metadata"].get("namespace") == self.agent.namespace]
        replace_file(self.kube_state_dir / "metrics", kube_state_metrics(namespaced).encode())
        self.write_credentials()
        registry, now = self.agent.registry, time.monotonic()
        for name, (argv, env) in self.commands.items():
            process = registry.processes.get(f"autoscaling-{name}")
            if process is not None and process.alive():
                continue
            if process is not None:
                log.warning(
                    "autoscaling: %s exited (%s), starting it again in %.0fs",
                    name,
                    process.exit_code(),
                    RESTART_SECONDS,
                )
                registry.stop(f"autoscaling-{name}")
                self.not_before[name] = now + RESTART_SECONDS
            if now < self.not_before.get(name, 0.0):
                continue
            registry.start(
                f"autoscaling-{name}",
                self.agent.site.ns.command(argv),
                env={"PATH": "/usr/bin:/bin", **env},
                cwd=self.dir,
            )

    def write_credentials(self) -> None:
        """Each PodMonitor credential's current value (a ServiceAccount token Secret is filled in by the token
        controller after it is created: written once it has it, rewritten when it changes)."""
        for namespace, name, key in secret_selectors(self.monitors):
            try:
                secret = self.agent.client.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
            except kubeapi.ApiError as err:
                if err.status == 404:
                    continue
                raise
            value = (secret.get("data") or {}).get(key)
            if value is None:
                continue
            replace_file(self.secrets_dir / secret_file(namespace, {"name": name, "key": key}), base64.b64decode(value))
