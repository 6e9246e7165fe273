"""The stack's alerts (core/alerts.py): which ones a config gets, what they read and where their thresholds come from,
written out by hand; and the gate's refusal of alerts on series the pinned engine is not known to serve.

`tests/stacks/test_promtool.py` runs the rendered rules through Prometheus's own promtool (syntax, and a firing and a
silent case per alert); this module checks the config's part."""

from __future__ import annotations

import pytest

from core import alerts, gate
from core.config import StackConfig

PROD = {"prefill": {"replicas": 4}, "decode": {"replicas": 4}}
PREFILL_PODS = 'pod=~"minimax-m27-prefill-[a-z0-9]+-[a-z0-9]+"'
DECODE_PODS = 'pod=~"minimax-m27-decode-[a-z0-9]+-[a-z0-9]+"'
EPP_PODS = 'pod=~"minimax-m27-epp-[a-z0-9]+-[a-z0-9]+"'


def of(values: dict) -> list[alerts.Alert]:
    return alerts.alerts(StackConfig.model_validate(values))


def table(found: list[alerts.Alert]) -> list[tuple[str, str, str, str]]:
    return [(a.name, a.role, a.severity, a.for_) for a in found]


def named(found: list[alerts.Alert], name: str, role: str) -> alerts.Alert:
    [alert] = [a for a in found if a.name == name and a.role == role]
    return alert


def test_the_target_configuration_gets_every_alert_with_its_defaults():
    assert table(of(PROD)) == [
        ("Rebel100EppUnavailable", "epp", "critical", "1m"),
        ("Rebel100NoReadyDecode", "decode", "critical", "1m"),
        ("Rebel100NoReadyPrefill", "prefill", "warning", "5m"),
        ("Rebel100PdDecisionsStopped", "prefill", "warning", "15m"),
        ("Rebel100EngineQueueAtMaximum", "prefill", "warning", "10m"),
        ("Rebel100KvCacheNearFull", "prefill", "warning", "15m"),
        ("Rebel100EngineQueueAtMaximum", "decode", "warning", "10m"),
        ("Rebel100KvCacheNearFull", "decode", "warning", "15m"),
        ("Rebel100PodRestarting", "prefill", "warning", ""),
        ("Rebel100ScrapeTargetDown", "prefill", "warning", "10m"),
        ("Rebel100PodRestarting", "decode", "warning", ""),
        ("Rebel100ScrapeTargetDown", "decode", "warning", "10m"),
        ("Rebel100PodRestarting", "epp", "warning", ""),
        ("Rebel100ScrapeTargetDown", "epp", "warning", "10m"),
        ("Rebel100EppRequestErrors", "epp", "warning", "5m"),
    ]


def test_agg_has_no_prefill_to_alert_on():
    found = of({"topology": "agg", "prefill": {"replicas": 0}, "kvTier": {"mode": "off"}})
    assert {a.role for a in found} == {"decode", "epp"}
    assert "Rebel100PdDecisionsStopped" not in {a.name for a in found}


@pytest.mark.parametrize(
    "router, alerted",
    [
        ({"decider": "prefix-based", "nonCachedTokens": 16}, True),
        ({"decider": "always-disagg", "nonCachedTokens": 0}, True),
        # A decider that never sends a request through prefill (the gate refuses it too): no decision to miss.
        ({"decider": "prefix-based", "nonCachedTokens": 0}, False),
    ],
)
def test_pd_decisions_are_missed_only_where_the_decider_takes_them(router, alerted):
    assert ("Rebel100PdDecisionsStopped" in {a.name for a in of({**PROD, "router": router})}) is alerted


def test_readiness_is_counted_over_the_roles_pods_and_none_counts_as_zero():
    found = of(PROD)
    assert named(found, "Rebel100NoReadyDecode", "decode").expr == (
        f'(sum(kube_pod_status_ready{{namespace="rebel100",{DECODE_PODS},condition="true"}}) or on() vector(0)) < 1'
    )
    assert named(found, "Rebel100EppUnavailable", "epp").expr == (
        f'(sum(kube_pod_status_ready{{namespace="rebel100",{EPP_PODS},condition="true"}}) or on() vector(0)) < 1'
    )


def test_node_groups_are_one_regex_of_every_groups_pods():
    found = of({**PROD, "placement": {"groups": 2}})
    pods = 'pod=~"minimax-m27-decode-g0-[a-z0-9]+-[a-z0-9]+|minimax-m27-decode-g1-[a-z0-9]+-[a-z0-9]+"'
    assert pods in named(found, "Rebel100NoReadyDecode", "decode").expr


