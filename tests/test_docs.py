"""README.md and docs/: every relative link and #anchor resolves, and the README stays a first page
(small, the two commands in its first screen)."""

from __future__ import annotations

import pathlib
import re

from core.stackfile import PROJECT_ROOT

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
EXTERNAL = ("http://", "https://", "mailto:")


def pages(root: pathlib.Path) -> list[pathlib.Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (links in code are examples, not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def anchor(heading: str) -> str:
    """GitHub's id of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: pathlib.Path) -> set[str]:
    found: set[str] = set()
    for line in _prose(page.read_text()):
        match = re.match(r"^#{1,6}\s+(.*)$", line)
        if match:
            slug, n = anchor(match.group(1)), 1
            while slug in found:  # repeated headings get -1, -2, ...
                slug, n = f"{anchor(match.group(1))}-{n}", n + 1
            found.add(slug)
    return found


def broken_links(root: pathlib.Path) -> list[str]:
    """Each relative link or #anchor of README.md and docs/*.md that does not resolve inside `root`."""
    problems = []
    for page in pages(root):
        for line in _prose(page.read_text()):
            for target in LINK.findall(line):
                if target.startswith(EXTERNAL):
                    continue
                where = f"{page.relative_to(root)}: ({target})"
                path_part, _, fragment = target.partition("#")
                resolved = (page.parent / path_part).resolve() if path_part else page
                if not resolved.is_relative_to(root.resolve()):
                    problems.append(f"{where} leaves the repository")
                elif not resolved.exists():
                    problems.append(f"{where} names a file that does not exist")
                elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                    problems.append(f"{where} names no heading of {resolved.name}")
    return problems


def test_every_link_resolves():
    assert broken_links(PROJECT_ROOT) == []


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Two words\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#two-words) [self](#top) [gone](docs/b.md) [bad anchor](docs/a.md#three)\n"
        "[out](../shared/x.md) [web](https://example.org/x)\n\n# Top\n\n```\n[in code](nowhere.md)\n```\n"
    )
    assert broken_links(tmp_path) == [
        "README.md: (docs/b.md) names a file that does not exist",
        "README.md: (docs/a.md#three) names no heading of a.md",
        "README.md: (../shared/x.md) leaves the repository",
    ]


def test_github_anchors():
    assert (
        anchor("Deploying: `make up`, your own cluster, and what `up` does")
        == "deploying-make-up-your-own-cluster-and-what-up-does"
    )
    assert anchor("Offline tools (no Pulumi CLI, no cluster)") == "offline-tools-no-pulumi-cli-no-cluster"


def test_readme_is_a_first_page():
    text = (PROJECT_ROOT / "README.md").read_text()
    assert len(text.encode()) <= 8 * 1024, "README.md grew over 8 KB: move reference material to docs/"
    first_screen = "\n".join(text.splitlines()[:30])
    assert "make up" in first_screen and "make test" in first_screen


def test_every_alert_has_a_runbook_where_its_runbook_url_points():
    """docs/operations.md has a section per alert of the stack (under the heading its runbook_url's anchor names), and
    each says what to look at first and what usually fixes it."""
    from core import alerts
    from core.config import StackConfig

    runbooks = StackConfig().observability.alerts.runbook_url  # the default: this repository's page
    page = PROJECT_ROOT / runbooks
    found = alerts.alerts(StackConfig())  # the Target Configuration: every alert
    sections = re.split(r"^### ", page.read_text(), flags=re.M)
    by_heading = {section.split("\n", 1)[0].strip(): section for section in sections[1:]}
    for alert in found:
        link = alerts.runbook_link(runbooks, alert.name)
        assert link.split("#", 1)[1] in anchors(page), f"{link}: no such heading"
        section = by_heading[alert.name]
        assert "First look" in section and "Usual fixes" in section, alert.name
        assert alert.severity.capitalize() in section, f"{alert.name}: its severity is not said"
