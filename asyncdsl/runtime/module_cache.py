"""The on-disk cache of compiled cubins, so a kernel is assembled once per machine, not per process.

A cubin is filed under sha256(PTX, arch, driver version, installed compilers), in
`$ASYNCDSL_CACHE_DIR` or `~/.cache/asyncdsl`.  Writes go to a temporary file in the same directory
and are renamed into place, so concurrent processes and crashes leave either the whole cubin or
nothing.  Each file holds a header with the cubin's length and sha256 ahead of it, checked on every
read: a file truncated or altered by anything else (a full disk, a copy gone wrong) is a miss, and
the recompiled cubin replaces it.  The cache is an optimisation: a directory that cannot be
written only costs a warning.  A kernel the driver's JIT compiles (`jit_link.DriverJitCompiler`)
is filed as its PTX, the image that JIT loads (and caches the machine code of itself).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

from asyncdsl.config import CACHE_DIR, knobs
from asyncdsl.runtime.file_lock import exclusive

CACHE_FORMAT = "asyncdsl-cubin-5"  # bump when the key, the file layout or what a compiler makes changes
_HEADER = struct.Struct("<16sQ32s")  # magic, payload length, sha256 of the payload


def cache_directory() -> Path:
    """Where cubins are kept: `$ASYNCDSL_CACHE_DIR`, else `~/.cache/asyncdsl` (read on every call,
    so tests and tools can point it elsewhere)."""
    return knobs.cache_dir / "cubin"


def cubin_key(ptx: str, arch: str, driver_version: int, compilers: str) -> str:
    """The cache key of one compile (`compilers`: `jit_link.installed_compilers`): a sha256 hex
    digest, stable across processes and machines."""
    digest = hashlib.sha256()
    for part in (CACHE_FORMAT, arch, str(driver_version), compilers):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(ptx.encode())
    return digest.hexdigest()


def file_identity(path: str) -> tuple[str, int, int] | None:
    """(path, size, modification time) of a file, None if it cannot be read: what cache keys name
    an installed file or a source file by (rewritten files change it; reading them is not needed)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return path, status.st_size, status.st_mtime_ns


class ChecksummedFiles:
    """Byte strings on disk, one file per key (spread over 256 subdirectories), each behind a
    header with its kind (`magic`, 16 bytes), length and sha256; what it holds is `what` (for the
    warning when a file cannot be written)."""

    def __init__(self, directory: Path, suffix: str, magic: bytes, what: str):
        self.directory = directory
        self._suffix = suffix
        self._magic = magic.ljust(16, b"\0")
        self._what = what

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}{self._suffix}"

    def locked(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """The lock of `key` across processes (`file_lock.exclusive`): held while it is computed."""
        return exclusive(self.directory / key[:2] / f"{key}.lock")

    def load(self, key: str) -> bytes | None:
        """The bytes filed under `key`, or None if there are none or the file fails its check
        (a short, long or altered file, which is then written over)."""
        try:
            data = self.path(key).read_bytes()
        except OSError:
            return None
        if len(data) < _HEADER.size:
            return None
        magic, length, digest = _HEADER.unpack_from(data)
        payload = data[_HEADER.size :]
        if magic != self._magic or length != len(payload) or hashlib.sha256(payload).digest() != digest:
            return None
        return payload

    def store(self, key: str, payload: bytes) -> None:
        """Write `payload` atomically: readers see the old state or the whole new file."""
        target = self.path(key)
        temporary = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{key[:16]}.", suffix=".tmp")
            with os.fdopen(descriptor, "wb") as file:
                file.write(_HEADER.pack(self._magic, len(payload), hashlib.sha256(payload).digest()))
                file.write(payload)
            os.replace(temporary, target)
            temporary = None
        except OSError as error:
            warnings.warn(f"asyncdsl could not cache {self._what} in {self.directory} ({error}); kernels "
                          f"will be recompiled in every process (set {CACHE_DIR.variable} to a "
                          "writable directory)", RuntimeWarning, stacklevel=3)
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)


class CubinCache(ChecksummedFiles):
    """Cubins on disk by `cubin_key`."""

    def __init__(self, directory: Path):
        super().__init__(directory, ".cubin", b"asyncdsl-cubin-2", "a cubin")


def cached_compile(
    ptx: str,
    arch: str,
    name: str,
    compile_ptx: Callable[[str, str, str], bytes],
    compilers: str,
    driver_version: int,
    cache: CubinCache,
) -> tuple[bytes, bool]:
    """The cubin of `ptx` for `arch`, from `cache` if present, else from `compile_ptx(ptx, arch,
    name)` and then cached.  Returns (cubin, whether it came from the cache)."""
    key = cubin_key(ptx, arch, driver_version, compilers)
    cubin = cache.load(key)
    if cubin is not None:
        return cubin, True
    with cache.locked(key):
        cubin = cache.load(key)  # filed by the process this one waited for
        if cubin is not None:
            return cubin, True
        cubin = compile_ptx(ptx, arch, name)
        cache.store(key, cubin)
    return cubin, False
