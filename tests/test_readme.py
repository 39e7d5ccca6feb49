"""The README is a newcomer's page (issue 46): short, the two commands first, the manual in docs/.

The one-day track's minutes are checked against the course-time model in tests/test_course.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
MAX_LINES = 150

# The kit's two commands, exactly as the README has always given them (Makefile, .ci/run).
TWO_COMMANDS = [
    "make lab    # set up .venv, generate the fixtures, open JupyterLab on notebooks/",
    "make test   # set up .venv, run the unit/contract/bad-input tests and every notebook "
    "(nbval, ci scale)",
]

LINK = re.compile(r"\]\(([^)\s]+)\)")


def fenced_blocks(text: str) -> list[list[str]]:
    """The lines inside each ``` fence, in order."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_the_readme_is_at_most_150_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md is {len(lines)} lines (at most {MAX_LINES}): move the detail to a docs/ page")


def test_the_readmes_first_commands_are_the_two_commands():
    text = README.read_text(encoding="utf-8")
    blocks = fenced_blocks(text)
    assert blocks, "README.md has no fenced commands"
    assert blocks[0] == TWO_COMMANDS, (
        f"README.md's first fenced block should be the two commands {TWO_COMMANDS}, "
        f"not {blocks[0]}")
    heading = text.index("## The two commands")
    assert heading < text.index("```") and text.count("\n## ", 0, heading) == 0, (
        "the two commands should be the README's first section")


def test_every_docs_page_is_linked_from_the_readme():
    links = set(LINK.findall(README.read_text(encoding="utf-8")))
    missing = [f"docs/{p.name}" for p in DOCS if f"docs/{p.name}" not in links]
    assert not missing, f"README.md links no page {missing}: add it to 'Where the rest is'"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.relative_to(REPO).as_posix())
def test_local_links_point_at_files_that_exist(page):
    """Every link to a file in the repository resolves (a page moved leaves no dead link)."""
    dead = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            dead.append(target)
    assert not dead, f"{page.relative_to(REPO)} links to files that do not exist: {dead}"


def test_every_docs_page_links_back_to_the_readme():
    lost = [p.name for p in DOCS if "](../README.md)" not in p.read_text(encoding="utf-8")]
    assert not lost, f"docs pages with no way back to the README: {lost}"


def test_every_file_ci_names_for_the_newest_torch_exists():
    """.ci/run's LATEST_IN_CI: a deleted test file there left the newest-torch leg with
    nothing to collect (pytest exit 5, 2026-12-03)."""
    text = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    names = re.search(r'LATEST_IN_CI="([^"]*)"', text).group(1).split()
    assert names and [n for n in names if not (REPO / n).is_file()] == []
