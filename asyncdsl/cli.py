"""The `asyncdsl` command: look at what the compiler makes of a kernel.

    asyncdsl dump FILE.py[:KERNEL] [--args SPECS] [--after PASS]... [--all] [--ptx]
    asyncdsl profile FILE.py[:KERNEL] [--args SPECS] [--out-dir DIR] [--plot] [--interpret]
    asyncdsl info
    asyncdsl cache [--clear]

`dump` traces the kernel with the arguments `--args` gives, by name:

    asyncdsl dump my_kernels.py:tile_copy --args "src=f32[1024,512] dst=f32[1024,512] BM=64 BN=64"

an array as DTYPE[D0,D1,...] (any name `asyncdsl.dtypes` knows: f32, bf16, e4m3, ...), a constexpr
or a runtime scalar as a Python literal (64, 0.5, True, 'm', (2, 1)).  Without `--args` it takes
the example arguments the file declares in `EXAMPLE_ARGS = {"kernel_name": (args, kwargs)}`
(arrays as `asyncdsl.ArraySpec(shape, dtype)`).  It prints the IR after tracing and after each
pass, and the PTX. With no selection it prints everything; `--after` picks passes, `--all` every
IR stage, `--ptx` the PTX.

`profile` runs the kernel once on random arrays of the `--args` (or example) shapes with its
`asyncdsl.region`s timed (`Kernel.profile`: on the GPU if there is one, else, or with
`--interpret`, in the interpreter on its logical clock), writes KERNEL.trace.json (for
ui.perfetto.dev) and, with `--plot`, KERNEL.timeline.png into DIR, and prints the summary table.

`cache` says what the disk caches hold (cubins, and compiled kernels that later processes launch
without tracing) and, with `--clear`, empties them: only asyncdsl's own folders in
$ASYNCDSL_CACHE_DIR, whatever else that directory holds.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import AsyncDSLError
from asyncdsl.jit.kernel import Kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.passes.pipeline import PASS_NAMES

STAGES = ("trace", *PASS_NAMES)
ARGS_HELP = ("the kernel's arguments by name, e.g. \"x=f32[1024,512] y=f32[1024,512] BM=64\": arrays as "
             "DTYPE[D0,D1,...], constexprs and scalars as Python literals (default: the file's EXAMPLE_ARGS)")


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


_ARGUMENT = re.compile(r"\s*(?P<name>[^\s=]*)\s*=\s*(?P<value>\w+\[[^\]]*\]|\S+)")
_ARRAY = re.compile(r"(?P<dtype>\w+)\[(?P<dims>[^\]]*)\]")


def argument_specs(text: str, command: str) -> dict[str, Any]:
    """The kernel arguments `--args` names: NAME=DTYPE[D0,D1,...] for an array (an `ArraySpec`),
    NAME=LITERAL for a constexpr or a runtime scalar.  Anything else stops the command with what
    was wrong."""
    def refuse(why: str) -> SystemExit:
        return SystemExit(f"asyncdsl {command}: --args: {why}")

    found: dict[str, Any] = {}
    position, text = 0, text.strip()
    while position < len(text):
        item = _ARGUMENT.match(text, position)
        if item is None:
            rest = text[position:].split()[0]
            raise refuse(f"{rest!r} is not NAME=VALUE (arrays NAME=DTYPE[D0,D1,...], e.g. "
                         "x=f32[1024,512]; constexprs and scalars NAME=LITERAL, e.g. BM=64)")
        position = item.end()
        name, value = item["name"], item["value"]
        if not name.isidentifier():
            raise refuse(f"{name!r} in {item.group().strip()!r} is not a parameter name")
        if name in found:
            raise refuse(f"{name} is given twice")
        found[name] = _argument(name, value, refuse)
    if not found:
        raise refuse("no arguments given (write them as \"x=f32[1024,512] BM=64\")")
    return found


def _argument(name: str, value: str, refuse) -> Any:
    array = _ARRAY.fullmatch(value)
    if array is not None:
        try:
            dtype = as_dtype(array["dtype"])
        except AsyncDSLError as error:
            raise refuse(f"{name}={value}: {error.message}") from None
        dims = [dim.strip() for dim in array["dims"].split(",")]
        if not all(dim.isdigit() and int(dim) > 0 for dim in dims):
            raise refuse(f"{name}={value}: an array's dims are positive integers, as in {name}=f32[1024,512]")
        return ArraySpec(tuple(int(dim) for dim in dims), dtype)
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        pass
    try:
        as_dtype(value)
    except AsyncDSLError:
        raise refuse(f"{name}={value} is neither an array (DTYPE[D0,D1,...]) nor a Python literal "
                     f"(a string needs quotes: {name}='{value}')") from None
    raise refuse(f"{name}={value} names an element type but no shape: write {name}={value}[D0,D1,...]")


def _check_names(name: str, kernel: Kernel, arguments: dict[str, Any], command: str) -> None:
    """`--args` names each parameter without a default, and nothing else."""
    parameters = inspect.signature(kernel).parameters
    takes = f"{name}({', '.join(parameters)})"
    unknown = [given for given in arguments if given not in parameters]
    if unknown:
        raise SystemExit(f"asyncdsl {command}: --args: {takes} has no parameter {', '.join(unknown)}")
    missing = [p for p, parameter in parameters.items()
               if p not in arguments and parameter.default is parameter.empty]
    if missing:
        raise SystemExit(f"asyncdsl {command}: --args: no value for {', '.join(missing)} of {takes}")


def _examples(target: str, command: str, specs: str | None = None):
    """(path, [(name, kernel, args, kwargs)]) for the kernels `target` names, with the arguments
    `specs` (`--args`) gives, else with the example arguments the file declares."""
    path_text, _, kernel_name = target.partition(":")
    path = Path(path_text)
    if not path.is_file():
        raise SystemExit(f"asyncdsl {command}: no such file {path}")
    module = _load(path, command)
    kernels = _kernels(module, kernel_name or None, command)
    if specs is not None:
        if len(kernels) > 1:
            raise SystemExit(f"asyncdsl {command}: {path} defines {len(kernels)} kernels "
                             f"({', '.join(name for name, _ in kernels)}): name the one --args is for, "
                             f"as {path}:{kernels[0][0]}")
        arguments = argument_specs(specs, command)
        [(name, kernel)] = kernels
        _check_names(name, kernel, arguments, command)
        return path, [(name, kernel, (), arguments)]
    examples = getattr(module, "EXAMPLE_ARGS", {})
    found = []
    for name, kernel in kernels:
        if name not in examples:
            raise SystemExit(
                f"asyncdsl {command}: {path} has no example arguments for {name}; give them on the "
                f"command line, --args \"x=f32[1024,512] BM=64\" (one NAME=VALUE per parameter), or "
                f"in the file: "
                f"EXAMPLE_ARGS = {{{name!r}: ((asyncdsl.ArraySpec(shape, dtype), ...), {{constexprs}})}}"
            )
        example = examples[name]
        # A malformed entry (the arguments alone, no dict of keyword arguments) would otherwise end
        # in a TypeError or ValueError from unpacking it, far from the file that declared it.
        if not (isinstance(example, (tuple, list)) and len(example) == 2
                and isinstance(example[0], (tuple, list)) and isinstance(example[1], dict)):
            raise SystemExit(
                f"asyncdsl {command}: {path}: EXAMPLE_ARGS[{name!r}] must be a pair (args, kwargs), a "
                f"tuple of the positional arguments and a dict of the keyword ones, as in "
                f"((asyncdsl.ArraySpec(shape, dtype), ...), {{'BM': 64}}); got {example!r}"
            )
        args, kwargs = example
        found.append((name, kernel, args, kwargs))
    return path, found


def dump(target: str, after: list[str], all_stages: bool, ptx: bool, specs: str | None = None) -> int:
    _, kernels = _examples(target, "dump", specs)
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


def profile(target: str, out_dir: str, plot: bool, interpret: bool, specs: str | None = None) -> int:
    from asyncdsl.runtime import has_gpu, to_device

    _, kernels = _examples(target, "profile", specs)
    on_gpu = has_gpu() and not interpret
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, kernel, args, kwargs in kernels:
        arrays = [_random_array(a, rng) if isinstance(a, ArraySpec) else a for a in args]
        named = {n: _random_array(a, rng) if isinstance(a, ArraySpec) else a for n, a in kwargs.items()}
        if on_gpu:
            result = kernel.profile(*[to_device(a) if isinstance(a, np.ndarray) else a for a in arrays],
                                    **{n: to_device(a) if isinstance(a, np.ndarray) else a
                                       for n, a in named.items()})
        else:
            result = kernel.interpret_profile(*arrays, **named)
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
        # `.lock` files are the per-key locks of processes compiling at once, not cached kernels.
        files = ([path for path in folder.rglob("*") if path.is_file() and path.suffix != ".lock"]
                 if folder.is_dir() else [])
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
    dump_parser.add_argument("--args", dest="specs", metavar="SPECS", help=ARGS_HELP)
    dump_parser.add_argument("--after", action="append", default=[], choices=STAGES, metavar="PASS",
                             help=f"print the IR after PASS (one of: {', '.join(STAGES)}); repeatable")
    dump_parser.add_argument("--all", action="store_true", help="print the IR after every pass")
    dump_parser.add_argument("--ptx", action="store_true", help="print the PTX")
    profile_parser = commands.add_parser("profile",
                                         help="run a kernel once with its regions timed; write a trace")
    profile_parser.add_argument("target", help="FILE.py or FILE.py:KERNEL")
    profile_parser.add_argument("--args", dest="specs", metavar="SPECS", help=ARGS_HELP)
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
            return dump(options.target, options.after, options.all, options.ptx, options.specs)
        if options.command == "profile":
            return profile(options.target, options.out_dir, options.plot, options.interpret, options.specs)
        if options.command == "cache":
            return cache(options.clear)
        return info()
    except AsyncDSLError as error:
        print(f"asyncdsl {options.command}: {_users_text(error)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`asyncdsl dump ... | head`): stop quietly, as other commands do.
        # stdout is pointed at /dev/null so that flushing it at exit does not fail once more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _users_text(error: AsyncDSLError) -> str:
    """`error` as its user should read it.  An error of the call the command makes (a value of
    `--args` the kernel cannot take) is located at the first frame outside asyncdsl, the
    command's own entry point (runpy's `<frozen runpy>`, the `asyncdsl` script), which is no line
    of the user's: only its message is shown."""
    where = error.location
    if where is not None and (where.file.startswith("<")
                              or Path(where.file).resolve() == Path(sys.argv[0]).resolve()):
        return error.message
    return str(error)


if __name__ == "__main__":
    sys.exit(main())
