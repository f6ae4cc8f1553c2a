"""The guide's pages (docs/guide/) mean what they show: every Python block of a page runs, in
order, in one namespace, in the interpreter."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: Path) -> list[str]:
    return BLOCK.findall(page.read_text())


@pytest.mark.parametrize("page", sorted(GUIDE.glob("*.md")), ids=lambda page: page.name)
def test_every_python_block_of_the_page_runs(page):
    blocks = python_blocks(page)
    assert blocks, f"{page.name} shows no Python"
    names: dict = {}
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"{page.name}, Python block {number}", "exec"), names)
