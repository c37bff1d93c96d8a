"""Nothing in the repository may point at material its users never see.

Docstrings, comments, claim references, markdown and data files must cite the papers themselves (author, title,
theorem, equation) or the project's own documents (``docs/design.md``, ``BENCHMARKS.md``, the README), never
internal design notes, paper notes, issue numbers or paths outside the repository.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: folders and files searched (relative to the repository root)
SEARCHED = ("flowlib", "kernels", "validation", "tests", "benchmarks", "docs", "README.md", "BENCHMARKS.md")
SUFFIXES = {".py", ".md", ".toml", ".json", ".txt", ".csv", ".rst", ".css"}
#: references to material outside the repository
PATTERNS = re.compile(r"DESIGN\.md|note[s]/|note 0[0]|verified\.md|integrators\.md|aesthetics\.md|share[d]/|issue \d")
SKIPPED_DIRS = {"__pycache__", ".git", ".pytest_cache", "node_modules", "_build"}


def searched_files():
    for entry in SEARCHED:
        path = ROOT / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.is_file() and file.suffix in SUFFIXES and not SKIPPED_DIRS.intersection(file.parts):
                    yield file


def outside_references():
    this = Path(__file__).resolve()
    hits = []
    for file in searched_files():
        if file.resolve() == this:
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            match = PATTERNS.search(line)
            if match:
                hits.append(f"{file.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()[:100]}")
    return hits


def test_the_search_finds_the_project_files():
    files = {file.relative_to(ROOT).as_posix() for file in searched_files()}
    assert "README.md" in files and "flowlib/flow.py" in files and "validation/core.py" in files


def test_the_pattern_catches_each_kind_of_reference():
    # the examples are assembled, so that this file holds no such reference itself
    for parts in (("see DES", "IGN", ".md §1"), ("no", "tes", "/integr", "ators", ".md"), ("no", "te 0", "03 §2.1"),
                  ("veri", "fied", ".md item 3"), ("aesth", "etics", ".md"), ("..", "/sha", "red", "/pap", "ers"),
                  ("iss", "ue", " 7")):
        text = "".join(parts)
        assert PATTERNS.search(text), text
    for text in ("docs/design.md, Solution concept", "Theorem 5.1", "an issue with 7 neurons", "notes"):
        assert not PATTERNS.search(text), text


def test_no_references_to_outside_material():
    hits = outside_references()
    assert not hits, f"{len(hits)} references to material outside the repository:\n" + "\n".join(hits)
