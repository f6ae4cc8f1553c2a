"""What the docs and the code point at exists: relative links of the Markdown pages, the result
files named in docs and code, the sections of docs/hardware.md cited as `hardware.md §N.M`, and the
notes cited by path.  docs/notes/ are dated logs: the result files they name are in git history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted({ROOT / "README.md", *ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md"),
                ROOT / "benchmarks" / "README.md"})
SOURCES = sorted(path for folder in ("asyncdsl", "dialects", "passes", "benchmarks", "tests", "docs")
                 for path in (ROOT / folder).rglob("*.py"))
LINK = re.compile(r"\]\(([^()\s]+)\)")
RESULT = re.compile(r"results/([A-Za-z0-9_.-]+\.(?:json|png))")
SECTION = re.compile(r"hardware\.md\s+§\s?(\d+(?:\.\d+)?)")
NOTE = re.compile(r"docs/notes/[A-Za-z0-9_.-]+\.md")


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_of_the_page_resolve(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{_name(page)} links to what does not exist: {', '.join(broken)}"


def _hardware_sections() -> set[str]:
    text = (ROOT / "docs" / "hardware.md").read_text()
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, flags=re.M))


def test_cited_files_and_sections_exist():
    sections = _hardware_sections()
    results = {path.name for path in (ROOT / "benchmarks" / "results").iterdir()}
    missing = []
    for path in [*PAGES, *SOURCES]:
        text = path.read_text()
        historical = path.parent.name == "notes"
        for name in RESULT.findall(text):
            if "NAME" not in name and name not in results and not historical:
                missing.append(f"{_name(path)}: results/{name}")
        for section in SECTION.findall(text):
            if section not in sections:
                missing.append(f"{_name(path)}: docs/hardware.md §{section}")
        for note in NOTE.findall(text):
            if not (ROOT / note).is_file():
                missing.append(f"{_name(path)}: {note}")
    assert not missing, "cited but missing:\n" + "\n".join(missing)
