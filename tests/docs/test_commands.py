"""The commands README.md and docs/ show work as written on a fresh clone (issue 31 scope 1), as far as can
be told without running them (tests/real/test_readme_walk.py runs the README's): a Python command in a code
block says which Python (`.venv/bin/python`, the checkout's virtualenv), every `make` target named there
exists, every example a document names is there, and every relative link reaches its file and heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.emulator.testing import REPO_ROOT

DOCUMENTS = [
    REPO_ROOT / "README.md",
    *sorted((REPO_ROOT / "docs").glob("*.md")),
    REPO_ROOT / "examples/README.md",
]
DIAGRAM = ("──", "◄", "►", "│", "├")  # a code block drawing processes or files, not commands to run
BARE_PYTHON = re.compile(r"^\s*(?:\$ )?(?:[A-Z_]+=\S* )*python3? ")
MAKE = re.compile(r"^\s*(?:\$ )?(?:[A-Z_]+=\S* )*make ((?:[a-z][\w-]* ?)+)")


def code_lines(path: Path) -> list[tuple[int, str]]:
    """The numbered lines of the document's fenced code blocks, leaving out blocks that draw diagrams."""
    lines: list[tuple[int, str]] = []
    block: list[tuple[int, str]] | None = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            if block is not None and not any(mark in text for _, text in block for mark in DIAGRAM):
                lines += block
            block = [] if block is None else None
        elif block is not None:
            block.append((number, line))
    return lines


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE))


@pytest.mark.parametrize("path", DOCUMENTS, ids=[str(p.relative_to(REPO_ROOT)) for p in DOCUMENTS])
def test_commands_name_their_python_and_real_make_targets(path: Path) -> None:
    lines = code_lines(path)
    bare = [f"{path.name}:{n}: {line.strip()}" for n, line in lines if BARE_PYTHON.match(line)]
    assert bare == [], "say .venv/bin/python (the checkout's virtualenv), or wrap it in a make target"
    targets = make_targets()
    unknown = [
        f"{path.name}:{n}: make {word}"
        for n, line in lines
        if (found := MAKE.match(line))
        for word in found.group(1).split()
        if word not in targets
    ]
    assert unknown == []


def test_every_example_named_exists() -> None:
    named = {
        (path.name, name)
        for path in DOCUMENTS
        for name in re.findall(r"examples/[\w/.-]+\.yaml", path.read_text())
    }
    assert [f"{doc}: {name}" for doc, name in sorted(named) if not (REPO_ROOT / name).is_file()] == []


def anchors(path: Path) -> set[str]:
    """The heading anchors GitHub makes for a Markdown file (lower case, punctuation dropped, spaces to -,
    a repeated heading numbered)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    inside = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        heading = None if inside else re.match(r"^#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def test_every_relative_link_resolves() -> None:
    broken = []
    for document in DOCUMENTS:
        for target in re.findall(r"\]\(([^)\s]+)\)", document.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{document.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{document.name}: {target} (no such heading)")
    assert broken == []
