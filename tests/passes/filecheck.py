"""Pass tests written as text: an IR fixture, the passes to run on it, and what the result must show.

A fixture (`fixtures/*.mlir`) is the input module in the IR's textual form, read by the same
parser as any printed stage (`make_context`), with directives in `//` comments:

    // RUN: allocate-smem                the passes to run, in order, by name
    // CHECK: offset 4096                a later line of the output contains this
    // CHECK-NEXT: offset 4160           the line right after the last match contains this
    // CHECK-NOT: asyncdsl.alloc_smem    no line between the last match and the next contains this

The directives may stand anywhere; other `//` lines say what the fixture shows. The checks read
the printed output (without source locations) in order, as LLVM's FileCheck reads its lines.
"""

from __future__ import annotations

import io

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from asyncdsl.dialects import ptx
from asyncdsl.passes.pipeline import default_pipeline, make_context
from asyncdsl.passes.to_ptx.barriers import drop_redundant_barriers


def _drop_redundant_barriers(module: ModuleOp) -> None:
    for kernel in module.ops:
        if isinstance(kernel, ptx.KernelOp):
            drop_redundant_barriers(kernel.body.block)


def _steps() -> dict[str, Callable[[ModuleOp], None]]:
    """Every pass of the pipeline by name, and the barrier merge `lower-to-ptx` ends with."""
    context = make_context()
    steps: dict[str, Callable[[ModuleOp], None]] = {
        compiler_pass.name: (lambda module, p=compiler_pass: p.apply(context, module))
        for compiler_pass in default_pipeline()
    }
    steps["drop-redundant-barriers"] = _drop_redundant_barriers
    return steps


@dataclass
class Fixture:
    path: Path
    passes: list[str] = field(default_factory=list)
    checks: list[tuple[str, str]] = field(default_factory=list)  # (CHECK, CHECK-NEXT or CHECK-NOT; text)

    @classmethod
    def read(cls, path: Path) -> Fixture:
        fixture = cls(path)
        for line in path.read_text().splitlines():
            comment = line.strip()
            if not comment.startswith("//"):
                continue
            directive, _, rest = comment[2:].strip().partition(":")
            if directive == "RUN":
                fixture.passes += [name.strip() for name in rest.split(",")]
            elif directive in ("CHECK", "CHECK-NEXT", "CHECK-NOT"):
                fixture.checks.append((directive, rest.strip()))
        assert fixture.passes, f"{path.name} names no pass to run (// RUN: pass-name)"
        assert any(kind != "CHECK-NOT" for kind, _ in fixture.checks), f"{path.name} checks nothing"
        return fixture

    def output(self) -> str:
        module = Parser(make_context(), self.path.read_text(), self.path.name).parse_module()
        module.verify()
        steps = _steps()
        for name in self.passes:
            assert name in steps, f"{self.path.name}: no pass named {name!r} (known: {sorted(steps)})"
            steps[name](module)
        module.verify()
        stream = io.StringIO()
        Printer(stream=stream).print_op(module)  # without source locations, which fixtures leave out
        return stream.getvalue()


def check(output: str, checks: list[tuple[str, str]]) -> None:
    """Raise AssertionError naming the first check `output` fails, and the output. As in
    FileCheck, a CHECK matches after the last match, on its line or a later one."""
    lines = output.splitlines()
    line, column = 0, 0  # where the next CHECK may start matching
    forbidden: list[str] = []  # CHECK-NOTs waiting for the next match to bound them
    for kind, text in checks:
        if kind == "CHECK-NOT":
            forbidden.append(text)
            continue
        found = _find(lines, text, line, column, next_line=kind == "CHECK-NEXT")
        if found is None:
            where = "on the next line" if kind == "CHECK-NEXT" else "after the last match"
            raise AssertionError(f"{kind}: {text!r} not found {where} (line {line + 1}) of:\n{output}")
        _absent(forbidden, _between(lines, (line, column), found), output)
        forbidden = []
        line, column = found[0], found[1] + len(text)
    _absent(forbidden, _between(lines, (line, column), (len(lines), 0)), output)


def _find(lines: list[str], text: str, line: int, column: int, next_line: bool) -> tuple[int, int] | None:
    if next_line:
        at = lines[line + 1].find(text) if line + 1 < len(lines) else -1
        return (line + 1, at) if at >= 0 else None
    for number in range(line, len(lines)):
        at = lines[number].find(text, column if number == line else 0)
        if at >= 0:
            return number, at
    return None


def _between(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> list[str]:
    """The text from `start` to `end` (line, column), a piece per line."""
    pieces = [lines[number] for number in range(start[0], min(end[0] + 1, len(lines)))]
    if pieces:
        if end[0] < len(lines):
            pieces[-1] = pieces[-1][:end[1]]
        pieces[0] = pieces[0][start[1]:] if start[0] != end[0] else lines[start[0]][start[1]:end[1]]
    return pieces


def _absent(forbidden: list[str], pieces: list[str], output: str) -> None:
    for text in forbidden:
        hit = next((piece for piece in pieces if text in piece), None)
        if hit is not None:
            raise AssertionError(f"CHECK-NOT: {text!r} found in {hit.strip()!r} of:\n{output}")
