"""The cubin disk cache: its key, its directory, and what a damaged or unwritable cache does."""

from __future__ import annotations

import pytest
from runtime_fakes import PTX, FakeCompiler

from asyncdsl.runtime import module_cache

# ---------------------------------------------------------------------------------- cubin cache


def test_cubin_key_is_stable_and_covers_every_input():
    key = module_cache.cubin_key(".version 8.0\n", "sm_90a", 13000, "nvjitlink-13.0")
    assert key == "8f3a50fe03ca7113d6d44cdb80361eb6bf58400063af18b6ccbcae178ed8ec3c"
    variants = {
        module_cache.cubin_key(".version 8.1\n", "sm_90a", 13000, "nvjitlink-13.0"),
        module_cache.cubin_key(".version 8.0\n", "sm_90", 13000, "nvjitlink-13.0"),
        module_cache.cubin_key(".version 8.0\n", "sm_90a", 13010, "nvjitlink-13.0"),
        module_cache.cubin_key(".version 8.0\n", "sm_90a", 13000, "driver-linker-13000"),
    }
    assert key not in variants and len(variants) == 4


def test_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "c"))
    assert module_cache.cache_directory() == tmp_path / "c" / "cubin"
    monkeypatch.delenv("ASYNCDSL_CACHE_DIR")
    assert module_cache.cache_directory() == module_cache.Path.home() / ".cache" / "asyncdsl" / "cubin"


def _compile(compiler, directory, ptx=PTX):
    return module_cache.cached_compile(ptx, "sm_90a", "k", compiler.compile, "fake-1", 13000,
                                       module_cache.CubinCache(directory))


def test_second_compile_hits_the_disk_cache(tmp_path):
    compiler = FakeCompiler()
    cubin, hit = _compile(compiler, tmp_path)
    assert (cubin, hit, compiler.calls) == (b"\x7fELFsm_90a:k:45", False, 1)
    key = module_cache.cubin_key(PTX, "sm_90a", 13000, "fake-1")
    stored = (tmp_path / key[:2] / f"{key}.cubin").read_bytes()
    # a checked header, then the cubin
    assert stored.endswith(cubin) and stored.startswith(b"asyncdsl-cubin-2")
    assert not [path for path in tmp_path.rglob("*") if path.suffix == ".tmp"]
    again, hit = _compile(compiler, tmp_path)  # a new CubinCache: no state but the files
    assert (again, hit, compiler.calls) == (cubin, True, 1)
    _, hit = _compile(compiler, tmp_path, PTX + "// changed\n")
    assert (hit, compiler.calls) == (False, 2)


def test_a_corrupt_cache_file_is_recompiled(tmp_path):
    compiler = FakeCompiler()
    cubin, _ = _compile(compiler, tmp_path)
    key = module_cache.cubin_key(PTX, "sm_90a", 13000, "fake-1")
    (tmp_path / key[:2] / f"{key}.cubin").write_bytes(b"garbage")
    again, hit = _compile(compiler, tmp_path)
    assert (again, hit, compiler.calls) == (cubin, False, 2)
    assert _compile(compiler, tmp_path)[1] is True


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "extended", "bare ELF"])
def test_a_damaged_cache_file_is_a_miss_and_is_replaced(tmp_path, damage):
    compiler = FakeCompiler()
    cubin, _ = _compile(compiler, tmp_path)
    key = module_cache.cubin_key(PTX, "sm_90a", 13000, "fake-1")
    path = tmp_path / key[:2] / f"{key}.cubin"
    stored = path.read_bytes()
    damaged = {
        "truncated": stored[:-3],  # still a header and the start of an ELF image
        "flipped byte": stored[:-1] + bytes([stored[-1] ^ 1]),
        "extended": stored + b"\0",
        "bare ELF": cubin,  # a file in the old format, no header
    }[damage]
    path.write_bytes(damaged)
    again, hit = _compile(compiler, tmp_path)
    assert (again, hit, compiler.calls) == (cubin, False, 2)
    assert path.read_bytes() == stored
    assert _compile(compiler, tmp_path)[1] is True


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def crash(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(module_cache.os, "replace", crash)
    compiler = FakeCompiler()
    with pytest.warns(RuntimeWarning, match="could not cache a cubin.*disk full"):
        cubin, hit = _compile(compiler, tmp_path)
    assert cubin.startswith(b"\x7fELF") and hit is False
    # Nothing but the key's lock file (empty; it stays, as a lock file must: `runtime/file_lock.py`).
    assert [path.suffix for path in tmp_path.rglob("*") if path.is_file()] == [".lock"]


def test_an_unwritable_cache_only_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="ASYNCDSL_CACHE_DIR"):
        cubin, hit = _compile(FakeCompiler(), blocker / "cache")
    assert cubin.startswith(b"\x7fELF") and hit is False