def test_the_pd_alert_reads_the_pinned_generations_counter():
    v10 = named(of(PROD), "Rebel100PdDecisionsStopped", "prefill")
    assert v10.expr == (
        '(sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100",decision_type="prefill-decode"}[2m])) or '
        "on() vector(0)) == 0\n"
        'and on() sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100"}[2m])) > 0.05\n'
        f'and on() (sum(kube_pod_status_ready{{namespace="rebel100",{PREFILL_PODS},condition="true"}}) or on() '
        "vector(0)) > 0"
    )
    v07 = named(
        of({**PROD, "router": {"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"}}),
        "Rebel100PdDecisionsStopped",
        "prefill",
    )
    assert "llm_d_inference_scheduler_disagg_decision_total" in v07.expr and "llm_d_epp_" not in v07.expr


def test_the_error_ratio_leaves_out_the_clients_errors_of_its_generation():
    v10 = named(of(PROD), "Rebel100EppRequestErrors", "epp").expr
    failed = (
        'sum(rate(llm_d_epp_request_error_total{namespace="rebel100",'
        'error_code!~"BadRequest|Unauthorized|Forbidden|NotFound|PreconditionFailed"}[2m]))'
    )
    assert v10.startswith(
        f'{failed} / ({failed} + (sum(rate(llm_d_epp_request_total{{namespace="rebel100"}}[2m])) or on() vector(0))) '
        f"> 0.05\nunless on() "
    )
    v07 = named(
        of({**PROD, "router": {"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"}}),
        "Rebel100EppRequestErrors",
        "epp",
    ).expr
    assert 'inference_objective_request_error_total{namespace="rebel100",error_code!~"BadRequest"}' in v07


