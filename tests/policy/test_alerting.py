"""alerts-served and alerts-where-scraped: the stack's PrometheusRule read back, and edited by hand."""

from __future__ import annotations

import pytest

from policy import catalog, levels
from tests.policy.conftest import STACKS
from tests.policy.fixtures import DECODE, EPP, PREFILL, engine, get, mutate, pod_spec, run_policy

RULE = "minimax-m27-alerts"
RULE_ID = f"PrometheusRule/rebel100/{RULE}"
V07_COUNTER, V10_COUNTER = "llm_d_inference_scheduler_disagg_decision_total", "llm_d_epp_disagg_decision_total"


def rules_of(m: list[dict]) -> list[dict]:
    return get(m, "PrometheusRule", RULE)["spec"]["groups"][0]["rules"]


def alert(m: list[dict], name: str, role: str) -> dict:
    return next(r for r in rules_of(m) if r["alert"] == name and r["labels"]["role"] == role)


def keep_only(name: str, role: str):
    def edit(m):
        rules_of(m)[:] = [alert(m, name, role)]

    return edit


def without_role(role: str):
    def edit(m):
        rules_of(m)[:] = [r for r in rules_of(m) if r["labels"]["role"] != role]

    return edit


def drop(kind: str, name: str):
    return lambda m: m.remove(get(m, kind, name))


def counter_of_v07(m):
    rule = alert(m, "Rebel100PdDecisionsStopped", "prefill")
    rule["expr"] = rule["expr"].replace(V10_COUNTER, V07_COUNTER)


def old_decode_engine(m):
    engine(m, f"{DECODE}")["image"] = "rebellions/vllm-rbln:0.11.2"


def epp_pinned(image: str):
    return lambda m: next(c for c in pod_spec(m, EPP)["containers"] if c["name"] == "epp").update(image=image)


# Each edit, its policy, the resource of its one finding and phrases of the message (tests/policy/test_finding_kinds.py
# runs them too).
BAD = {
    "an-alert-of-a-role-that-runs-no-pod": (
        lambda m: (keep_only("Rebel100NoReadyPrefill", "prefill")(m), drop("Deployment", PREFILL)(m)),
        "alerts-served",
        RULE_ID,
        (
            "spec.groups[0].rules[0] (alert Rebel100NoReadyPrefill): Rebel100NoReadyPrefill watches the prefill pods, "
            "but no prefill pod runs here (roles: decode, epp): the alert reads nothing and stays silent whatever "
            "happens. Remove it, or label it with the role whose pods it selects.",
        ),
    ),
    "an-alert-on-another-generations-counter": (
        counter_of_v07,
        "alerts-served",
        RULE_ID,
        (
            "(alert Rebel100PdDecisionsStopped): Rebel100PdDecisionsStopped reads "
            f"{V07_COUNTER}, but ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 serves it as {V10_COUNTER} (its "
            f"router generation, core/versions/router.py): the alert reads nothing and stays silent. Query "
            f"{V10_COUNTER}.",
        ),
    ),
    "a-monitor-of-pods-no-alert-watches": (
        without_role("epp"),
        "alerts-where-scraped",
        f"PodMonitor/rebel100/{EPP}",
        (
            "scrapes the epp pods of namespace rebel100, but no PrometheusRule there alerts on them (an alert "
            "labelled role: epp): their metrics are collected and nobody is told when they go bad. Render the "
            "stack's alerts (rebel100:observability.alerts.enabled true), or add a PrometheusRule with alerts on "
            "those pods labelled role: epp.",
        ),
    ),
}


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", ["alerts-served", "alerts-where-scraped"])
def test_good_render_passes(renders, stack, policy):
    assert run_policy(policy, renders[stack]) == []


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(prod, case):
    edit, policy, resource, contains = BAD[case]
    found = run_policy(policy, mutate(prod, edit))
    level = catalog.BY_NAME[policy].enforcement  # the pack's own level (prod.json's below)
    assert [(v.resource, v.level) for v in found] == [(resource, level)], [v.line() for v in found]
    for text in contains:
        assert text in found[0].message, found[0].message


