"""The manual: every relative link resolves (anchors to an existing heading), the README stays a short
manual with no dated measurement, and the user pages name nothing outside the repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", REPO / "bench" / "README.md", REPO / "analysis" / "README.md", REPO / "results" / "README.md",
                *(REPO / "docs").rglob("*.md")])
USER_PAGES = [REPO / "README.md", *(p for p in sorted((REPO / "docs").glob("*.md")) if p.name not in ("benchmarks.md", "benchmarks-history.md"))]

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans (links there are not links)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen, fenced = set(), {}, False
    for line in path.read_text().splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match and not fenced:
            base = slug(match.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[str]:
    return [t for t in LINK.findall(prose(path.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]        # http:, https:, mailto: are not checked here


def test_the_pages_exist():
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    for page in ("installation", "experiment-file", "strategies", "node-kinds", "servers", "checks-and-shaping",
                 "faults", "results", "cost-model", "commands", "ci", "python-api", "troubleshooting", "thesis",
                 "benchmarks", "developer/architecture", "developer/contracts", "developer/testing"):
        assert f"docs/{page}.md" in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading '#{anchor}' in {dest.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_readme_is_a_short_manual():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines; the manual's details belong in docs/"


DATED = [
    (r"\b20\d\d-\d\d-\d\d\b", "an ISO date"),
    (r"(?i)load average", "a load average"),
    (r"(?i)\bthis VM\b", "'this VM'"),
    (r"(?i)measured (here|on this machine)", "a measurement of this machine"),
]
ELSEWHERE = [
    (r"/tmp/dltb-devlock", "the developers' lock"),
    (r"(?i)other engineers", "other engineers"),
    (r"results/i13-", "a developers' results folder"),
    (r"shared/ENVIRONMENT", "a file outside the repository"),
    (r"(?i)\b(this|last|same|that|next) session\b", "how the work was organised"),
]


def offending(text: str, patterns) -> list[str]:
    return [f"{what} ({m.group(0)!r})" for pattern, what in patterns for m in [re.search(pattern, text)] if m]


def test_readme_has_no_dated_measurement():
    found = offending((REPO / "README.md").read_text(), DATED)
    assert not found, "README.md: " + "; ".join(found) + " (measurements go to docs/benchmarks.md)"


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_user_pages_name_nothing_outside_the_repository(page):
    found = offending(page.read_text(), ELSEWHERE + DATED[:3])
    assert not found, f"{page.relative_to(REPO)}: " + "; ".join(found)


def test_the_checker_finds_a_broken_link_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading (with punctuation)\n")
    page.write_text("[ok](other.md#a-code-heading-with-punctuation) [gone](missing.md) "
                    "[no heading](other.md#nope) `[not a link](nowhere.md)` [spaced](../a b)\n")
    assert links(page) == ["other.md#a-code-heading-with-punctuation", "missing.md", "other.md#nope", "../a b"]
    assert anchors(tmp_path / "other.md") == {"other-page", "a-code-heading-with-punctuation"}
    assert offending("Measured on 2026-11-22, load average 3", DATED) == [
        "an ISO date ('2026-11-22')", "a load average ('load average')"]


def test_the_benchmarks_page_keeps_to_todays_figures():
    """Today's figure per benchmark, read at a glance: the history lives on its own page and in git."""
    lines = (REPO / "docs" / "benchmarks.md").read_text().splitlines()
    assert len(lines) <= 500, f"docs/benchmarks.md has {len(lines)} lines; move older figures to benchmarks-history.md"
