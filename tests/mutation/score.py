"""The mutation score of one scope, from `mutmut results --all true`, against its floor and the equivalents list.

Read by scripts/mutate after a run (and so by `make mutate` and .ci/run). A mutant is *killed* when a test failed
on it (mutmut's `killed`, and `timeout` or `segfault`: the tests did not pass). Every other mutant that ran
(`survived`, `no tests`, `suspicious`) is a survivor, unless tests/mutation/equivalents.txt lists it: an
equivalent mutant behaves exactly like the original, so no test can kill it, and the list says why, one line each.

    score = killed / (mutants - equivalent)

per file and over the scope; the run fails when one is below the floor of the scope's config
(tests/mutation/<scope>.cfg, section [score]), when a mutant was not checked, when a mutant listed as
equivalent was killed (then it was not equivalent: remove it from the list), or when a listed survivor is no longer
the change its line pins.

A line of the list is `<mutant name>  <change>  <reason>`; the change is the hash of the mutant's diff (change_hash).
mutmut numbers the mutants of a function in order, so a change to the function can give a listed name to another
mutant, perhaps a real survivor that would then be set aside unseen: a listed survivor whose diff has another hash
counts as a survivor and fails the run, until someone looks at it again.

    python -m tests.mutation.score SCOPE build/mutate/SCOPE/results.txt
    python -m tests.mutation.score --show SCOPE MUTANT-NAME ...   # diff and hash, for a line of the list
"""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import json
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
EQUIVALENTS = HERE / "equivalents.txt"
KILLED = frozenset({"killed", "timeout", "segfault"})
SURVIVED = frozenset({"survived", "no tests", "suspicious"})
# `core.rules.x_pp_with_dp__mutmut_3: killed`, `core.sizing.xǁRdsBudgetǁfits__mutmut_1: survived`
RESULT_LINE = re.compile(r"^\s*(?P<name>[\w.]+\.xǁ?[^:\s]*__mutmut_\d+): (?P<status>.+?)\s*$")
MODULE = re.compile(r"^(?P<module>[\w.]+?)\.xǁ?")
MUTANT_NAME = re.compile(r"^[\w.]+\.xǁ?\S*__mutmut_\d+$")
CHANGE = re.compile(r"^[0-9a-f]{12}$")
EQUIVALENT_FORMAT = "`<mutant name>  <change: 12 hex digits>  <reason>`"


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


@dataclasses.dataclass(frozen=True)
class Equivalent:
    """One line of the equivalents list: the mutant, the hash of the change it was judged on, and why."""

    name: str
    change: str
    reason: str
    line: int


def change_hash(diff: str) -> str:
    """The first 12 hex digits of the sha256 of a mutant's diff as `mutmut show NAME` prints it after its first
    line (`# NAME: status`), with the final newline: `mutmut show NAME | tail -n +2 | sha256sum | cut -c1-12`."""
    return hashlib.sha256((diff.rstrip("\n") + "\n").encode()).hexdigest()[:12]


def parse_equivalents(text: str) -> dict[str, Equivalent]:
    """Mutant name -> its entry. A line is `<mutant name>  <change>  <reason>`; `#` starts a comment."""
    equivalents: dict[str, Equivalent] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, change, reason = ([*line.split(None, 2), "", ""])[:3]
        where = f"equivalents.txt line {number}"
        if not MUTANT_NAME.match(name):
            raise ScoreError(f"{where}: {name!r} is not a mutmut mutant name; a line is {EQUIVALENT_FORMAT}.")
        if not CHANGE.match(change):
            raise ScoreError(
                f"{where}: {name} has no change hash (12 hex digits) after its name, {change!r} found; a "
                f"line is {EQUIVALENT_FORMAT}. `scripts/mutate SCOPE --show {name}` prints the mutant's "
                f"diff and hash: check that it is the change the reason is about."
            )
        if not reason.strip():
            raise ScoreError(
                f"{where}: {name} has no reason; write one line saying why no test can tell it from the original."
            )
        if name in equivalents:
            raise ScoreError(f"{where}: {name} is listed twice (first on line {equivalents[name].line}).")
        equivalents[name] = Equivalent(name, change, reason.strip(), number)
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
            out.append(
                f"{row.path:<24}{row.mutants:>8}{row.killed:>8}{row.equivalent:>8}{len(row.survivors):>7}"
                f"{row.score:>8.1f}%"
            )
        out.append("statuses: " + ", ".join(f"{status} {count}" for status, count in sorted(self.statuses.items())))
        survivors = self.total.survivors
        if survivors:
            out.append(
                f"survivors not listed in tests/mutation/equivalents.txt ({len(survivors)}): kill each with a "
                f"test, or list it there with the reason it is equivalent (`mutmut show NAME` in build/mutate/<scope>):"
            )
            out += [f"  {name}" for name in survivors]
        return out


def pinned_change(name: str, entry: Equivalent, diff: str | None) -> str | None:
    """Why the listed survivor `name` is not (or no longer known to be) the change its line vouches for, or None."""
    if diff is None:
        return (
            f"{name} is listed as equivalent (equivalents.txt line {entry.line}) but its diff could not be read, "
            f"so its change {entry.change} is not verified."
        )
    now = change_hash(diff)
    if now == entry.change:
        return None
    diff_lines = "\n".join(f"    {line}" for line in diff.splitlines())
    return (
        f"equivalents.txt line {entry.line}: {name} was judged equivalent as change {entry.change} "
        f"({entry.reason}), but that name now names change {now}; the code changed and mutmut may have "
        f"renumbered its mutants. Re-examine the entry: if this mutant is equivalent too, write its hash and a "
        f"reason on the line, else kill it with a test and drop or renumber the line. The mutant now:\n"
        f"{diff_lines}"
    )


