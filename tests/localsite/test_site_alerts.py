"""The stack's alerts on the local site (issue 40): its Prometheus loads the rendered PrometheusRule as the Operator
would, `for:` windows shortened by the site option REBEL100_SITE_ALERT_TIME_SCALE, and reads kube-state-metrics'
series the site serves from the pods' status (localsite/autoscaler.py).

The unit tests check those pieces with values written by hand; the cluster tests serve the autoscaled stack (the
site runs Prometheus for a stack with ScaledObjects, sitetests/scaling.py) and see a steady load fire no alert, and
each fault fire its own alert and nothing else: the EPP scaled to 0 (Rebel100EppUnavailable), every decode pod gone
(Rebel100NoReadyDecode), P/D turned off by hand in the EPP's configuration (Rebel100PdDecisionsStopped) and a queue
that outgrows decode's maximum (Rebel100EngineQueueAtMaximum)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from localsite import autoscaler, binaries, netns
from localsite.autoscaler import PROMETHEUS_PORT
from sitetests import scaling
from sitetests.harness import ServedSite, completion, long_prompt
from tests.localsite.conftest import NAMESPACE, require_site_autoscaling
from tests.prerequisites import checked_dir, require

PROJECT = pathlib.Path(__file__).resolve().parents[2]
SCALE = 0.1  # a 1m window lasts 6 s on the site, 15m 90 s


# --- the pieces -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, scale, scaled",
    [
        ("1m", 0.1, "6s"),
        ("15m", 0.1, "90s"),
        ("1m30s", 0.5, "45s"),
        ("1h", 1, "3600s"),
        ("1s", 0.1, "100ms"),
        ("0", 0.1, "1ms"),
    ],
)
def test_a_window_is_scaled_in_seconds_or_milliseconds(text, scale, scaled):
    assert autoscaler.scaled_duration(text, scale) == scaled


@pytest.mark.parametrize("text", ["1 m", "m", "90", "1m x", "30s1m", ""])
def test_what_is_no_prometheus_duration_is_refused(text):
    with pytest.raises(ValueError):
        autoscaler.scaled_duration(text, 0.1)


RULE = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "PrometheusRule",
    "metadata": {"name": "minimax-m27-alerts", "namespace": "rebel100"},
    "spec": {
        "groups": [
            {
                "name": "rebel100-minimax-m27",
                "rules": [
                    {"alert": "A", "expr": "up == 0", "for": "15m", "labels": {"severity": "warning"}},
                    {"alert": "B", "expr": "changes(x[30m]) >= 2"},  # no for: its window is the expression's
                    {"record": "r", "expr": "sum(up)"},
                ],
            }
        ]
    },
}


def test_a_prometheus_rule_is_a_rule_file_of_its_groups_with_the_windows_scaled():
    assert autoscaler.rule_file(RULE, 0.1) == {
        "groups": [
            {
                "name": "rebel100-minimax-m27",
                "rules": [
                    {"alert": "A", "expr": "up == 0", "for": "90s", "labels": {"severity": "warning"}},
                    {"alert": "B", "expr": "changes(x[30m]) >= 2"},
                    {"record": "r", "expr": "sum(up)"},
                ],
            }
        ]
    }
    assert autoscaler.rule_file(RULE) == {"groups": RULE["spec"]["groups"]}  # as rendered
    assert autoscaler.rule_file_name(RULE) == "rebel100-minimax-m27-alerts.yaml"


def test_the_config_loads_the_rule_files_and_scrapes_the_kube_state_series():
    config = autoscaler.alerting_config({"global": {}, "scrape_configs": [{"job_name": "j"}]}, pathlib.Path("/r"))
    assert config == {
        "global": {},
        "rule_files": ["/r/*.yaml"],
        "scrape_configs": [
            {"job_name": "j"},
            {
                "job_name": "kube-state-metrics",
                "honor_labels": True,
                "static_configs": [{"targets": ["127.1.255.254:8080"]}],
            },
        ],
    }
    # Windows x 0.1: the rules evaluated and the kube-state series scraped every 3 s instead of 30 s (never below 1 s).
    scaled = autoscaler.alerting_config(
        {"global": {"evaluation_interval": "30s", "scrape_interval": "30s"}, "scrape_configs": []},
        pathlib.Path("/r"),
        0.1,
    )
    assert scaled["global"] == {"evaluation_interval": "3s", "scrape_interval": "30s"}
    assert scaled["scrape_configs"][-1]["scrape_interval"] == "3s"
    tiny = autoscaler.alerting_config({"global": {}, "scrape_configs": []}, pathlib.Path("/r"), 0.001)
    assert tiny["global"] == {"evaluation_interval": "1s"}


def test_kube_state_series_are_the_pods_ready_condition_and_restarts():
    pods = [
        {
            "metadata": {"name": "e-1", "namespace": "ns", "uid": "u1"},
            "status": {
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "epp", "restartCount": 2}],
            },
        },
        {
            "metadata": {"name": "d-1", "namespace": "ns", "uid": "u2"},
            "status": {
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{"name": "vllm", "restartCount": 0}],
                "initContainerStatuses": [{"name": "routing-proxy", "restartCount": 1}],
            },
        },
        {"metadata": {"name": "p-1", "namespace": "ns", "uid": "u3"}, "status": {"phase": "Pending"}},
    ]
    assert autoscaler.kube_state_metrics(pods).splitlines() == [
        "# TYPE kube_pod_status_ready gauge",
        'kube_pod_status_ready{namespace="ns",pod="e-1",uid="u1",condition="true"} 1',
        'kube_pod_status_ready{namespace="ns",pod="e-1",uid="u1",condition="false"} 0',
        'kube_pod_status_ready{namespace="ns",pod="e-1",uid="u1",condition="unknown"} 0',
        'kube_pod_status_ready{namespace="ns",pod="d-1",uid="u2",condition="true"} 0',
        'kube_pod_status_ready{namespace="ns",pod="d-1",uid="u2",condition="false"} 1',
        'kube_pod_status_ready{namespace="ns",pod="d-1",uid="u2",condition="unknown"} 0',
        'kube_pod_status_ready{namespace="ns",pod="p-1",uid="u3",condition="true"} 0',
        'kube_pod_status_ready{namespace="ns",pod="p-1",uid="u3",condition="false"} 0',
        'kube_pod_status_ready{namespace="ns",pod="p-1",uid="u3",condition="unknown"} 1',
        "# TYPE kube_pod_container_status_restarts_total counter",
        'kube_pod_container_status_restarts_total{namespace="ns",pod="e-1",uid="u1",container="epp"} 2',
        'kube_pod_container_status_restarts_total{namespace="ns",pod="d-1",uid="u2",container="vllm"} 0',
        'kube_pod_container_status_restarts_total{namespace="ns",pod="d-1",uid="u2",container="routing-proxy"} 1',
    ]


@pytest.mark.consumers
def test_prometheus_loads_the_sites_rule_file_of_the_rendered_rule(tmp_path):
    """The rule file the site writes of prod-4p4d's PrometheusRule, windows scaled, is one promtool accepts."""
    from core.stackfile import stack_file
    from stacks.render import render_stack_file

    promtool = require(
        checked_dir(str(PROJECT / "scripts" / "consumers"), "bin", "promtool", "--check"),
        "promtool is not built: run `scripts/consumers build prometheus`",
    )
    [rule] = [
        m for m in render_stack_file(stack_file("prod-4p4d"), "prod-4p4d").manifests if m["kind"] == "PrometheusRule"
    ]
    written = autoscaler.rule_file(rule, SCALE)
    assert {r["alert"]: r.get("for") for r in written["groups"][0]["rules"]}["Rebel100PdDecisionsStopped"] == "90s"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(written))
    proc = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ksm_pod(name: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": name[-5:]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": [{"name": "c"}]},
    }


