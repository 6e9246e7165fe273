"""tests/mutation/score.py: mutmut's results, the equivalents list and the floors, read and scored."""

import hashlib

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
        "core.rules.x_pp_with_dp__mutmut_1": "killed",
        "core.rules.x_pp_with_dp__mutmut_2": "survived",
        "core.sizing.xǁRdsBudgetǁfits__mutmut_1": "timeout",
        "core.sizing.x_parse_quantity__mutmut_51": "survived",
        "core.sizing.x_rank_ports__mutmut_3": "no tests",
    }


DIFF_1 = """\
--- core/a.py
+++ core/a.py
@@ -1,2 +1,2 @@
 def f(token):
-    return token.split("=", 1)[0]
+    return token.split("=", 2)[0]"""
DIFF_2 = DIFF_1.replace('split("=", 2)', 'split("=", )')  # the same name after a renumbering: another change
HASH_1 = score.change_hash(DIFF_1)


def test_change_hash_is_sha256_of_the_diff_as_mutmut_show_prints_it():
    # `mutmut show NAME | tail -n +2 | sha256sum | cut -c1-12`: the diff with the newline print() ends it with
    assert hashlib.sha256((DIFF_1 + "\n").encode()).hexdigest()[:12] == HASH_1
    assert score.change_hash(DIFF_1 + "\n") == HASH_1
    assert score.change_hash(DIFF_2) != HASH_1


def test_equivalents_pin_a_change_and_need_a_reason():
    text = f"# comment\n\n  core.a.x_f__mutmut_1  {HASH_1}  the same   value\n"
    assert score.parse_equivalents(text) == {
        "core.a.x_f__mutmut_1": score.Equivalent("core.a.x_f__mutmut_1", HASH_1, "the same   value", 3)
    }


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "core.a.x_f__mutmut_1",
            r"line 2: core.a.x_f__mutmut_1 has no change hash \(12 hex digits\) after its name, '' found",
        ),
        (
            "core.a.x_f__mutmut_1  the same value",
            r"line 2: core.a.x_f__mutmut_1 has no change hash .* 'the' found; a line "
            r"is `<mutant name>  <change: 12 hex digits>  <reason>`",
        ),
        ("core.a.x_f__mutmut_1  928DD4B4E00C  upper case", r"line 2: .* has no change hash .*'928DD4B4E00C' found"),
        ("core.a.x_f__mutmut_1  928dd4b4e00  eleven digits", r"line 2: .* has no change hash .*'928dd4b4e00' found"),
        (f"core.a.x_f__mutmut_1  {HASH_1}", r"line 2: core.a.x_f__mutmut_1 has no reason"),
        (
            f"core.a.f  {HASH_1}  not a mutant",
            r"line 2: 'core.a.f' is not a mutmut mutant name; a line is `<mutant name>",
        ),
        (
            f"core.a.x_f__mutmut_1  {HASH_1}  twice\ncore.a.x_f__mutmut_1  {HASH_1}  again",
            r"line 3: core.a.x_f__mutmut_1 is listed twice \(first on line 2\)",
        ),
    ],
)
def test_equivalents_that_cannot_be_read_name_their_line(line, message):
    with pytest.raises(score.ScoreError, match=r"^equivalents.txt " + message):
        score.parse_equivalents("# comment\n" + line + "\n")


def test_a_listed_survivor_whose_change_has_its_hash_is_equivalent():
    results = {"core.a.x_f__mutmut_1": "survived", "core.a.x_f__mutmut_2": "killed"}
    equivalents = score.parse_equivalents(f"core.a.x_f__mutmut_1  {HASH_1}  split(maxsplit 2)[0] is the same\n")
    assert score.listed_survivors(results, equivalents) == ["core.a.x_f__mutmut_1"]
    report = score.score(results, equivalents, {"total": 100}, {"core.a.x_f__mutmut_1": DIFF_1})
    assert (report.total.killed, report.total.equivalent, report.total.survivors) == (1, 1, [])
    assert report.problems == []