def score(
    results: dict[str, str], equivalents: Mapping[str, Equivalent], floors: dict[str, float], diffs: Mapping[str, str]
) -> Report:
    """Score `results` per file and in total, and what makes the run fail. `diffs` holds the current diff of every
    listed mutant that survived (`listed_survivors`), whose hash must still be the one on its line."""
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
                problems.append(
                    f"{name} is listed as equivalent but a test killed it ({status}): it is not "
                    f"equivalent; remove it from tests/mutation/equivalents.txt."
                )
        elif status in SURVIVED:
            problem = pinned_change(name, equivalents[name], diffs.get(name)) if name in equivalents else None
            if name in equivalents and problem is None:
                for counted in (row, total):
                    counted.equivalent += 1
            else:  # not listed, or listed for another change: a survivor until someone looks again
                for counted in (row, total):
                    counted.survivors.append(name)
                if problem:
                    problems.append(problem)
        else:
            problems.append(f"{name} was not checked ({status}): run `make mutate` again to finish the run.")
    if not results:
        problems.append("no mutant results: did `mutmut run` run?")
    for path, floor in floors.items():
        row = total if path == "total" else files.get(path)
        if row is None:
            problems.append(f"{path} has a floor of {floor:g}% but no mutants in the results: is it in only_mutate?")
        elif row.score < floor:
            problems.append(
                f"{path}: {row.score:.1f}% of its mutants killed, below the floor of {floor:g}% "
                f"({len(row.survivors)} survivors listed above)."
            )
    return Report(files, total, problems, statuses)


def listed_survivors(results: Mapping[str, str], equivalents: Mapping[str, Equivalent]) -> list[str]:
    """The listed mutants whose change score() verifies: those that survived."""
    return sorted(name for name, status in results.items() if status in SURVIVED and name in equivalents)


# Run by the venv's python in build/mutate/<scope> (mutmut's working directory): the diff of each named mutant, as
# `mutmut show` computes it, in one process (`mutmut show` takes about 2 s a mutant, most of it starting up).
DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
print(json.dumps({name: get_diff_for_mutant(name, path=path) for name, path in json.loads(sys.argv[1]).items()}))
"""


def mutant_diffs(workspace: pathlib.Path, names: Iterable[str]) -> dict[str, str]:
    """Name -> diff (what `mutmut show NAME` prints after its first line) of mutants of the run in `workspace`."""
    names = list(names)
    if not names:
        return {}
    python = ROOT / ".venv" / "bin" / "python"
    proc = subprocess.run(
        [
            str(python if python.exists() else sys.executable),
            "-c",
            DIFFS,
            json.dumps({name: source_file(name) for name in names}),
        ],
        cwd=workspace,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ScoreError(
            f"could not read the diffs of {len(names)} mutants in {workspace} with mutmut "
            f"({proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    return json.loads(proc.stdout)


def show(workspace: pathlib.Path, names: Iterable[str]) -> str:
    """The diff and hash of each mutant, and the start of its line in the equivalents list."""
    out = []
    for name, diff in mutant_diffs(workspace, names).items():
        out += [f"# {name}", diff, f"{name}  {change_hash(diff)}  <why no test can tell it from the original>", ""]
    return "\n".join(out)


def read_floors(config: pathlib.Path) -> dict[str, float]:
    """The [score] section of a scope's config: `<file or total> = <percent>`."""
    parser = configparser.ConfigParser()
    parser.optionxform = str  # keep `core/rules.py` as written
    parser.read(config)
    if not parser.has_section("score"):
        raise ScoreError(f"{config} has no [score] section with the floors of the scope")
    return {path: float(value) for path, value in parser.items("score")}


def main(argv: Iterable[str]) -> int:
    """`python -m tests.mutation.score SCOPE RESULTS-FILE`: print the report; exit 1 when the run fails. The mutants
    are mutmut's in the results file's folder (build/mutate/<scope>). `--show SCOPE NAME ...`: their diffs and
    hashes."""
    args = list(argv)
    if args[:1] == ["--show"] and len(args) >= 3:
        try:
            print(show(ROOT / "build" / "mutate" / args[1], args[2:]))
        except (OSError, ScoreError) as error:
            print(f"mutation score: {error}", file=sys.stderr)
            return 2
        return 0
    if len(args) != 2:
        print(
            "usage: python -m tests.mutation.score SCOPE RESULTS-FILE\n"
            "       python -m tests.mutation.score --show SCOPE MUTANT-NAME ...",
            file=sys.stderr,
        )
        return 2
    scope, results_file = args
    try:
        results = parse_results(pathlib.Path(results_file).read_text())
        equivalents = parse_equivalents(EQUIVALENTS.read_text())
        floors = read_floors(HERE / f"{scope}.cfg")
        diffs = mutant_diffs(pathlib.Path(results_file).resolve().parent, listed_survivors(results, equivalents))
        report = score(results, equivalents, floors, diffs)
    except (OSError, ScoreError) as error:
        print(f"mutation score: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    listed = listed_survivors(results, equivalents)
    pinned = sum(name in diffs and change_hash(diffs[name]) == equivalents[name].change for name in listed)
    if listed:
        print(
            f"equivalents: {len(listed)} listed mutants survived, {pinned} of them still the change their line pins "
            f"(its hash in tests/mutation/equivalents.txt)"
        )
    else:
        print("equivalents: no mutant listed in tests/mutation/equivalents.txt survived in these results")
    for problem in report.problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