@pytest.mark.consumers
def test_the_real_prometheus_evaluates_the_sites_rule_file_over_its_kube_state_series(tmp_path):
    """Without a cluster: Debian's Prometheus 2.42 (the site's) with the site's configuration, rule file (windows x
    0.1) and kube-state file served as the site serves it, on 127.0.0.1 here. Every pod Ready: nothing fires; the EPP's
    pod gone from the series: Rebel100EppUnavailable fires (its 1m as 6 s), and nothing else."""
    from core.stackfile import stack_file
    from stacks.render import render_stack_file

    prometheus = require(
        checked_dir(str(PROJECT / "scripts" / "consumers"), "bin", "prometheus", "--check"),
        "Prometheus is not built: run `scripts/consumers build prometheus`",
    )
    manifests = render_stack_file(stack_file("prod-4p4d"), "prod-4p4d").manifests
    [rule] = [m for m in manifests if m["kind"] == "PrometheusRule"]
    rules, served = tmp_path / "rules", tmp_path / "kube-state-metrics"
    rules.mkdir()
    served.mkdir()
    autoscaler.write_yaml(rules / autoscaler.rule_file_name(rule), autoscaler.rule_file(rule, SCALE))
    ksm_port, api_port = free_port(), free_port()
    config = autoscaler.alerting_config(
        {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": []}, rules
    )
    config["scrape_configs"][-1]["static_configs"] = [{"targets": [f"127.0.0.1:{ksm_port}"]}]  # not in a site
    autoscaler.write_yaml(tmp_path / "prometheus.yml", config)
    pods = [ksm_pod(f"minimax-m27-{role}-5c8b7f6d9-{role[:5]}") for role in ("epp", "decode", "prefill")]
    autoscaler.replace_file(served / "metrics", autoscaler.kube_state_metrics(pods).encode())
    argv = [
        f"--web.listen-address=127.0.0.1:{api_port}" if arg.startswith("--web.listen-address=") else arg
        for arg in autoscaler.prometheus_command(prometheus, tmp_path / "prometheus.yml", tmp_path / "tsdb")
    ]
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "http.server", str(ksm_port), "--bind", "127.0.0.1", "--directory", str(served)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]

    def alerts() -> dict[str, str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/api/v1/alerts", timeout=5) as answer:
            return {a["labels"]["alertname"]: a["state"] for a in json.load(answer)["data"]["alerts"]}

    def until(what: str, check, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                found = check()
            except OSError:
                found = None
            if found:
                return found
            time.sleep(0.5)
        raise AssertionError(f"not within {timeout:.0f}s: {what}")

    try:
        query = f"http://127.0.0.1:{api_port}/api/v1/query?query=up"
        until("the kube-state file scraped", lambda: '"1"]' in urllib.request.urlopen(query, timeout=5).read().decode())
        time.sleep(8)  # longer than the EPP's scaled window: nothing is due
        assert alerts() == {}
        autoscaler.replace_file(served / "metrics", autoscaler.kube_state_metrics(pods[1:]).encode())
        until("Rebel100EppUnavailable firing", lambda: alerts().get("Rebel100EppUnavailable") == "firing")
        assert alerts() == {"Rebel100EppUnavailable": "firing"}
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=10)


# --- on the site --------------------------------------------------------------------------------------------------

FAULT_TIMEOUT = 150.0  # the kube-state scrape and the rules' evaluation (3 s scaled), the 6 s window, with room
# Rebel100PdDecisionsStopped reads a 2 m rate (not scaled) before its scaled 90 s window starts, and the EPP restarts.
PD_FAULT_TIMEOUT = 360.0
STEADY_SECONDS = 300  # the 5 minutes of steady load
QUEUE_CLIENTS = 48  # three times decode's 16 slots at its maximum (4 pods x 4 DP ranks x maxNumSeqs 1): 8 wait a pod
EPP, EPP_CONFIG = "minimax-m27-epp", "minimax-m27-epp-config"


@pytest.fixture(scope="module")
def alerting(tmp_path_factory, site_binaries) -> ServedSite:
    require_site_autoscaling()
    stack = binaries.stack_for(site_binaries.programs.epp)
    folder = tmp_path_factory.mktemp("alerts")
    before = os.environ.get(autoscaler.ALERT_TIME_SCALE)
    os.environ[autoscaler.ALERT_TIME_SCALE] = str(SCALE)  # the site process inherits it
    try:
        site = ServedSite(
            folder, stack, NAMESPACE, scaling.SIM_ARGS, config_file=scaling.autoscaled_stack_file(stack, folder)
        )
        with site:
            wait_until_evaluating(site)
            yield site
    finally:
        if before is None:
            os.environ.pop(autoscaler.ALERT_TIME_SCALE, None)
        else:
            os.environ[autoscaler.ALERT_TIME_SCALE] = before


def api(site: ServedSite, path: str) -> dict:
    status, text = site.get_in_site(str(netns.SITE_ADDRESS), PROMETHEUS_PORT, path)
    assert status == 200, text[:500]
    return json.loads(text)["data"]


def firing(site: ServedSite) -> set[str]:
    return {a["labels"]["alertname"] for a in api(site, "/api/v1/alerts")["alerts"] if a["state"] == "firing"}


def alert_account(site: ServedSite, seconds: int) -> str:
    """Why alerts fired, for a failure's message (pytest keeps a run's logs only a while): over the last `seconds`, when
    each alert was pending or firing, when the kube-state scrape failed, each role's Ready pods as scraped, and what
    the site logged about readiness and restarts."""
    end = time.time()
    lines = []
    for query in (
        "ALERTS",
        'up{job="kube-state-metrics"} == 0',
        'count by (pod) (kube_pod_status_ready{condition="true"} == 0)',
    ):
        path = f"/api/v1/query_range?query={urllib.parse.quote(query)}&start={end - seconds:.0f}&end={end:.0f}&step=1"
        for series in api(site, path)["result"]:
            stamps = [float(t) for t, _ in series["values"]]
            spans = ", ".join(f"{a - end:+.0f}s..{b - end:+.0f}s" for a, b in _spans(stamps))
            labels = ",".join(
                f"{k}={v}" for k, v in series["metric"].items() if k in ("alertname", "alertstate", "pod")
            )
            lines.append(f"  {query} {{{labels}}}: {spans}")
    logged = [
        line
        for line in (site.site_dir / "site.log").read_text(errors="replace").splitlines()
        if any(word in line for word in ("not Ready", "exited", "WARNING", "restart"))
    ]
    return "\n".join(["Prometheus (seconds before the end):", *lines, "the site logged:", *logged[-30:]])


def _spans(stamps: list[float]) -> list[tuple[float, float]]:
    """Consecutive 1 s samples as spans (start, end)."""
    spans: list[tuple[float, float]] = []
    for stamp in stamps:
        if spans and stamp - spans[-1][1] <= 1.5:
            spans[-1] = (spans[-1][0], stamp)
        else:
            spans.append((stamp, stamp))
    return spans


def wait_until_evaluating(site: ServedSite) -> None:
    """The rules loaded (with the scaled windows), every series they read scraped (the three PodMonitors' targets and
    the site's kube-state-metrics), and the rules evaluated since. Prometheus evaluates from its start but scrapes a
    target first 5-8 s later (its scrape manager applies targets on a 5 s tick), longer than the scaled 6 s window: the
    readiness alerts, reading no pod yet, fire until the first evaluation after kube-state's first scrape (seen in a
    run's TSDB), so a test that began between that scrape and that evaluation saw them firing."""

    def loaded() -> bool:
        try:
            groups = api(site, "/api/v1/rules")["groups"]
        except OSError:  # Prometheus not listening yet
            return False
        return any(g["name"] == "rebel100-minimax-m27" for g in groups)

    jobs = [
        *(f"podMonitor/{NAMESPACE}/minimax-m27-{part}/0" for part in ("prefill", "decode", "epp")),
        "kube-state-metrics",
    ]

    def scraped() -> datetime.datetime | None:
        """When the last of those targets was last scraped, once each is up."""
        targets = [t for t in api(site, "/api/v1/targets?state=active")["activeTargets"] if t["scrapePool"] in jobs]
        if {t["scrapePool"] for t in targets if t["health"] == "up"} != set(jobs):
            return None
        return max(_instant(t["lastScrape"]) for t in targets)

    def evaluated_since(moment: datetime.datetime) -> bool:
        group = next(g for g in api(site, "/api/v1/rules")["groups"] if g["name"] == "rebel100-minimax-m27")
        return _instant(group["lastEvaluation"]) > moment

    site.wait_for("the site's Prometheus to load the stack's rules", loaded, scaling.TIMEOUT)
    moment = site.wait_for("every target of the alerts up", scraped, scaling.TIMEOUT)
    site.wait_for("the rules evaluated after those scrapes", lambda: evaluated_since(moment), scaling.TIMEOUT)
    windows = {
        r["name"]: r.get("duration")
        for g in api(site, "/api/v1/rules")["groups"]
        for r in g["rules"]
        if r["type"] == "alerting"
    }
    assert windows["Rebel100EppUnavailable"] == 6 and windows["Rebel100PdDecisionsStopped"] == 90, windows


def _instant(text: str) -> datetime.datetime:
    """A time the Prometheus API gives (RFC 3339, nanoseconds; fromisoformat keeps microseconds)."""
    return datetime.datetime.fromisoformat(text)


@pytest.mark.cluster
def test_a_steady_load_fires_no_alert(alerting: ServedSite):
    """A client sending new long prompts (P/D decisions, prefill then decode) one after another for STEADY_SECONDS:
    longer than every scaled window but the restarts' (a restart is no steady state) and than the rates' unscaled 2 m,
    and no alert fires."""
    site = alerting
    seen: set[str] = set()
    answered = 0
    until = time.monotonic() + STEADY_SECONDS
    while time.monotonic() < until:
        answer = site.post("/completions", completion(long_prompt(60)))
        answered += answer.status == 200
        seen |= firing(site)
        time.sleep(1)
    assert answered > 10
    assert seen == set(), f"alerts fired under a steady load: {seen}\n{alert_account(site, STEADY_SECONDS + 60)}"


@pytest.mark.cluster
def test_the_epp_killed_fires_its_alert_and_nothing_else(alerting: ServedSite):
    site = alerting
    assert firing(site) == set()
    site.kubectl("scale", "deployment", "minimax-m27-epp", "--replicas=0", f"--namespace={NAMESPACE}")
    try:
        fired = site.wait_for("Rebel100EppUnavailable firing", lambda: (now := firing(site)) and now, FAULT_TIMEOUT)
        assert fired == {"Rebel100EppUnavailable"}, fired
    finally:
        site.kubectl("scale", "deployment", "minimax-m27-epp", "--replicas=1", f"--namespace={NAMESPACE}")
    site.wait_for("the alert resolved with the EPP back", lambda: not firing(site), FAULT_TIMEOUT)


@contextlib.contextmanager
def autoscaling_paused(site: ServedSite, deployment: str) -> Iterator[None]:
    """KEDA's `autoscaling.keda.sh/paused` on the role's ScaledObject, its HPA gone, so the Deployment's replicas are
    ours to set; unpaused at the end (KEDA makes the HPA again)."""
    namespace = f"--namespace={NAMESPACE}"
    site.kubectl("annotate", "scaledobject", deployment, "autoscaling.keda.sh/paused=true", "--overwrite", namespace)
    try:
        site.wait_for(
            f"KEDA to remove the HPA of the paused {deployment}",
            lambda: site.kubectl("get", "hpa", f"keda-hpa-{deployment}", namespace, check=False).returncode != 0,
            scaling.TIMEOUT,
        )
        yield
    finally:
        site.kubectl("annotate", "scaledobject", deployment, "autoscaling.keda.sh/paused-", namespace)
        scaling.wait_until_active(site)


def restart_epp_with(site: ServedSite, config: str) -> None:
    """The EPP's configuration replaced by hand (the drift an operator's edit makes) and the EPP restarted on it."""
    patch = json.dumps({"data": {"epp-config.yaml": config}})
    site.kubectl("patch", "configmap", EPP_CONFIG, f"--namespace={NAMESPACE}", "--type=merge", "-p", patch)
    site.kubectl("rollout", "restart", f"deployment/{EPP}", f"--namespace={NAMESPACE}")
    site.kubectl("rollout", "status", f"deployment/{EPP}", f"--namespace={NAMESPACE}", "--timeout=180s")


def without_pd(config: str) -> str:
    """The EPP configuration with the P/D decider's threshold beyond any prompt: every decision decode-only."""
    doc = yaml.safe_load(config)
    [decider] = [p for p in doc["plugins"] if p["type"] == "prefix-based-pd-decider"]
    decider.setdefault("parameters", {})["nonCachedTokens"] = 10**9
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.cluster
def test_every_decode_pod_gone_fires_its_alert_and_nothing_else(alerting: ServedSite):
    site = alerting
    assert firing(site) == set()
    with autoscaling_paused(site, scaling.DECODE):
        site.kubectl("scale", "deployment", scaling.DECODE, "--replicas=0", f"--namespace={NAMESPACE}")
        try:
            fired = site.wait_for("Rebel100NoReadyDecode firing", lambda: firing(site), FAULT_TIMEOUT)
            assert fired == {"Rebel100NoReadyDecode"}, fired
        finally:
            site.kubectl("scale", "deployment", scaling.DECODE, "--replicas=1", f"--namespace={NAMESPACE}")
    site.wait_for("the alert resolved with decode back", lambda: not firing(site), FAULT_TIMEOUT)


@pytest.mark.cluster
def test_pd_turned_off_in_the_epps_configuration_fires_its_alert_and_nothing_else(alerting: ServedSite):
    """The decider's threshold raised by hand past any prompt: prefill stays Ready and idle, every request is served
    decode-only and answered, and only Rebel100PdDecisionsStopped says so."""
    site = alerting
    assert firing(site) == set()
    original = site.get("configmap", EPP_CONFIG)["data"]["epp-config.yaml"]
    with scaling.Load(site, long_prompts=True, clients=1) as load:
        restart_epp_with(site, without_pd(original))
        try:
            fired = site.wait_for("Rebel100PdDecisionsStopped firing", lambda: firing(site), PD_FAULT_TIMEOUT)
            assert fired == {"Rebel100PdDecisionsStopped"}, fired
        finally:
            restart_epp_with(site, original)
        site.wait_for("the alert resolved with P/D back", lambda: not firing(site), PD_FAULT_TIMEOUT)
    assert load.answered and load.failed == 0, (load.answered, load.failed)


@pytest.mark.cluster
def test_a_queue_beyond_decodes_maximum_fires_its_alert_and_nothing_else(alerting: ServedSite):
    """QUEUE_CLIENTS clients of short prompts: KEDA scales decode to its maximum and requests still wait above the
    target on every pod; long prompts beside them keep P/D deciding."""
    site = alerting
    assert firing(site) == set()
    with scaling.Load(site, long_prompts=True, clients=1), scaling.Load(site, clients=QUEUE_CLIENTS) as load:
        fired = site.wait_for(
            "Rebel100EngineQueueAtMaximum firing", lambda: firing(site), scaling.TIMEOUT + FAULT_TIMEOUT
        )
        at_maximum = len(scaling.live_pods(site, "decode"))
    assert fired == {"Rebel100EngineQueueAtMaximum"}, fired
    assert at_maximum == scaling.AUTOSCALING["maxReplicas"]
    assert load.failed == 0, f"{load.failed} requests failed under the queue"
    site.wait_for("the alert resolved once the load stopped", lambda: not firing(site), FAULT_TIMEOUT)
