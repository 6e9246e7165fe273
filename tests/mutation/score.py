"""The mutation score of one scope, from `mutmut results --all true`, against its floor and the equivalents list.

Read by scripts/mutate after a run (and so by `make mutate` and .ci/run). A mutant is *killed* when a test failed
on it (mutmut's `killed`, and `timeout` or `segfault`: the tests did not pass). Every other mutant that ran
(`survived`, `no tests`, `suspicious`) is a survivor, unless tests/mutation/equivalents.txt lists it: an
equivalent mutant behaves exactly like the original, so no test can kill it, and the list says why, one line each.

    score = killed / (mutants - equivalent)

per file and over the scope; the run fails when one is below the floor of the scope's config
(tests/mutation/<scope>.cfg, section [score]), when a mutant was not checked, or when a mutant listed as
equivalent was killed (then it was not equivalent: remove it from the list).
"""
from __future__ import annotations

import configparser
import dataclasses
import pathlib
import re
import sys
from typing import Iterable

HERE = pathlib.Path(__file__).resolve().parent
EQUIVALENTS = HERE / "equivalents.txt"
KILLED = frozenset({"killed", "timeout", "segfault"})
SURVIVED = frozenset({"survived", "no tests", "suspicious"})
# `core.rules.x_pp_with_dp__mutmut_3: killed`, `core.sizing.xǁRdsBudgetǁfits__mutmut_1: survived`
RESULT_LINE = re.compile(r"^\s*(?P<name>[\w.]+\.xǁ?[^:\s]*__mutmut_\d+): (?P<status>.+?)\s*$")
MODULE = re.compile(r"^(?P<module>[\w.]+?)\.xǁ?")


class ScoreError(ValueError):
    """Results or lists that cannot be read."""


def parse_results(text: str) -> dict[str, str]:
    """Mutant name -> status, from the output of `mutmut results --all true`."""
    results = {}
    for line in text.splitlines():
        match = RESULT_LINE.match(line)
        if match:
            results[match["name"]] = match["status"]
    return results


def parse_equivalents(text: str) -> dict[str, str]:
    """Mutant name -> reason. A line is `<mutant name>  <reason>`; `#` starts a comment."""
    equivalents = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        if not reason.strip():
            raise ScoreError(f"equivalents.txt line {number}: {name} has no reason; write one line saying why no "
                             f"test can tell it from the original.")
        equivalents[name] = reason.strip()
    return equivalents


def source_file(mutant: str) -> str:
    """`core.rules.x_pp_with_dp__mutmut_3` -> `core/rules.py`."""
    match = MODULE.match(mutant)
    if not match:
        raise ScoreError(f"{mutant!r} is not a mutmut mutant name")
    return match["module"].replace(".", "/") + ".py"


@dataclasses.dataclass
class FileScore:
    path: str
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[str] = dataclasses.field(default_factory=list)

    @property
    def score(self) -> float:
        judged = self.mutants - self.equivalent
        return 100.0 if judged == 0 else 100.0 * self.killed / judged


@dataclasses.dataclass
class Report:
    files: dict[str, FileScore]
    total: FileScore
    problems: list[str]
    statuses: dict[str, int]

    def lines(self) -> list[str]:
        out = [f"{'file':<24}{'mutants':>8}{'killed':>8}{'equiv.':>8}{'surv.':>7}{'score':>9}"]
        for row in [*sorted(self.files.values(), key=lambda f: f.path), self.total]:
            out.append(f"{row.path:<24}{row.mutants:>8}{row.killed:>8}{row.equivalent:>8}{len(row.survivors):>7}"
                       f"{row.score:>8.1f}%")
        out.append("statuses: " + ", ".join(f"{status} {count}" for status, count in sorted(self.statuses.items())))
        survivors = self.total.survivors
        if survivors:
            out.append(f"survivors not listed in tests/mutation/equivalents.txt ({len(survivors)}): kill each with a "
                       f"test, or list it there with the reason it is equivalent (`mutmut show NAME` in build/mutate/<scope>):")
            out += [f"  {name}" for name in survivors]
        return out


def score(results: dict[str, str], equivalents: dict[str, str], floors: dict[str, float]) -> Report:
    """Score `results` per file and in total, and what makes the run fail."""
    files: dict[str, FileScore] = {}
    total = FileScore("total")
    statuses: dict[str, int] = {}
    problems = []
    for name, status in sorted(results.items()):
        statuses[status] = statuses.get(status, 0) + 1
        row = files.setdefault(source_file(name), FileScore(source_file(name)))
        for counted in (row, total):
            counted.mutants += 1
        if status in KILLED:
            for counted in (row, total):
                counted.killed += 1
            if name in equivalents:
                problems.append(f"{name} is listed as equivalent but a test killed it ({status}): it is not "
                                f"equivalent; remove it from tests/mutation/equivalents.txt.")
        elif status in SURVIVED:
            if name in equivalents:
                for counted in (row, total):
                    counted.equivalent += 1
            else:
                for counted in (row, total):
                    counted.survivors.append(name)
        else:
            problems.append(f"{name} was not checked ({status}): run `make mutate` again to finish the run.")
    if not results:
        problems.append("no mutant results: did `mutmut run` run?")
    for path, floor in floors.items():
        row = total if path == "total" else files.get(path)
        if row is None:
            problems.append(f"{path} has a floor of {floor:g}% but no mutants in the results: is it in only_mutate?")
        elif row.score < floor:
            problems.append(f"{path}: {row.score:.1f}% of its mutants killed, below the floor of {floor:g}% "
                            f"({len(row.survivors)} survivors listed above).")
    return Report(files, total, problems, statuses)


def read_floors(config: pathlib.Path) -> dict[str, float]:
    """The [score] section of a scope's config: `<file or total> = <percent>`."""
    parser = configparser.ConfigParser()
    parser.optionxform = str  # keep `core/rules.py` as written
    parser.read(config)
    if not parser.has_section("score"):
        raise ScoreError(f"{config} has no [score] section with the floors of the scope")
    return {path: float(value) for path, value in parser.items("score")}


def main(argv: Iterable[str]) -> int:
    """`python -m tests.mutation.score SCOPE RESULTS-FILE`: print the report; exit 1 when the run fails."""
    args = list(argv)
    if len(args) != 2:
        print("usage: python -m tests.mutation.score SCOPE RESULTS-FILE", file=sys.stderr)
        return 2
    scope, results_file = args
    try:
        report = score(parse_results(pathlib.Path(results_file).read_text()),
                       parse_equivalents(EQUIVALENTS.read_text()), read_floors(HERE / f"{scope}.cfg"))
    except (OSError, ScoreError) as error:
        print(f"mutation score: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    for problem in report.problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
