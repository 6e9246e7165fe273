"""The rendered alerting rules, through Prometheus's own promtool (Debian 12's, scripts/consumers `prometheus`):
`promtool check rules` on every stack's PrometheusRule, and `promtool test rules` on prod-4p4d's with one rule-test file
per alert (tests/data/alerts: input series written by hand as the pinned programs name them, at least one case where
the alert fires and one where it stays silent).

Without promtool the tests skip (REBEL100_REQUIRE_E2E=1, set by .ci/run after `scripts/consumers build`, makes that a
failure)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest
import yaml

from core.stackfile import stack_file
from stacks.render import render_stack_file
from tests.prerequisites import checked_dir, require

pytestmark = pytest.mark.consumers
PROJECT = pathlib.Path(__file__).resolve().parents[2]
CASES = PROJECT / "tests" / "data" / "alerts"
STACKS = ("prod-4p4d", "prod-autoscale", "agg", "pd-router07")


@pytest.fixture(scope="module")
def promtool() -> str:
    found = checked_dir(str(PROJECT / "scripts" / "consumers"), "bin", "promtool", "--check")
    return require(found, "promtool is not built: run `scripts/consumers build prometheus`")


def rule_spec(stack: str) -> dict:
    manifests = render_stack_file(stack_file(stack), stack).manifests
    [rule] = [m for m in manifests if m["kind"] == "PrometheusRule"]
    return rule["spec"]


@pytest.fixture(scope="module")
def prod_groups() -> list[dict]:
    return rule_spec("prod-4p4d")["groups"]


def run(promtool: str, *args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("stack", STACKS)
def test_promtool_checks_the_rules_of_each_stack(promtool, stack, tmp_path):
    """Syntax, PromQL, durations and the annotations' templates, as Prometheus would load them."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_spec(stack)["groups"]}, sort_keys=False))
    proc = run(promtool, "check", "rules", "rules.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def for_testing(groups: list[dict]) -> list[dict]:
    """The groups as the rule tests read them: without summary and description (free text), with the runbook."""
    return [
        {
            **group,
            "rules": [
                {**rule, "annotations": {"runbook_url": rule["annotations"]["runbook_url"]}} for rule in group["rules"]
            ],
        }
        for group in groups
    ]


def rule_test(
    promtool: str, groups: list[dict], case: pathlib.Path, folder: pathlib.Path
) -> subprocess.CompletedProcess:
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": for_testing(groups)}, sort_keys=False))
    shutil.copy(case, folder / case.name)
    return run(promtool, "test", "rules", case.name, cwd=folder)


CASE_FILES = sorted(CASES.glob("Rebel100*.yaml"))


@pytest.mark.parametrize("case", CASE_FILES, ids=[c.stem for c in CASE_FILES])
def test_promtool_tests_each_alert_of_prod_4p4d(promtool, prod_groups, case, tmp_path):
    proc = rule_test(promtool, prod_groups, case, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_each_alert_has_a_rule_test_file_with_a_firing_and_a_silent_case(prod_groups):
    alerts = {rule["alert"] for group in prod_groups for rule in group["rules"]}
    assert {c.stem for c in CASE_FILES} == alerts
    for case in CASE_FILES:
        checks = [
            check
            for test in yaml.safe_load(case.read_text())["tests"]
            for check in test["alert_rule_test"]
            if check["alertname"] == case.stem
        ]
        assert any(c["exp_alerts"] for c in checks), f"{case.name}: no case where {case.stem} fires"
        assert any(not c["exp_alerts"] for c in checks), f"{case.name}: no case where {case.stem} stays silent"


@pytest.mark.parametrize(
    "alert, old, new",
    [
        ("Rebel100EppUnavailable", ") < 1", ") < 0"),  # never fires
        ("Rebel100NoReadyDecode", "1m", "0s"),  # fires while pending
        ("Rebel100PdDecisionsStopped", "\nand on() sum(rate", "\nor on() sum(rate"),  # fires on some prefill-decode
        ("Rebel100EppRequestErrors", 'error_code!~"', 'error_code=~"'),  # counts the client's errors instead
    ],
)
def test_a_broken_rule_fails_its_rule_tests(promtool, prod_groups, alert, old, new, tmp_path):
    """The rule tests are an oracle of their own: a rule changed by hand (one threshold, window or operator) fails."""
    broken = [dict(group, rules=[dict(r) for r in group["rules"]]) for group in prod_groups]
    for rule in broken[0]["rules"]:
        if rule["alert"] == alert:
            field = "for" if old == "1m" else "expr"
            assert old in rule[field]
            rule[field] = rule[field].replace(old, new)
    proc = rule_test(promtool, broken, CASES / f"{alert}.yaml", tmp_path)
    assert proc.returncode != 0 and "FAILED" in proc.stdout + proc.stderr, proc.stdout
