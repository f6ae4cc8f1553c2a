"""A program as a Python module: the kernel, and the three calls the runner makes (interpret,
compile, launch).  An error is the user's when it names a line of the kernel or of a call."""

from __future__ import annotations

from dataclasses import dataclass

from .program import Program

KERNEL = "program"


@dataclass(frozen=True)
class Source:
    text: str
    kernel_lines: tuple[int, int]  # first and last line of the kernel, 1-based
    call_lines: tuple[int, ...]

    def names_user_line(self, line: int) -> bool:
        first, last = self.kernel_lines
        return first <= line <= last or line in self.call_lines


def render(program: Program) -> Source:
    lines = [
        "import asyncdsl as ad",
        "",
        "",
        program.decorator,
        f"def {KERNEL}({', '.join(program.parameters)}):",
    ]
    first = len(lines)
    lines += [f"    {line}" for line in program.lines]
    last = len(lines)
    calls = []
    for name, call in (
        ("interpret_program", f"{KERNEL}.interpret(*arrays)"),
        ("compile_program", f"return {KERNEL}.compile(*arrays)"),
        ("launch_program", f"{KERNEL}(*arrays)"),
    ):
        lines += ["", "", f"def {name}(*arrays):", f"    {call}"]
        calls.append(len(lines))
    return Source("\n".join(lines) + "\n", (first, last), tuple(calls))
