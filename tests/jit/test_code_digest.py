"""What a kernel's trace depends on besides its arguments (`jit/code_digest.py`): the code, by
file, and the values the code names (closure cells, globals, the user's helpers and modules),
arrays among them by their bytes."""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np
from support import DeviceTensor, HostTensor

import asyncdsl as ad
from asyncdsl.jit import code_digest as digest_module

ROWS = 64  # a global the functions below read


def test_the_attributes_of_library_modules_are_code():
    def kernel(x):
        return np.pi * x + os.sep.count("/")

    assert digest_module.bound_values(kernel) == ""


def _rows_of_helper():
    return ROWS


def test_bound_values_follow_the_users_helpers_and_skip_modules_and_library_code():
    def make(scale):
        def kernel(x):
            return _rows_of_helper() * scale + ad.cdiv(x, 2) + np.float32(1)
        return kernel

    text = digest_module.bound_values(make(3))
    assert "scale=int:3" in text and f"ROWS=int:{ROWS}" in text and "_rows_of_helper" in text
    assert "ad=" not in text and "np=" not in text and "cdiv" not in text
    assert digest_module.bound_values(make(3)) != digest_module.bound_values(make(4))


def test_a_partial_goes_by_the_arguments_it_binds():
    import functools

    def make(scale):
        act = functools.partial(_rows_of_helper) if scale is None else functools.partial(max, scale)

        def kernel(x):
            return act(x)
        return kernel

    assert digest_module.bound_values(make(2)) != digest_module.bound_values(make(3))
    assert "_rows_of_helper" in digest_module.bound_values(make(None))


def test_bound_arrays_that_differ_inside_differ():
    """numpy's repr elides the middle of a long array; the bound values do not."""
    def make(table):
        def kernel(x):
            return table[x]
        return kernel

    table = np.arange(5000)
    changed = table.copy()
    changed[2500] = -1
    assert repr(table) == repr(changed)
    assert digest_module.bound_values(make(table)) != digest_module.bound_values(make(changed))


def _closing_over(value):
    def kernel(x):
        return value[x]
    return kernel


def test_bound_array_likes_and_arrays_inside_containers_differ_inside():
    table = np.arange(5000)
    changed = table.copy()
    changed[2500] = -1
    for wrap in (HostTensor, lambda t: (1, [t]), lambda t: {"table": t}):
        assert repr(wrap(table)) == repr(wrap(changed))
        assert digest_module.bound_values(_closing_over(wrap(table))) != digest_module.bound_values(
            _closing_over(wrap(changed)))
    assert digest_module.bound_values(_closing_over((1, [table]))) == digest_module.bound_values(
        _closing_over((1, [table.copy()])))


def test_an_array_the_host_cannot_read_leaves_no_bound_values():
    """Its bytes cannot go into a key, and its repr does not say what they are."""
    assert digest_module.bound_values(_closing_over(DeviceTensor(np.arange(5000)))) is None
    assert digest_module.bound_values(_closing_over(np.array([object()]))) is None


def test_an_edited_source_file_is_new_code(tmp_path, monkeypatch):
    module = tmp_path / "user_helpers.py"
    module.write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(digest_module, "_seen", {})
    import user_helpers  # noqa: F401 - a module of the user's, loaded

    before = digest_module.code_digest(__file__)
    module.write_text("SCALE = 22\n")
    monkeypatch.setattr(digest_module, "_seen", {})  # a new process sees the file as it is now
    assert digest_module.code_digest(__file__) != before
    monkeypatch.delitem(sys.modules, "user_helpers")


def _pip_target(folder, distribution: str, files: dict[str, str]) -> None:
    """`files` written into `folder` with the *.dist-info record pip --target writes for them."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    record = folder / f"{distribution}-1.0.dist-info" / "RECORD"
    record.parent.mkdir(parents=True)
    record.write_text("".join(f"{name},,\n" for name in files) + f"{distribution}-1.0.dist-info/RECORD,,\n")


def test_packages_installed_outside_site_packages_are_third_party(tmp_path, monkeypatch):
    """pip --target puts packages (and their *.dist-info) in a folder on PYTHONPATH: their
    modules, loaded lazily or not, leave the digest as it was; the user's code beside no
    dist-info still counts."""
    installed, users = tmp_path / "site", tmp_path / "project"
    _pip_target(installed, "lazy_package",
                {"lazy_package/__init__.py": "", "lazy_package/part.py": "X = 1\n"})
    users.mkdir()
    (users / "user_tools.py").write_text("Y = 2\n")
    for folder in (installed, users):
        monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(digest_module, "_seen", {})
    import lazy_package  # noqa: F401

    before = digest_module.code_digest(__file__)
    import lazy_package.part  # noqa: F401 - loaded later, as xDSL loads its dialects
    assert digest_module.code_digest(__file__) == before
    import user_tools  # noqa: F401
    assert digest_module.code_digest(__file__) != before
    for name in ("lazy_package", "lazy_package.part", "user_tools"):
        monkeypatch.delitem(sys.modules, name)


def test_the_users_code_beside_packages_installed_into_its_folder_counts(tmp_path, monkeypatch):
    """Dependencies installed into the project's own folder (`pip install --target .`, as for a
    zipped deployment): the user's package and module there are listed by no record, so each
    counts, as does a module of a namespace package the record lists no file of."""
    project = tmp_path / "project"
    _pip_target(project, "dependency", {"dependency/__init__.py": "", "shared/dependency_part.py": ""})
    (project / "user_package").mkdir()
    (project / "user_package" / "__init__.py").write_text("")
    (project / "user_package" / "blocks.py").write_text("B = 1\n")
    (project / "user_module.py").write_text("M = 1\n")
    (project / "shared" / "user_part.py").write_text("S = 1\n")  # `shared`: a namespace package
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.setattr(digest_module, "_seen", {})
    import dependency  # noqa: F401
    import shared.dependency_part  # noqa: F401

    digests = [digest_module.code_digest(__file__)]
    for name in ("user_package", "user_package.blocks", "user_module", "shared.user_part"):
        importlib.import_module(name)
        digests.append(digest_module.code_digest(__file__))
    assert len(set(digests)) == len(digests)
    for name in ("dependency", "shared", "shared.dependency_part", "user_package", "user_package.blocks",
                 "user_module", "shared.user_part"):
        monkeypatch.delitem(sys.modules, name)


def test_a_main_module_is_placed_by_the_name_it_was_run_as(tmp_path):
    """`python -m tool_package.cli` runs a package's file as __main__: its record lists it by the
    spec's name; a script run by path (no spec) is the user's."""
    import importlib.util
    import types

    _pip_target(tmp_path, "tool_package", {"tool_package/__init__.py": "", "tool_package/cli.py": ""})
    cli = str(tmp_path / "tool_package" / "cli.py")
    run_with_m = types.ModuleType("__main__")
    run_with_m.__spec__ = importlib.util.spec_from_file_location("tool_package.cli", cli)
    script = types.ModuleType("__main__")
    script.__spec__ = None
    assert digest_module._installed_package(run_with_m, cli)
    assert not digest_module._installed_package(script, cli)
    (tmp_path / "train.py").write_text("")
    assert not digest_module._installed_package(script, str(tmp_path / "train.py"))
