"""tests/mutation/score.py: mutmut's results, the equivalents list and the floors, read and scored."""
import pytest

from tests.mutation import score

RESULTS = """\
    core.rules.x_pp_with_dp__mutmut_1: killed
    core.rules.x_pp_with_dp__mutmut_2: survived
    core.sizing.xǁRdsBudgetǁfits__mutmut_1: timeout
    core.sizing.x_parse_quantity__mutmut_51: survived
    core.sizing.x_rank_ports__mutmut_3: no tests
"""


def test_parse_results_reads_names_and_statuses():
    assert score.parse_results("noise\n" + RESULTS) == {
        "core.rules.x_pp_with_dp__mutmut_1": "killed", "core.rules.x_pp_with_dp__mutmut_2": "survived",
        "core.sizing.xǁRdsBudgetǁfits__mutmut_1": "timeout", "core.sizing.x_parse_quantity__mutmut_51": "survived",
        "core.sizing.x_rank_ports__mutmut_3": "no tests",
    }


def test_equivalents_need_a_reason():
    assert score.parse_equivalents("# comment\n\ncore.a.x_f__mutmut_1  the same value\n") == {
        "core.a.x_f__mutmut_1": "the same value"}
    with pytest.raises(score.ScoreError, match="has no reason"):
        score.parse_equivalents("core.a.x_f__mutmut_1\n")


@pytest.mark.parametrize("mutant, path", [("core.rules.x_pp_with_dp__mutmut_3", "core/rules.py"),
                                          ("core.sizing.xǁRdsBudgetǁfits__mutmut_1", "core/sizing.py"),
                                          ("policy.security.x_no_literal_secrets__mutmut_9", "policy/security.py")])
def test_source_file(mutant, path):
    assert score.source_file(mutant) == path


def test_score_sets_equivalents_aside_and_lists_survivors():
    report = score.score(score.parse_results(RESULTS), {"core.sizing.x_parse_quantity__mutmut_51": "order"},
                         {"core/rules.py": 50, "total": 75})
    rules, sizing = report.files["core/rules.py"], report.files["core/sizing.py"]
    assert (rules.mutants, rules.killed, rules.equivalent, rules.survivors) == (2, 1, 0, ["core.rules.x_pp_with_dp__mutmut_2"])
    assert rules.score == 50.0  # 1 of 2
    assert (sizing.mutants, sizing.killed, sizing.equivalent) == (3, 1, 1)
    assert sizing.survivors == ["core.sizing.x_rank_ports__mutmut_3"]  # no tests is no kill
    assert report.total.score == 50.0  # 2 killed of 5 - 1 equivalent
    assert report.problems == ["total: 50.0% of its mutants killed, below the floor of 75% (2 survivors listed above)."]


def test_a_killed_equivalent_and_an_unchecked_mutant_fail_the_run():
    report = score.score({"core.a.x_f__mutmut_1": "killed", "core.a.x_f__mutmut_2": "not checked"},
                         {"core.a.x_f__mutmut_1": "thought equivalent"}, {})
    assert any("listed as equivalent but a test killed it" in p for p in report.problems)
    assert any("was not checked" in p for p in report.problems)


def test_no_results_fail_the_run():
    assert score.score({}, {}, {"total": 0}).problems[0].startswith("no mutant results")


def test_every_equivalent_has_a_reason_and_the_scopes_have_floors():
    assert score.parse_equivalents(score.EQUIVALENTS.read_text())
    for scope in ("ci", "core"):
        floors = score.read_floors(score.HERE / f"{scope}.cfg")
        assert floors["core/rules.py"] >= 95 and floors["core/sizing.py"] >= 95 and floors["total"] >= 85
    assert score.read_floors(score.HERE / "policy.cfg")["total"] >= 85