def test_an_engine_older_than_the_metrics_leaves_each_alert_on_them_silent(prod):
    """vllm-rbln 0.11.2: its vLLM metrics were not read (core/versions/engine.py METRICS, from 0.12.0). The decode
    alerts on them are found; the prefill ones read the prefill engine, still 0.12.0."""
    found = run_policy("alerts-served", mutate(prod, old_decode_engine))
    messages = [v.message for v in found]
    assert [m.split(":", 1)[0] for m in messages] == [
        "spec.groups[0].rules[6] (alert Rebel100EngineQueueAtMaximum)",
        "spec.groups[0].rules[7] (alert Rebel100KvCacheNearFull)",
    ]
    assert messages[0].endswith(
        "Rebel100EngineQueueAtMaximum reads vllm:num_requests_waiting, which rebellions/vllm-rbln:0.11.2 is not known "
        "to serve (core/versions says which releases serve which series): the alert would read nothing and stay "
        "silent through the fault it is for. Pin the engine image 0.12.0 or later, or remove the alert "
        "(observability.alerts in the stack)."
    )
    assert {v.resource for v in found} == {RULE_ID}


def test_an_epp_of_no_known_generation_serves_no_known_counter(prod):
    found = run_policy("alerts-served", mutate(prod, epp_pinned("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.8.0")))
    assert [v.message.split(": ", 1)[1].split(",")[0] for v in found] == [
        f"Rebel100PdDecisionsStopped reads {V10_COUNTER}",
        "Rebel100EppRequestErrors reads llm_d_epp_request_total",
        "Rebel100EppRequestErrors reads llm_d_epp_request_error_total",
    ]


def test_the_v07_render_reads_its_own_generations_counters(renders):
    """pd-router07 pins the v0.7.1 EPP: its alerts read that generation's names, and they are served."""
    text = str(get(renders["pd-router07"], "PrometheusRule", RULE)["spec"])
    assert V07_COUNTER in text and "inference_objective_request_error_total" in text
    assert V10_COUNTER not in text
    assert run_policy("alerts-served", renders["pd-router07"]) == []


def test_an_unversioned_epp_is_left_to_image_hygiene(prod):
    digest = "ghcr.io/llm-d/llm-d-router-endpoint-picker@sha256:" + "a" * 64
    assert run_policy("alerts-served", mutate(prod, epp_pinned(digest))) == []


def test_an_alert_without_a_role_label_is_judged_on_its_series_only(prod):
    def edit(m):
        rule = alert(m, "Rebel100PdDecisionsStopped", "prefill")
        del rule["labels"]["role"]
        rule["expr"] = rule["expr"].replace(V10_COUNTER, V07_COUNTER)

    [violation] = run_policy("alerts-served", mutate(prod, edit))
    assert f"but ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 serves it as {V10_COUNTER}" in violation.message


def test_recording_rules_and_other_series_are_not_judged(prod):
    def edit(m):
        rules_of(m).append({"record": "x:y", "expr": f"sum({V07_COUNTER})"})
        rules_of(m).append({"alert": "Mine", "expr": "up == 0", "labels": {"role": "gateway"}})

    assert run_policy("alerts-served", mutate(prod, edit)) == []


def test_without_the_rule_every_scraped_role_is_asked_for(prod):
    found = run_policy("alerts-where-scraped", mutate(prod, drop("PrometheusRule", RULE)))
    assert [v.resource for v in found] == [f"PodMonitor/rebel100/{name}" for name in (PREFILL, DECODE, EPP)]
    assert "scrapes the prefill pods of namespace rebel100" in found[0].message


def test_asking_for_alerts_is_advice_in_dev_and_mandatory_in_prod(prod):
    bad = mutate(prod, drop("PrometheusRule", RULE))
    for environment, level in (("dev", "advisory"), ("prod", "mandatory")):
        config = catalog.load_config(levels.environment_config(environment))
        found = [v for v in catalog.evaluate(bad, config) if v.policy == "alerts-where-scraped"]
        assert {v.level for v in found} == {level}, environment