def test_a_listed_name_that_now_names_another_change_is_refused():
    results = {"core.a.x_f__mutmut_1": "survived"}
    equivalents = score.parse_equivalents(f"# first\ncore.a.x_f__mutmut_1  {HASH_1}  maxsplit 2 is the same\n")
    report = score.score(results, equivalents, {}, {"core.a.x_f__mutmut_1": DIFF_2})
    [problem] = report.problems
    assert problem.startswith(
        f"equivalents.txt line 2: core.a.x_f__mutmut_1 was judged equivalent as change {HASH_1} "
        f"(maxsplit 2 is the same), but that name now names change {score.change_hash(DIFF_2)};"
    )
    assert "Re-examine the entry" in problem
    assert '    +    return token.split("=", )[0]' in problem.splitlines()  # the mutant it names now
    assert (report.total.equivalent, report.total.survivors) == (0, ["core.a.x_f__mutmut_1"])  # not vouched for


def test_a_listed_survivor_without_its_diff_is_refused():
    equivalents = score.parse_equivalents(f"core.a.x_f__mutmut_1  {HASH_1}  maxsplit 2 is the same\n")
    [problem] = score.score({"core.a.x_f__mutmut_1": "survived"}, equivalents, {}, {}).problems
    assert "its diff could not be read, so its change" in problem


def test_main_checks_the_hashes_of_the_listed_survivors(tmp_path, monkeypatch, capsys):
    (tmp_path / "results.txt").write_text("    core.a.x_f__mutmut_1: survived\n    core.a.x_f__mutmut_2: killed\n")
    (tmp_path / "equivalents.txt").write_text(f"core.a.x_f__mutmut_1  {HASH_1}  maxsplit 2 is the same\n")
    (tmp_path / "t.cfg").write_text("[score]\ntotal = 100\n")
    monkeypatch.setattr(score, "EQUIVALENTS", tmp_path / "equivalents.txt")
    monkeypatch.setattr(score, "HERE", tmp_path)
    asked = []
    diff = {"now": DIFF_1}

    def fake_diffs(workspace, names):
        asked.append((workspace, list(names)))
        return {name: diff["now"] for name in names}

    monkeypatch.setattr(score, "mutant_diffs", fake_diffs)
    assert score.main(["t", str(tmp_path / "results.txt")]) == 0
    assert asked == [(tmp_path, ["core.a.x_f__mutmut_1"])]  # only the listed survivor, in the results' folder
    assert "1 listed mutants survived, 1 of them still the change their line pins" in capsys.readouterr().out
    diff["now"] = DIFF_2
    assert score.main(["t", str(tmp_path / "results.txt")]) == 1
    assert "FAIL: equivalents.txt line 1: core.a.x_f__mutmut_1 was judged equivalent" in capsys.readouterr().err


def test_show_prints_the_diff_and_the_start_of_a_line(monkeypatch):
    monkeypatch.setattr(score, "mutant_diffs", lambda workspace, names: {name: DIFF_1 for name in names})
    out = score.show(score.ROOT / "build" / "mutate" / "core", ["core.a.x_f__mutmut_1"])
    assert out.splitlines()[:2] == ["# core.a.x_f__mutmut_1", "--- core/a.py"]
    assert f"core.a.x_f__mutmut_1  {HASH_1}  <why no test can tell it from the original>" in out.splitlines()


@pytest.mark.parametrize(
    "mutant, path",
    [
        ("core.rules.x_pp_with_dp__mutmut_3", "core/rules.py"),
        ("core.sizing.xǁRdsBudgetǁfits__mutmut_1", "core/sizing.py"),
        ("policy.security.x_no_literal_secrets__mutmut_9", "policy/security.py"),
    ],
)
def test_source_file(mutant, path):
    assert score.source_file(mutant) == path


def test_score_sets_equivalents_aside_and_lists_survivors():
    listed = score.parse_equivalents(f"core.sizing.x_parse_quantity__mutmut_51  {HASH_1}  order\n")
    report = score.score(
        score.parse_results(RESULTS),
        listed,
        {"core/rules.py": 50, "total": 75},
        {"core.sizing.x_parse_quantity__mutmut_51": DIFF_1},
    )
    rules, sizing = report.files["core/rules.py"], report.files["core/sizing.py"]
    assert (rules.mutants, rules.killed, rules.equivalent, rules.survivors) == (
        2,
        1,
        0,
        ["core.rules.x_pp_with_dp__mutmut_2"],
    )
    assert rules.score == 50.0  # 1 of 2
    assert (sizing.mutants, sizing.killed, sizing.equivalent) == (3, 1, 1)
    assert sizing.survivors == ["core.sizing.x_rank_ports__mutmut_3"]  # no tests is no kill
    assert report.total.score == 50.0  # 2 killed of 5 - 1 equivalent
    assert report.problems == ["total: 50.0% of its mutants killed, below the floor of 75% (2 survivors listed above)."]


