"""The disk caches shared by processes that start at once (the ranks of one job): eight processes
asking for the same kernels at the same moment compile each kernel once between them, the others
waiting on the key's lock (`runtime/file_lock.py`) and reading what the first one filed; the same
for the cubin cache's compiles.  Each process logs every compile it runs to one file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

from asyncdsl.runtime import file_lock

PROCESSES = 8

WORKER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import asyncdsl as ad
    from asyncdsl.jit import specializations
    from asyncdsl.runtime import module_cache
    from asyncdsl.examples.tile_copy import tile_copy

    log, ready, processes = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    compile_module = specializations.compile_module

    def logged(*args, **kwargs):
        with open(log, "a") as file:  # O_APPEND: whole lines from every process
            file.write(f"trace {os.getpid()}\\n")
        time.sleep(0.2)  # a compile long enough for the others to arrive while it runs
        return compile_module(*args, **kwargs)

    specializations.compile_module = logged

    def assemble(ptx, arch, name):
        with open(log, "a") as file:
            file.write(f"assemble {name} {os.getpid()}\\n")
        time.sleep(0.2)
        return ptx.encode()

    (ready / str(os.getpid())).touch()
    while len(list(ready.iterdir())) < processes:  # start together
        time.sleep(0.01)
    cubins = module_cache.CubinCache(module_cache.cache_directory())
    for shape, tile in (((64, 64), 32), ((128, 64), 64)):
        spec = ad.ArraySpec(shape, ad.float32)
        binary = tile_copy.binary((spec, spec), {"BM": tile, "BN": tile})
        cubin, _ = module_cache.cached_compile(binary.ptx, binary.arch, binary.name, assemble, "test", 1,
                                               cubins)
        assert cubin == binary.ptx.encode()
    print("done")
""")


def test_processes_starting_together_compile_each_kernel_once(tmp_path):
    log, ready = tmp_path / "compiles.log", tmp_path / "ready"
    ready.mkdir()
    environment = {**os.environ, "ASYNCDSL_CACHE_DIR": str(tmp_path / "cache"), "ASYNCDSL_KERNEL_CACHE": "1"}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(log), str(ready), str(PROCESSES)],
                                env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(PROCESSES)]
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0 and out.strip() == "done", err
    lines = log.read_text().splitlines()
    assert sorted(line.split()[0] for line in lines) == ["assemble", "assemble", "trace", "trace"], lines
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_the_lock_excludes_and_is_released_by_a_process_that_dies(tmp_path):
    path = tmp_path / "k" / "key.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from asyncdsl.runtime.file_lock import exclusive\n"
         "with exclusive(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    acquired = threading.Event()

    def take():
        with file_lock.exclusive(path) as held:
            assert held
            acquired.set()

    waiter = threading.Thread(target=take)
    waiter.start()
    time.sleep(0.3)
    assert not acquired.is_set()  # the other process holds it
    holder.kill()  # dies holding the lock: the kernel releases it
    holder.wait()
    waiter.join(timeout=30)
    assert acquired.is_set()


def test_a_directory_that_cannot_hold_the_lock_runs_unlocked(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with file_lock.exclusive(blocker / "sub" / "key.lock") as held:
        assert held is False
