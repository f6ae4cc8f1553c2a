"""`python -m asyncdsl.fuzz.copies --cases N --seed S [--jobs J] [--show N] [--patterns] [--gpu]`

Prints one summary line, `cases=N ok=.. clean_error=.. internal=.. hang=.. mismatch=..
ptxas_reject=..`, and exits with status 1 if any case failed.  `--case S:I` runs one case and
prints its source and outcome.  `--gpu` runs the cases on the GPU instead and compares its
bytes with the interpreter's (see asyncdsl/fuzz/copies/__init__.py for running it under
compute-sanitizer).
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from .generate import case_for
from .patterns import patterns
from .pool import cpu_count, run_cases
from .run import HINTS, run_indexed
from .summary import Summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asyncdsl.fuzz.copies",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="how many cases (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="which cases (case i of seed S never changes)")
    parser.add_argument("--start", type=int, default=0, help="index of the first case")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per CPU)")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds a case may take (default 20)")
    parser.add_argument("--show", type=int, default=0, help="print the first N failures of each class")
    parser.add_argument("--patterns", action="store_true", help="count outcomes per known bug pattern")
    parser.add_argument("--report", help="write every result that is not ok to this file, as JSON lines")
    parser.add_argument("--case", help="run the one case S:I and print it")
    parser.add_argument("--gpu", action="store_true", help="run on the GPU and compare with the interpreter")
    args = parser.parse_args(argv)

    if args.case:
        seed, index = (int(part) for part in args.case.split(":"))
        with tempfile.TemporaryDirectory(prefix="asyncdsl-fuzz-") as directory:
            result = run_indexed(seed, index, directory, args.budget)
        print(result.source)
        print(f"{result.outcome} (at {result.stage}); patterns: {patterns(case_for(seed, index, HINTS))}")
        print(result.detail)
        return 0 if result.outcome in ("ok", "clean_error") else 1

    run = run_indexed
    if args.gpu:
        from asyncdsl.runtime import has_gpu

        from .gpu import run_on_gpu

        if not has_gpu():
            print("--gpu: no usable CUDA GPU here (asyncdsl.runtime.has_gpu() is False)", file=sys.stderr)
            return 2
        run = run_on_gpu
    jobs = args.jobs or cpu_count()
    summary = Summary(args.seed)
    indices = range(args.start, args.start + args.cases)
    for index, result in run_cases(args.seed, indices, jobs, args.budget, run, on_gpu=args.gpu):
        summary.add(index, result)
    if args.report:
        summary.write_report(args.report)
    if args.show:
        print(summary.shown(args.show))
    if args.patterns:
        print(summary.by_pattern())
    print(summary.line())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
