"""pyproject.toml installs every package of the source tree: a non-editable install holds only
the packages `[tool.setuptools] packages` names, so a folder left off that list imports in the
source tree and is missing from a wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _tree_packages(package_dir: dict[str, str]) -> set[str]:
    """Every folder with an __init__.py under the folders pyproject maps to a package."""
    found = set()
    for package, folder in package_dir.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([package, *parts]))
    return found


def test_every_package_of_the_tree_is_installed():
    setuptools = _setuptools()
    missing = _tree_packages(setuptools["package-dir"]) - set(setuptools["packages"])
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_every_installed_package_is_a_folder_of_the_tree():
    setuptools = _setuptools()
    stale = set(setuptools["packages"]) - _tree_packages(setuptools["package-dir"])
    assert not stale, f"[tool.setuptools] packages names folders without an __init__.py: {sorted(stale)}"
