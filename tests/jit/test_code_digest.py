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


def test_functions_read_through_the_users_module_are_followed(tmp_path, monkeypatch):
    """`helpers.rows()` reads `helpers.ROWS` through the helper's globals, and a process may
    rebind `helpers.pick` (to another function or a partial) before it traces."""
    import functools

    (tmp_path / "tile_helpers.py").write_text(
        "ROWS = 64\ndef rows():\n    return ROWS\ndef small():\n    return 64\npick = small\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    helpers = importlib.import_module("tile_helpers")

    def kernel(x):
        return helpers.rows() + helpers.pick()

    texts = [digest_module.bound_values(kernel)]
    monkeypatch.setattr(helpers, "ROWS", 128)
    texts.append(digest_module.bound_values(kernel))
    monkeypatch.setattr(helpers, "pick", _rows_of_helper)
    texts.append(digest_module.bound_values(kernel))
    monkeypatch.setattr(helpers, "pick", functools.partial(max, 2))
    texts.append(digest_module.bound_values(kernel))
    assert None not in texts and len(set(texts)) == len(texts), texts
    monkeypatch.delitem(sys.modules, "tile_helpers")


class Tiles:
    """Settings a kernel reads as class attributes, which a process may set before it traces."""

    ROWS = 64

    @staticmethod
    def rows() -> int:
        return ROWS

    @property
    def shape(self) -> tuple:  # code, whatever its name: not a value of the key
        return (self.ROWS,)


def test_the_attributes_of_the_users_classes_are_values(monkeypatch):
    def kernel(x):
        return Tiles.ROWS + Tiles.rows() + x.shape[0]

    before = digest_module.bound_values(kernel)
    assert before is not None and "Tiles.ROWS=int:64" in before and f"ROWS=int:{ROWS}" in before
    monkeypatch.setattr(Tiles, "ROWS", 128)
    assert digest_module.bound_values(kernel) != before
    monkeypatch.setitem(globals(), "ROWS", ROWS + 1)  # read by the static method
    monkeypatch.setattr(Tiles, "ROWS", 64)
    assert digest_module.bound_values(kernel) not in (before, None)


def _rows_by_default(rows=ROWS, *, scale=1):
    return rows * scale


def test_default_arguments_are_values(monkeypatch):
    def kernel(x):
        return _rows_by_default()

    texts = [digest_module.bound_values(kernel)]
    monkeypatch.setattr(_rows_by_default, "__defaults__", (128,))
    texts.append(digest_module.bound_values(kernel))
    monkeypatch.setattr(_rows_by_default, "__kwdefaults__", {"scale": 2})
    texts.append(digest_module.bound_values(kernel))
    assert None not in texts and len(set(texts)) == 3, texts


def test_a_dataclass_goes_by_every_field():
    """Its repr leaves out fields declared with repr=False, and elides the middle of an array."""
    import dataclasses

    @dataclasses.dataclass
    class Plan:
        name: str
        rows: int = dataclasses.field(default=64, repr=False)
        table: object = None

    table = np.arange(5000)
    changed = table.copy()
    changed[2500] = -1
    plans = [Plan("p"), Plan("p", rows=128), Plan("p", table=table), Plan("p", table=changed)]
    assert len({repr(plan) for plan in plans}) < len(plans)
    texts = {digest_module.bound_values(_closing_over(plan)) for plan in plans}
    assert None not in texts and len(texts) == len(plans)


def test_digests_taken_in_threads_while_modules_load(monkeypatch):
    """Each digest adds the modules loaded since to the modules seen, which another thread's
    digest is reading meanwhile: it reads a copy."""
    import threading
    import time
    import types

    monkeypatch.setattr(digest_module, "_seen", {})
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    errors: list[Exception] = []
    loading = threading.Event()

    def digests() -> None:
        while loading.is_set() and not errors:
            try:
                digest_module.code_digest(__file__)
            except Exception as error:  # noqa: BLE001 - reported below
                errors.append(error)

    loading.set()
    threads = [threading.Thread(target=digests) for _ in range(2)]
    began = time.perf_counter()
    try:
        for thread in threads:
            thread.start()
        number = 0
        while not errors and time.perf_counter() - began < 2:
            monkeypatch.setitem(sys.modules, f"loaded_meanwhile_{number}", types.ModuleType("m"))
            number += 1
    finally:
        loading.clear()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)
    assert not errors
