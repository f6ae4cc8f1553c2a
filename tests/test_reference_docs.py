"""docs/reference/ is what docs/reference/generate.py writes from the code: every public name of
asyncdsl and of the library packages, with its signature and docstring."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import asyncdsl

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"


def _generator():
    spec = importlib.util.spec_from_file_location("reference_generator", REFERENCE / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_current():
    expected = _generator().pages()
    on_disk = {path.name: path.read_text() for path in REFERENCE.glob("*.md")}
    stale = sorted(name for name in expected.keys() | on_disk.keys()
                   if expected.get(name) != on_disk.get(name))
    assert not stale, (f"docs/reference is out of date ({', '.join(stale)}): "
                       "run `python docs/reference/generate.py`")


def test_every_public_name_has_an_entry_with_its_docstring():
    pages = _generator().pages()
    text = "".join(pages.values())
    for name in asyncdsl.__all__:  # a section of its own, or a row of the element types' table
        assert f"### `asyncdsl.{name}`" in text or f"| `asyncdsl.{name}` |" in text, name
    # The text is the code's own: a docstring's first line appears under its name.
    first_line = asyncdsl.async_copy.__doc__.strip().splitlines()[0]
    assert first_line in pages["memory-and-copies.md"]
    assert "### `asyncdsl.DeadlockError`" in pages["errors.md"]


def test_a_name_without_a_page_stops_the_generator(monkeypatch):
    generator = _generator()
    monkeypatch.setattr(asyncdsl, "__all__", [*asyncdsl.__all__, "fresh_name"], raising=True)
    monkeypatch.setattr(asyncdsl, "fresh_name", lambda: None, raising=False)
    try:
        generator.pages()
    except SystemExit as stop:
        assert "no reference page for fresh_name" in str(stop)
    else:
        raise AssertionError("a name on no page was accepted")
