"""The `asyncdsl` command: look at what the compiler makes of a kernel.

    asyncdsl dump FILE.py[:KERNEL] [--after PASS]... [--all] [--ptx]
    asyncdsl profile FILE.py[:KERNEL] [--out-dir DIR] [--plot] [--interpret]
    asyncdsl info
    asyncdsl cache [--clear]

`dump` traces the kernel with the example arguments the file declares in
`EXAMPLE_ARGS = {"kernel_name": (args, kwargs)}` (arrays as `asyncdsl.ArraySpec(shape, dtype)`)
and prints the IR after tracing and after each pass, and the PTX. With no selection it prints
everything; `--after` picks passes, `--all` every IR stage, `--ptx` the PTX.

`profile` runs the kernel once on random arrays of the example shapes with its `asyncdsl.region`s
timed (`Kernel.profile`: on the GPU if there is one, else, or with `--interpret`, in the
interpreter on its logical clock), writes KERNEL.trace.json (for ui.perfetto.dev) and, with
`--plot`, KERNEL.timeline.png into DIR, and prints the summary table.

`cache` says what the disk caches hold (cubins, and compiled kernels that later processes launch
without tracing) and, with `--clear`, empties them: only asyncdsl's own folders in
$ASYNCDSL_CACHE_DIR, whatever else that directory holds.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np

from asyncdsl.errors import AsyncDSLError
from asyncdsl.jit.kernel import Kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.passes.pipeline import PASS_NAMES

STAGES = ("trace", *PASS_NAMES)


def _load(path: Path, command: str):
    spec = importlib.util.spec_from_file_location(f"asyncdsl_dump_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"asyncdsl {command}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


def _kernels(module, wanted: str | None, command: str) -> list[tuple[str, Kernel]]:
    found = [(name, value) for name, value in vars(module).items() if isinstance(value, Kernel)]
    if wanted is not None:
        found = [(name, k) for name, k in found if name == wanted]
        if not found:
            raise SystemExit(f"asyncdsl {command}: no kernel named {wanted!r} in {module.__file__}")
    if not found:
        raise SystemExit(f"asyncdsl {command}: {module.__file__} defines no @asyncdsl.kernel")
    return found


def _examples(target: str, command: str):
    """(path, [(name, kernel, args, kwargs)]) for the kernels `target` names, with their example
    arguments."""
    path_text, _, kernel_name = target.partition(":")
    path = Path(path_text)
    if not path.is_file():
        raise SystemExit(f"asyncdsl {command}: no such file {path}")
    module = _load(path, command)
    examples = getattr(module, "EXAMPLE_ARGS", {})
    found = []
    for name, kernel in _kernels(module, kernel_name or None, command):
        if name not in examples:
            raise SystemExit(
                f"asyncdsl {command}: {path} has no example arguments for {name}; add "
                f"EXAMPLE_ARGS = {{{name!r}: ((asyncdsl.ArraySpec(shape, dtype), ...), {{constexprs}})}}"
            )
        args, kwargs = examples[name]
        found.append((name, kernel, args, kwargs))
    return path, found


def dump(target: str, after: list[str], all_stages: bool, ptx: bool) -> int:
    _, kernels = _examples(target, "dump")
    chosen = list(after) or (list(STAGES) if all_stages else [])
    if not chosen and not ptx:
        chosen, ptx = list(STAGES), True
    for name, kernel, args, kwargs in kernels:
        stages = kernel.stages(*args, **kwargs)
        for stage in chosen:
            print(f"// ===== {name}: after {stage} =====")
            print(stages[stage])
        if ptx:
            print(f"// ===== {name}: PTX =====")
            print(stages["ptx"])
    return 0


def _random_array(spec: ArraySpec, rng: np.random.Generator) -> np.ndarray:
    if spec.dtype.is_float:
        return rng.standard_normal(spec.shape).astype(spec.dtype.numpy)
    return rng.integers(0, 8, spec.shape).astype(spec.dtype.numpy)


def profile(target: str, out_dir: str, plot: bool, interpret: bool) -> int:
    from asyncdsl.runtime import has_gpu, to_device

    _, kernels = _examples(target, "profile")
    on_gpu = has_gpu() and not interpret
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, kernel, args, kwargs in kernels:
        arrays = [_random_array(a, rng) if isinstance(a, ArraySpec) else a for a in args]
        if on_gpu:
            result = kernel.profile(
                *[to_device(a) if isinstance(a, np.ndarray) else a for a in arrays], **kwargs)
        else:
            result = kernel.interpret_profile(*arrays, **kwargs)
        written = result.save(folder / f"{name}.trace.json")
        if plot:
            written.append(result.plot(folder / f"{name}.timeline.png"))
        result.summary()
        print(f"wrote {', '.join(str(path) for path in written)} (open the .json in ui.perfetto.dev)")
    return 0


def info() -> int:
    from asyncdsl import __version__
    from asyncdsl.runtime import has_gpu
    from asyncdsl.runtime.ptxas import find_ptxas

    print(f"asyncdsl {__version__}")
    print(f"ptxas: {find_ptxas() or 'not found'}")
    print("GPU: "
          f"{'yes' if has_gpu() else 'none (kernels can run with kernel.interpret or ASYNCDSL_INTERPRET=1)'}")
    return 0


def cache(clear: bool) -> int:
    import shutil

    from asyncdsl.config import KERNEL_CACHE, knobs
    from asyncdsl.runtime import cache_directory
    from asyncdsl.runtime.binary_cache import binary_directory

    for what, folder in (("cubins", cache_directory()), ("compiled kernels", binary_directory())):
        files = [path for path in folder.rglob("*") if path.is_file()] if folder.is_dir() else []
        size = sum(path.stat().st_size for path in files)
        print(f"{what}: {len(files)} files, {size / 2**20:.1f} MiB in {folder}")
        if clear and folder.is_dir():
            shutil.rmtree(folder)
    if clear:
        print("cleared")
    print(f"compiled kernels are {'taken' if knobs.kernel_cache else 'not taken'} from the disk "
          f"({KERNEL_CACHE.variable}={'1' if knobs.kernel_cache else '0'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="asyncdsl", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    dump_parser = commands.add_parser("dump", help="print a kernel's IR after each pass and its PTX")
    dump_parser.add_argument("target", help="FILE.py or FILE.py:KERNEL")
    dump_parser.add_argument("--after", action="append", default=[], choices=STAGES, metavar="PASS",
                             help=f"print the IR after PASS (one of: {', '.join(STAGES)}); repeatable")
    dump_parser.add_argument("--all", action="store_true", help="print the IR after every pass")
    dump_parser.add_argument("--ptx", action="store_true", help="print the PTX")
    profile_parser = commands.add_parser("profile",
                                         help="run a kernel once with its regions timed; write a trace")
    profile_parser.add_argument("target", help="FILE.py or FILE.py:KERNEL")
    profile_parser.add_argument("--out-dir", default=".", help="where KERNEL.trace.json goes (default: here)")
    profile_parser.add_argument("--plot", action="store_true",
                                help="also draw KERNEL.timeline.png (matplotlib)")
    profile_parser.add_argument("--interpret", action="store_true",
                                help="use the interpreter even with a GPU")
    commands.add_parser("info", help="what this installation can do (ptxas, GPU)")
    cache_parser = commands.add_parser("cache", help="what the disk caches hold; --clear empties them")
    cache_parser.add_argument("--clear", action="store_true", help="remove the cached cubins and kernels")
    options = parser.parse_args(argv)
    try:
        if options.command == "dump":
            return dump(options.target, options.after, options.all, options.ptx)
        if options.command == "profile":
            return profile(options.target, options.out_dir, options.plot, options.interpret)
        if options.command == "cache":
            return cache(options.clear)
        return info()
    except AsyncDSLError as error:
        print(f"asyncdsl: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