@pytest.mark.parametrize(
    "values, role, target, maximum",
    [
        (PROD, "decode", "2", "4"),  # the engineQueue signal's default target; fixed replicas
        ({**PROD, "decode": {"replicas": 3}}, "decode", "2", "3"),
        (
            {
                "rollout": {"strategy": "RollingUpdate"},
                "prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, "target": 3}},
            },
            "prefill",
            "3",  # the role's own engineQueue target
            "4",
        ),
        (
            {"rollout": {"strategy": "RollingUpdate"}, "decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 2}}},
            "decode",
            "2",  # decode scales on kvCacheUsage: its target is no queue
            "2",
        ),
        ({**PROD, "observability": {"alerts": {"engineQueuePerPod": 0.5}}}, "prefill", "0.5", "4"),
    ],
)
def test_the_queue_alert_takes_the_roles_target_and_maximum(values, role, target, maximum):
    expr = named(of(values), "Rebel100EngineQueueAtMaximum", role).expr
    pods = f'count(count by (pod) (vllm:num_requests_waiting{{namespace="rebel100",pod=~"minimax-m27-{role}-'
    assert expr.split("\n")[0].endswith(f") > {target}")
    assert expr.split("\n")[1].startswith(f"and on() {pods}") and expr.endswith(f" >= {maximum}")


def test_every_threshold_and_window_is_the_configs():
    settings = {
        "eppUnavailableFor": "2m",
        "noReadyDecodeFor": "3m",
        "noReadyPrefillFor": "4m",
        "pdDecisionsStoppedFor": "30m",
        "pdDecisionsMinRate": 0.2,
        "engineQueueFor": "20m",
        "kvCacheUsage": 0.9,
        "kvCacheUsageFor": "1h",
        "restarts": 3,
        "restartsWindow": "1h",
        "scrapeDownFor": "15m",
        "eppErrorRatio": 0.1,
        "eppErrorRatioFor": "7m",
    }
    found = of({**PROD, "observability": {"alerts": settings}})
    assert [(a.name, a.for_) for a in found if a.role in ("epp", "prefill")] == [
        ("Rebel100EppUnavailable", "2m"),
        ("Rebel100NoReadyPrefill", "4m"),
        ("Rebel100PdDecisionsStopped", "30m"),
        ("Rebel100EngineQueueAtMaximum", "20m"),
        ("Rebel100KvCacheNearFull", "1h"),
        ("Rebel100PodRestarting", ""),
        ("Rebel100ScrapeTargetDown", "15m"),
        ("Rebel100PodRestarting", ""),
        ("Rebel100ScrapeTargetDown", "15m"),
        ("Rebel100EppRequestErrors", "7m"),
    ]
    assert named(found, "Rebel100NoReadyDecode", "decode").for_ == "3m"
    assert "> 0.2\n" in named(found, "Rebel100PdDecisionsStopped", "prefill").expr
    assert named(found, "Rebel100KvCacheNearFull", "decode").expr.endswith(") > 0.9")
    assert named(found, "Rebel100PodRestarting", "decode").expr.endswith("[1h]) >= 3")
    assert "> 0.1\n" in named(found, "Rebel100EppRequestErrors", "epp").expr


def test_a_rule_carries_its_labels_and_its_runbook():
    cfg = StackConfig.model_validate({**PROD, "observability": {"alerts": {"runbookUrl": "https://x/ops.md"}}})
    [group] = alerts.rule_groups(cfg.name, cfg.namespace, alerts.alerts(cfg), cfg.observability.alerts.runbook_url)
    assert group["name"] == "rebel100-minimax-m27"
    restarts = next(r for r in group["rules"] if r["alert"] == "Rebel100PodRestarting")
    assert "for" not in restarts  # its window is in the expression
    assert restarts["labels"] == {"severity": "warning", "role": "prefill", "namespace": "rebel100"}
    assert restarts["annotations"]["runbook_url"] == "https://x/ops.md#rebel100podrestarting"


@pytest.mark.parametrize(
    "observability, rendered",
    [({}, True), ({"podMonitors": False}, False), ({"alerts": {"enabled": False}}, False)],
)
def test_alerts_are_rendered_with_the_pod_monitors_that_feed_them(observability, rendered):
    assert alerts.rendered(StackConfig.model_validate({"observability": observability})) is rendered


@pytest.mark.parametrize(
    "series, image, served",
    [
        ("vllm:num_requests_waiting", "rebellions/vllm-rbln:0.12.0", "vllm:num_requests_waiting"),
        ("vllm:kv_cache_usage_perc", "rebellions/vllm-rbln:0.13.1", "vllm:kv_cache_usage_perc"),
        ("vllm:kv_cache_usage_perc", "rebellions/vllm-rbln:0.11.2", None),  # read in 0.12.0's vLLM only
        ("vllm:kv_cache_usage_perc", "vllm/vllm-openai:v0.6.0", "vllm:kv_cache_usage_perc"),  # not vllm-rbln
        ("vllm:kv_cache_usage_perc", "rebellions/vllm-rbln@sha256:" + "a" * 64, "vllm:kv_cache_usage_perc"),
        (
            "llm_d_epp_disagg_decision_total",
            "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1",
            "llm_d_inference_scheduler_disagg_decision_total",
        ),
        (
            "inference_objective_request_total",
            "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
            "llm_d_epp_request_total",
        ),
        (
            "llm_d_epp_request_error_total",
            "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0",
            "llm_d_epp_request_error_total",
        ),
        ("llm_d_epp_request_error_total", "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.8.0", None),  # no generation
        ("kube_pod_status_ready", "anything:1.0", "kube_pod_status_ready"),  # not the stack's programs'
    ],
)
def test_what_an_image_serves_a_series_as(series, image, served):
    assert alerts.served_as(series, image) == served


def test_the_series_an_expression_reads_are_told_apart_from_longer_names():
    assert alerts.series_in(
        "rate(llm_d_epp_request_total[2m]) + llm_d_epp_request_total_x + vllm:kv_cache_usage_perc"
    ) == [
        "vllm:kv_cache_usage_perc",
        "llm_d_epp_request_total",
    ]


# Without a drain: vllm-rbln 0.11.2 has no `vllm serve --shutdown-timeout` (engine-image-has-features).
OLD_ENGINE = {
    **PROD,
    "engine": {"image": "rebellions/vllm-rbln:0.11.2"},
    "kvTier": {"mode": "cpu"},
    "rollout": {"drainSeconds": 0},
}
LOGGERS = (
    "vllm==0.30.0 vllm/v1/metrics/loggers.py (PrometheusStatLogger: line {}), the vLLM vllm-rbln 0.12.0 pins; the "
    "oldest release read for it"
)


def test_an_engine_older_than_the_metrics_is_refused_for_the_alerts_in_full():
    found = [(i.path, i.message, i.policy) for i in gate.validate(StackConfig.model_validate(OLD_ENGINE))]
    assert found == [
        (
            "rebel100:engine.image",
            f"{alert} reads {series}, which engine.image rebellions/vllm-rbln:0.11.2 is not known to serve "
            f"(core/versions says which releases serve which series): the alert would read nothing and stay silent "
            f"through the fault it is for. Pin engine.image 0.12.0 or later ({LOGGERS.format(line)}), or set "
            f"observability.alerts.enabled false (no alerts at all).",
            "alerts-served",
        )
        for alert, series, line in (
            ("Rebel100EngineQueueAtMaximum", "vllm:num_requests_waiting", 509),
            ("Rebel100KvCacheNearFull", "vllm:kv_cache_usage_perc", 567),
        )
    ]


@pytest.mark.parametrize("observability", [{"alerts": {"enabled": False}}, {"podMonitors": False}])
def test_without_the_alerts_an_older_engine_is_not_refused_for_them(observability):
    assert gate.validate(StackConfig.model_validate({**OLD_ENGINE, "observability": observability})) == []
