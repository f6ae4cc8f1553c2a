"""The code examples of the blocks' docstrings, run as they are written."""

from __future__ import annotations

import inspect
import textwrap


def example_code(module) -> str:
    """The first indented block of `module`'s docstring (blank lines inside it kept)."""
    lines = inspect.getdoc(module).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    "))
    end = start
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    return textwrap.dedent("\n".join(lines[start:end]))


def run_example(module) -> dict:
    """The names the docstring's example defines, after running it."""
    names: dict = {}
    exec(compile(example_code(module), f"<{module.__name__} docstring>", "exec"), names)
    return names
