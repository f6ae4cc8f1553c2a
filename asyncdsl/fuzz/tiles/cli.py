"""The command line of the tile and wgmma fuzzers:
`python -m asyncdsl.fuzz.tiles --seed S --count N [--jobs J] [--show N] [--steps]`
(`python -m asyncdsl.fuzz.wgmma` the same).

Prints one summary line, `programs=N ok=.. refused=.. internal=.. hang=.. mismatch=.. ran=..%`,
and exits with status 1 if any program
failed.  `--program S:I` runs one program and prints its source and outcome.  `--gpu` launches
the programs on the GPU too and compares its bytes with the interpreter's.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile

from asyncdsl.fuzz.copies.pool import cpu_count, run_pool

from .run import OUTCOMES, Result, run_indexed, run_program
from .summary import Summary


def main(argv: list[str] | None, prog: str, program_for) -> int:
    """Run the programs `program_for(seed, index, exact_only)` draws, as the flags say."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="how many programs (default 200)")
    parser.add_argument(
        "--seed", type=int, default=0, help="which programs (program i of seed S never changes)"
    )
    parser.add_argument("--start", type=int, default=0, help="index of the first program")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per CPU)")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds a program may take (default 60)")
    parser.add_argument("--show", type=int, default=0, help="print the first N failures of each class")
    parser.add_argument("--show-refused", type=int, default=0, help="print the first N refused programs")
    parser.add_argument(
        "--steps", action="store_true", help="count outcomes per kind of step (wgmma: per class)"
    )
    parser.add_argument(
        "--no-ptxas", action="store_true", help="interpret only: neither compile nor assemble"
    )
    parser.add_argument("--report", help="write every result that is not ok to this file, as JSON lines")
    parser.add_argument("--program", help="run the one program S:I and print it")
    parser.add_argument("--gpu", action="store_true", help="launch on the GPU too, against the interpreter")
    parser.add_argument(
        "--compile-only",
        action="store_true",
        help="with --gpu: draw the GPU's programs, interpret them and compile them, launching none",
    )
    args = parser.parse_args(argv)

    if args.program:
        seed, index = (int(part) for part in args.program.split(":"))
        with tempfile.TemporaryDirectory(prefix="asyncdsl-tiles-") as directory:
            result = run_program(
                program_for(seed, index, args.gpu), directory, args.budget, not args.no_ptxas
            )
        print(result.source)
        print(f"{result.outcome} (at {result.stage}); steps: {', '.join(result.steps)}")
        print(result.detail)
        return 0 if result.outcome in OUTCOMES[:2] else 1

    run = functools.partial(run_indexed, ptxas=not args.no_ptxas, draw=program_for)
    if args.gpu:
        from asyncdsl.runtime import has_gpu

        from .gpu import run_on_gpu

        if not args.compile_only and not has_gpu():
            print("--gpu: no usable CUDA GPU here (asyncdsl.runtime.has_gpu() is False)", file=sys.stderr)
            return 2
        run = functools.partial(run_on_gpu, draw=program_for, compile_only=args.compile_only)
    summary = Summary()
    indices = range(args.start, args.start + args.count)
    on_gpu = args.gpu and not args.compile_only
    for index, result in run_pool(
        args.seed, indices, args.jobs or cpu_count(), args.budget, run, Result.lost, on_gpu=on_gpu
    ):
        summary.add(index, result)
    if args.report:
        summary.write_report(args.report)
    if args.show:
        print(summary.shown(args.show))
    if args.show_refused:
        print(summary.shown(args.show_refused, ("refused",)))
        print(summary.refusals())
    if args.steps:
        print(summary.by_step())
    print(summary.line())
    return 1 if summary.failures else 0
