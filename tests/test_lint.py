"""The code's own static check: pyflakes' rules (ruff's F set) over the package, the tests, the
benchmarks and the docs' scripts: no unused import or variable, no undefined or redefined name, no
f-string without a placeholder.  Line length is checked too (E501, the project's 110 from
pyproject.toml); the other formatting rules are left out, as their verdicts move between ruff
versions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pyflakes_finds_nothing():
    checked = ["asyncdsl", "dialects", "passes", "tests", "benchmarks", "docs"]
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F,E501", "--output-format",
         "concise", *checked],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
