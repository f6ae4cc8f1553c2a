"""Index expressions of generated kernels: rendered as kernel source, evaluated per CTA.

A start or an index in a generated kernel is a Python int literal or arithmetic on the CTA's
ids (`ad.program_id(0) * 8 + 1`), possibly wrapped in `ad.multiple_of(value, n)`.  The model
evaluates the same tree with Python's semantics for each CTA of the launch, so the kernel and
the reference never disagree on what an index is.

`is_traced` is syntactic on purpose: `ad.program_id(1) * 0 - 1` is a value computed from the
CTA's ids even though the frontend may fold it to the int -1 while tracing, and a negative
computed index means out of bounds (TMA semantics), not Python's "from the end".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ID_KINDS = ("program_id", "cluster_id", "cluster_cta_id")


@dataclass(frozen=True)
class Cta:
    """Where one CTA sits in the launch: what `ad.program_id` and friends return there."""

    program_id: tuple[int, int, int]
    grid: tuple[int, int, int]
    cluster: tuple[int, int, int]

    @property
    def cluster_id(self) -> tuple[int, ...]:
        return tuple(p // c for p, c in zip(self.program_id, self.cluster))

    @property
    def cluster_cta_id(self) -> tuple[int, ...]:
        return tuple(p % c for p, c in zip(self.program_id, self.cluster))

    @property
    def linear(self) -> int:
        """The CTA's position with x fastest: the slab of the harness arrays it owns."""
        x, y, z = self.program_id
        return x + self.grid[0] * (y + self.grid[1] * z)


def ctas(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> list[Cta]:
    """Every CTA of a launch, in linear order."""
    return [
        Cta((x, y, z), grid, cluster)
        for z in range(grid[2])
        for y in range(grid[1])
        for x in range(grid[0])
    ]


@dataclass(frozen=True)
class Const:
    value: int


@dataclass(frozen=True)
class CtaId:
    kind: str  # one of ID_KINDS
    axis: int


@dataclass(frozen=True)
class Binary:
    op: str  # + - * // %
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Hint:
    """`ad.multiple_of(value, multiple)`: the user promises divisibility."""

    value: Expr
    multiple: int


Expr = Const | CtaId | Binary | Hint


def render(expr: Expr) -> str:
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, CtaId):
        return f"ad.{expr.kind}({expr.axis})"
    if isinstance(expr, Hint):
        return f"ad.multiple_of({render(expr.value)}, {expr.multiple})"
    rhs = render(expr.rhs)
    if isinstance(expr.rhs, Binary) or (isinstance(expr.rhs, Const) and expr.rhs.value < 0):
        rhs = f"({rhs})"
    lhs = render(expr.lhs)
    if isinstance(expr.lhs, Binary) and expr.op in ("*", "//", "%") and expr.lhs.op in ("+", "-"):
        lhs = f"({lhs})"
    return f"{lhs} {expr.op} {rhs}"


def evaluate(expr: Expr, cta: Cta) -> int:
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, CtaId):
        return getattr(cta, expr.kind)[expr.axis]
    if isinstance(expr, Hint):
        return evaluate(expr.value, cta)
    lhs, rhs = evaluate(expr.lhs, cta), evaluate(expr.rhs, cta)
    if expr.op == "+":
        return lhs + rhs
    if expr.op == "-":
        return lhs - rhs
    if expr.op == "*":
        return lhs * rhs
    if expr.op == "//":
        return lhs // rhs
    return lhs % rhs


def is_traced(expr: Expr) -> bool:
    """Whether the value is computed from the CTA's ids (whatever the frontend folds)."""
    if isinstance(expr, Const):
        return False
    if isinstance(expr, CtaId):
        return True
    if isinstance(expr, Hint):
        return True
    return is_traced(expr.lhs) or is_traced(expr.rhs)


def hints(expr: Expr) -> list[Hint]:
    if isinstance(expr, Hint):
        return [expr, *hints(expr.value)]
    if isinstance(expr, Binary):
        return hints(expr.lhs) + hints(expr.rhs)
    return []


def known_divisor(expr: Expr) -> int:
    """The number asyncdsl's divisibility analysis proves divides the value of `expr` in every CTA
    (0: the value is 0), from its form alone, as the README documents it: a literal is a multiple
    of itself, an id of 1; sums and differences of the gcd, products of the product, a floor
    division by a literal of the quotient when it divides, Python's `a % c` (`a - (a // c) * c`)
    of their gcd; `ad.multiple_of` counts as the promise it is.  What the frontend folds while
    tracing is the literal it folds to."""
    folded = static_value(expr)
    if folded is not None:
        return abs(folded)
    if isinstance(expr, CtaId):
        return 1
    if isinstance(expr, Hint):
        return math.lcm(known_divisor(expr.value), expr.multiple)
    assert isinstance(expr, Binary), "a literal has a static value"
    lhs, rhs = known_divisor(expr.lhs), known_divisor(expr.rhs)
    divisor = static_value(expr.rhs)
    if expr.op in ("+", "-"):
        return math.gcd(lhs, rhs)
    if expr.op == "*":
        return lhs * rhs
    if expr.op == "//":
        if lhs == 0:
            return 0
        return lhs // abs(divisor) if divisor and lhs % divisor == 0 else 1
    if not divisor:
        return 1
    quotient = lhs // abs(divisor) if lhs % divisor == 0 else 1 if lhs else 0
    return math.gcd(lhs, quotient * abs(divisor))


def provably_multiple(expr: Expr, n: int) -> bool:
    """Whether asyncdsl can prove the value a multiple of `n`: the literal it folds to is one, or
    the divisibility analysis (`known_divisor`) says so."""
    return known_divisor(expr) % n == 0


def obviously_multiple(expr: Expr, n: int) -> bool:
    """Divisibility by `n` that any compiler can see: a literal, `id * k`, or a hint."""
    if isinstance(expr, Const):
        return expr.value % n == 0
    if isinstance(expr, Hint):
        return expr.multiple % n == 0
    if isinstance(expr, Binary) and expr.op == "*":
        return any(isinstance(side, Const) and side.value % n == 0 for side in (expr.lhs, expr.rhs))
    return n == 1


def depends_on(expr: Expr, kind: str, axis: int) -> bool:
    if isinstance(expr, CtaId):
        return (expr.kind, expr.axis) == (kind, axis)
    if isinstance(expr, Hint):
        return depends_on(expr.value, kind, axis)
    if isinstance(expr, Binary):
        return depends_on(expr.lhs, kind, axis) or depends_on(expr.rhs, kind, axis)
    return False


def static_value(expr: Expr) -> int | None:
    """The int the frontend sees while tracing, or None for a traced value: arithmetic on
    Python ints stays in Python, and a traced value times 0 folds to 0."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, (CtaId, Hint)):
        return None
    lhs, rhs = static_value(expr.lhs), static_value(expr.rhs)
    if expr.op == "*" and 0 in (lhs, rhs):
        return 0
    if lhs is None or rhs is None:
        return None
    return evaluate(expr, Cta((0, 0, 0), (1, 1, 1), (1, 1, 1)))