def test_a_killed_equivalent_and_an_unchecked_mutant_fail_the_run():
    report = score.score(
        {"core.a.x_f__mutmut_1": "killed", "core.a.x_f__mutmut_2": "not checked"},
        score.parse_equivalents(f"core.a.x_f__mutmut_1  {HASH_1}  thought equivalent"),
        {},
        {},
    )
    assert any("listed as equivalent but a test killed it" in p for p in report.problems)
    assert any("was not checked" in p for p in report.problems)


def test_no_results_fail_the_run():
    assert score.score({}, {}, {"total": 0}, {}).problems[0].startswith("no mutant results")


def test_every_equivalent_has_a_reason_and_the_scopes_have_floors():
    assert score.parse_equivalents(score.EQUIVALENTS.read_text())
    for scope in ("ci", "core"):
        floors = score.read_floors(score.HERE / f"{scope}.cfg")
        assert floors["core/rules.py"] >= 95 and floors["core/sizing.py"] >= 95 and floors["total"] >= 85
    assert score.read_floors(score.HERE / "policy.cfg")["total"] >= 85
    assert score.read_floors(score.HERE / "objects.cfg")["total"] >= 85


@pytest.mark.parametrize(
    "scope, package, left_out",
    [
        ("objects", "objects", set()),
        # The whole pack (issue 25): the Pulumi adapter, the levels and the consumer policies too. Only __main__.py is
        # left out: module-level code that serves the pack (no function for mutmut to mutate), run by the engine.
        ("policy", "policy", {"__main__.py"}),
    ],
)
def test_a_scope_mutates_every_module_of_its_package(scope, package, left_out):
    """A new module is mutated as soon as it exists (objects/ was outside every scope, and policy/ssrf.py and
    observability.py outside the pack's)."""
    import configparser
    import pathlib

    from core.stackfile import PROJECT_ROOT

    parser = configparser.ConfigParser()
    parser.read(pathlib.Path(score.__file__).with_name(f"{scope}.cfg"))
    mutated = {line.strip() for line in parser["mutmut"]["only_mutate"].splitlines() if line.strip()}
    modules = {
        path.relative_to(PROJECT_ROOT).as_posix()
        for path in (PROJECT_ROOT / package).rglob("*.py")  # policy/read/ too
        if path.name != "__init__.py" and path.name not in left_out
    }
    assert mutated == modules


@pytest.mark.parametrize("scope", ["ci", "core", "policy", "objects"])
def test_every_folder_of_the_project_is_in_the_mutation_workspace(scope):
    """mutmut runs the tests in a copy of the project made of `source_paths` and `also_copy` (and tests/): a package
    missing there fails the run at its first import (objects/ was, once), any other folder the first test that reads
    it (docs/ was, once)."""
    import configparser
    import pathlib
    import subprocess

    from core.stackfile import PROJECT_ROOT

    parser = configparser.ConfigParser()
    parser.read(pathlib.Path(score.__file__).with_name(f"{scope}.cfg"))
    copied = {
        line.strip().rstrip("/")
        for key in ("source_paths", "also_copy")
        for line in parser["mutmut"][key].splitlines()
        if line.strip()
    }
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    # Every top-level folder git tracks, the packages among them (mutmut copies tests/ itself).
    folders = {name.split("/", 1)[0] for name in tracked if "/" in name and not name.startswith((".", "tests/"))}
    assert folders <= copied, f"tests/mutation/{scope}.cfg: add {sorted(folders - copied)} to also_copy"
    # The stack files too: tests/core loads every one of them (a new stack failed CI's mutation run once).
    stacks = {path.name for path in PROJECT_ROOT.glob("Pulumi.*.yaml")}
    assert stacks <= copied, sorted(stacks - copied)
