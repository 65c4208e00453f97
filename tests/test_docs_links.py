"""Every relative link of the front pages (README.md, docs/*.md, results/README.md) points at a file or folder
that is there, and a link to a heading (#anchor) at a heading the page has, as GitHub names its anchors."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "results" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def broken_links(page: Path) -> list[str]:
    """The page's relative links that lead nowhere."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # commands, not links
    broken = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no {shown(file)})")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target} (no heading #{fragment} in {shown(file)})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path):
    (tmp_path / "there.md").write_text("# A heading, with punctuation\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok](there.md#a-heading-with-punctuation) ![gone](missing.png) "
                    "[gone](there.md#nowhere)\n```\n[in a command](not/a/link)\n```\n")
    assert broken_links(page) == ["missing.png (no " + str(tmp_path / "missing.png") + ")",
                                  "there.md#nowhere (no heading #nowhere in " + str(tmp_path / "there.md") + ")"]


def test_the_readme_is_read_in_five_minutes():
    """At most 150 lines, and its quickstart is exactly the two commands."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    quickstart = readme.split("## Quickstart", 1)[1].split("```")[1]
    commands = [line.split("#")[0].strip() for line in quickstart.splitlines()[1:] if line.split("#")[0].strip()]
    assert commands == ["make demo", "make test"]
