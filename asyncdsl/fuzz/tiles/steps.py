"""The steps of a program's chain: each writes kernel lines that change the tile `t` (or store a
value derived from it to an output of its own) and applies the same change to the model.

Every step draws only what docs/register-tiles.md says runs: tiles of one dtype meet in an
operator (the second tile is cast first), Python numbers take the tile's dtype, integer divisors
and shift amounts are nonzero and in range constants."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from . import numerics as nx
from .builder import FLOATS, Builder

COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


def arith(b: Builder) -> None:
    """t op u / t op number / number op t."""
    ops = ("+", "-", "*", "/") if nx.is_float(b.dt) else ("+", "-", "*", "&", "|", "^")
    op = b.pick(ops)
    text, value = b.operand()
    if text != "u" and not text.startswith("u."):
        text = f"({text})"
    if b.chance(0.3):
        b.set_t(f"t = {text} {op} t", nx.arithmetic(op, value, b.t, b.dt))
    else:
        b.set_t(f"t = t {op} {text}", nx.arithmetic(op, b.t, value, b.dt))


def int_division(b: Builder) -> None:
    """Floor division, modulo and shifts by constants (int32 tiles)."""
    op = b.pick(("//", "%", "<<", ">>"))
    if op in ("//", "%"):
        divisor = b.pick((1, 2, 3, 4, 5, 7, 8, 64, 1000)) * b.pick((1, -1))
    else:
        divisor = b.pick((0, 1, 3, 7, 16, 31))
    b.set_t(f"t = t {op} ({divisor})", nx.arithmetic(op, b.t, np.int64(divisor), "int32"))


def int_by_tile(b: Builder) -> None:
    """Floor division and modulo by the second tile, made nonzero with `where`."""
    op = b.pick(("//", "%"))
    text, value = b.u_as("int32")
    b.set_t(
        f"t = t {op} ad.where({text} == 0, 1, {text})",
        nx.arithmetic(op, b.t, np.where(value == 0, 1, value), "int32"),
    )


def fma(b: Builder) -> None:
    text, value = b.u_as(b.dt)
    if b.chance(0.5):
        b.set_t(f"t = ad.fma(t, {text}, t)", nx.fma(b.t, value, b.t, b.dt))
    else:
        b.set_t(f"t = ad.fma({text}, {text}, t)", nx.fma(value, value, b.t, b.dt))


def sqrt(b: Builder) -> None:
    if b.chance(0.5):
        b.set_t("t = ad.sqrt(abs(t))", nx.sqrt(nx.absolute(b.t, b.dt), b.dt))
    else:
        b.set_t("t = ad.sqrt(t)", nx.sqrt(b.t, b.dt))


def sign(b: Builder) -> None:
    kind = b.pick(("neg", "abs", "invert") if b.dt == "int32" else ("neg", "abs"))
    if kind == "neg":
        b.set_t("t = -t", nx.negate(b.t, b.dt))
    elif kind == "abs":
        b.set_t("t = abs(t)", nx.absolute(b.t, b.dt))
    else:
        b.set_t("t = ~t", np.invert(b.t))


def extremum(b: Builder) -> None:
    """maximum / minimum with u or a number, or a clamp between two numbers."""
    if b.chance(0.3):
        low, high = sorted((int(b.constant("int32")), int(b.constant("int32"))))
        value = nx.extremum(
            "min", nx.extremum("max", b.t, nx.constant(low, b.dt), b.dt), nx.constant(high, b.dt), b.dt
        )
        b.set_t(f"t = ad.minimum(ad.maximum(t, {low}), {high})", value)
        return
    which = b.pick(("max", "min"))
    text, operand = b.operand()
    first = b.chance(0.5)
    args = f"{text}, t" if first else f"t, {text}"
    b.set_t(
        f"t = ad.{which}imum({args})",
        nx.extremum(which, operand, b.t, b.dt) if first else nx.extremum(which, b.t, operand, b.dt),
    )


def _mask(b: Builder) -> tuple[str, np.ndarray]:
    """A bool tile: t compared with a number or with u, an iota bound, or two of them combined."""
    kind = b.pick(("compare", "compare", "iota", "combined"))
    if kind == "compare":
        op = b.pick(COMPARISONS)
        text, value = b.operand()
        return f"(t {op} {text})", nx.compare(op, b.t, value)
    if kind == "iota":  # of the tile's shape, or with the other dims 1, stretched as numpy does
        dim = b.rnd.randrange(len(b.shape))
        bound = b.rnd.randint(0, b.shape[dim])
        shape = b.shape
        if len(b.shape) == 2 and b.chance(0.4):
            shape = tuple(size if d == dim else 1 for d, size in enumerate(b.shape))
        # the mask in its own shape: `where` stretches it as numpy does, `.sum()` counts its elements
        return (f"(ad.iota({shape}, ad.int32, dim={dim}) < {bound})", np.indices(shape)[dim] < bound)
    (left, lv), (right, rv) = _mask_simple(b), _mask_simple(b)
    op = b.pick(("&", "|", "^"))
    combined = {"&": np.logical_and, "|": np.logical_or, "^": np.logical_xor}[op](lv, rv)
    if b.chance(0.3):
        return f"~({left} {op} {right})", ~combined
    return f"({left} {op} {right})", combined


def _mask_simple(b: Builder) -> tuple[str, np.ndarray]:
    op = b.pick(COMPARISONS)
    text = b.constant()
    return f"(t {op} {text})", nx.compare(op, b.t, nx.constant(eval(text), b.dt))  # noqa: S307


def where(b: Builder) -> None:
    mask, chosen = _mask(b)
    text, value = b.operand()
    if b.chance(0.5):
        b.set_t(f"t = ad.where({mask}, t, {text})", np.where(chosen, b.t, value).astype(b.t.dtype))
    else:
        b.set_t(f"t = ad.where({mask}, {text}, t)", np.where(chosen, value, b.t).astype(b.t.dtype))


def cast(b: Builder) -> None:
    """To another tile dtype (the chain goes on in it), or through float8 / a narrow int and back."""
    kind = b.pick(("float", "float", "int32", "through"))
    if kind == "through":
        narrow = b.pick(("float8_e4m3fn", "float8_e5m2", "int8", "uint8", "int16", "uint16"))
        if b.dt == "int32" and narrow.startswith("float8"):
            narrow = "int16"
        value = nx.convert(nx.convert(b.t, b.dt, narrow), narrow, b.dt)
        b.set_t(f"t = t.astype(ad.{narrow}).astype(ad.{b.dt})", value)
        return
    target = "int32" if kind == "int32" else b.pick([f for f in FLOATS if f != b.dt])
    if target == b.dt:
        target = "float32"
    b.set_t(f"t = t.astype(ad.{target})", nx.convert(b.t, b.dt, target), target)


REDUCE_FORMS = ("keepdims", "index", "total")


def _reduction(b: Builder, op: str, axis, keepdims: bool):
    """The model of `t.op(axis)`: (value, exact): exact False where the bits depend on the order."""
    if op in ("max", "min"):
        value = nx.extreme(op, b.t, axis, b.dt)
        exact = np.ones(np.shape(value), bool)
    else:
        value, exact = nx.sum_any_order(b.t, axis, b.dt)
        if op == "mean":
            count = b.t.size // max(1, np.size(value))
            value = nx.arithmetic("/", value, np.float64(count), b.dt)
    if keepdims:
        value = np.expand_dims(value, axis if axis is not None else tuple(range(len(b.shape))))
        exact = np.expand_dims(exact, axis if axis is not None else tuple(range(len(b.shape))))
    return np.asarray(value), np.asarray(exact)


def reduce_back(b: Builder) -> None:
    """A reduction broadcast back into t (`t - t.max(axis=1, keepdims=True)`, `t.sum(0)[None, :]`,
    `t - t.max()`), where its value does not depend on the order of the tree."""
    ops = ("max", "min", "sum", "mean") if nx.is_float(b.dt) else ("max", "min", "sum")
    op = b.pick(ops)
    form = b.pick(REDUCE_FORMS)
    two_d = len(b.shape) == 2
    if form == "total" or not two_d:
        axis, keepdims = None, form == "keepdims"
        text = f"t.{op}(keepdims=True)" if keepdims else f"t.{op}()"
    else:
        axis = b.rnd.randrange(2)
        keepdims = True
        if form == "keepdims":
            text = f"t.{op}(axis={axis}, keepdims=True)"
        else:
            text = f"t.{op}(axis={axis})[{':, None' if axis == 1 else 'None, :'}]"
    value, exact = _reduction(b, op, axis, keepdims)
    if not exact.all():
        side_sum(b, op, axis)
        return
    combine = b.pick(("-", "+", "*") if nx.is_float(b.dt) else ("-", "+", "^"))
    if axis is None and not keepdims:
        value = value.reshape(())
    b.set_t(f"t = t {combine} {text}", nx.arithmetic(combine, b.t, value, b.dt))


def reduce_twice(b: Builder) -> None:
    """A keepdims reduction reduced again (`t.max(axis=1, keepdims=True).min()`), or the other
    tile's total (`t - u.max()`), broadcast into t: max and min only, whose bits no order changes."""
    first, second = b.pick(("max", "min")), b.pick(("max", "min"))
    if b.chance(0.5) and len(b.shape) == 2:
        axis = b.rnd.randrange(2)
        inner = np.expand_dims(nx.extreme(first, b.t, axis, b.dt), axis)
        value = nx.extreme(second, inner, None, b.dt)
        text = f"t.{first}(axis={axis}, keepdims=True).{second}()"
    else:
        u_text, u_value = b.u_as(b.dt)
        value = nx.extreme(first, u_value, None, b.dt)
        text = f"{u_text}.{first}()" if u_text == "u" else f"({u_text}).{first}()"
    combine = b.pick(("-", "+"))
    b.set_t(f"t = t {combine} {text}", nx.arithmetic(combine, b.t, value, b.dt))


def side_sum(b: Builder, op: str = "sum", axis=None) -> None:
    """A float sum stored to an output of its own, held to the error bound of any summation
    order where the order shows (the tree's order is the compiler's, not the model's)."""
    if not nx.is_float(b.dt) or op in ("max", "min"):
        return
    if b.exact_only:
        return
    count = b.t.size if axis is None else b.shape[axis]
    if (count - 1) * 2.0 ** -nx.FORMATS[b.dt].bits >= 0.5:  # the bound says nothing any more
        return
    text = f"t.{op}()" if axis is None else f"t.{op}(axis={axis})"
    total, bound = nx.sum_error_bound(b.t, axis, b.dt)
    fmt = nx.FORMATS[b.dt]
    with np.errstate(invalid="ignore"):
        # infinities, and partial sums that may overflow in some order, are not modelled
        magnitude = np.abs(nx.wide(b.t)).sum(axis=axis)
        unmodelled = ~np.isfinite(total) | ~(magnitude + bound < fmt.largest)
    if op == "mean":
        total, bound = total / count, bound / count
    # the result is rounded to the dtype once more (the mean: its quotient)
    bound = bound + np.abs(total) * 2.0**-fmt.bits + 2.0**fmt.tiny_exponent
    expected = np.where(unmodelled, 0, total).astype(np.float64)
    name = b.add_output(
        nx.round_to(expected, b.dt), f"{op} within its bound", exact=False, bound=bound, dont_care=unmodelled
    )
    target = f"{name}.at[:]" if axis is not None else f"{name}.at[0]"
    b.emit(f"ad.store({target}, {text})")


def side_reduce(b: Builder) -> None:
    """max / min / argmax / argmin / a mask count, stored exactly to an output of its own."""
    two_d = len(b.shape) == 2
    kind = b.pick(("max", "min", "argmax", "argmin", "count") if two_d else ("max", "min", "count"))
    axis = b.rnd.randrange(len(b.shape)) if kind.startswith("arg") or b.chance(0.6) else None
    value: npt.ArrayLike  # a numpy scalar where the whole tile reduces
    if kind in ("max", "min"):
        value = nx.extreme(kind, b.t, axis, b.dt)
        text = f"t.{kind}()" if axis is None else f"t.{kind}(axis={axis})"
    elif kind == "count":
        mask, chosen = _mask(b)
        value = chosen.sum(axis=axis).astype(np.int32)
        text = f"({mask}).sum()" if axis is None else f"({mask}).sum(axis={axis})"
    else:
        value = (np.argmax if kind == "argmax" else np.argmin)(nx.wide(b.t), axis=axis).astype(np.int32)
        text = f"t.{kind}(axis={axis})"
    name = b.add_output(value, kind)
    b.emit(f"ad.store({name}.at[{':' if axis is not None else '0'}], {text})")


def loop(b: Builder) -> None:
    """`ad.registers` carried across an `ad.range` loop: t updated in place n times."""
    n = b.rnd.randint(1, 3)
    acc = b.fresh("acc")
    op = b.pick(("+", "-", "*") if nx.is_float(b.dt) else ("+", "-", "^"))
    value: np.ndarray | np.int32
    if b.chance(0.5):
        text, value = b.u_as(b.dt)
    else:
        text = b.constant()
        value = nx.constant(eval(text), b.dt)  # noqa: S307 - our own literal
        text = f"({text})"
    b.emit(
        f"{acc} = ad.registers({b.shape}, ad.{b.dt})",
        f"{acc}[...] = t",
        f"for i in ad.range({n}):",
        f"    {acc}[...] = {acc}[...] {op} {text}",
    )
    t = b.t
    for _ in range(n):
        t = nx.arithmetic(op, t, value, b.dt)
    b.set_t(f"t = {acc}[...]", t)


def running_total(b: Builder) -> None:
    """A 0-d `ad.registers` that a loop adds the tile's maximum into, broadcast back."""
    n = b.rnd.randint(1, 3)
    total = b.fresh("total")
    peak = nx.extreme("max", b.t, None, b.dt)
    b.emit(
        f"{total} = ad.registers((), ad.{b.dt})",
        f"{total}[...] = ad.zeros((), ad.{b.dt})",
        f"for i in ad.range({n}):",
        f"    {total}[...] = {total}[...] + t.max()",
    )
    value = nx.constant(0, b.dt)
    for _ in range(n):
        value = nx.arithmetic("+", value, peak, b.dt)
    b.set_t(f"t = t - {total}[...]", nx.arithmetic("-", b.t, value, b.dt))


def smem_round_trip(b: Builder) -> None:
    buffer = b.fresh("spill")
    b.emit(f"{buffer} = ad.smem({b.shape}, ad.{b.dt})", f"{buffer}[...] = t", "ad.cta_barrier()")
    b.set_t(f"t = {buffer}[...]", b.t)
    b.emit("ad.cta_barrier()")


# function: (call, float64 model, ulps, absolute floor)
APPROXIMATE: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray], int, float]] = {
    "exp2": ("ad.exp2(t)", np.exp2, 1, 0.0),
    "exp2_ftz": ("ad.exp2(t, approx=True)", np.exp2, 1, 2.0**-126),
    "log2": ("ad.log2(t)", np.log2, 1, 0.0),
    "rsqrt": ("ad.rsqrt(t)", lambda x: 1 / np.sqrt(x), 1, 0.0),
    "sqrt_approx": ("ad.sqrt(t, approx=True)", np.sqrt, 1, 2.0**-126),
    "tanh": ("ad.tanh(t, approx=True)", np.tanh, 1, 0.0),
    "sin": ("ad.sin(t, approx=True)", np.sin, 1, 2.0**-126),
    "cos": ("ad.cos(t, approx=True)", np.cos, 1, 2.0**-126),
    "exp": ("ad.exp(t)", np.exp, 4, 0.0),
    "log": ("ad.log(t)", np.log, 2, 0.0),
}


def approximate(b: Builder) -> None:
    """An approximate function of a float32 t, stored to an output of its own: the interpreter
    computes the float64 function rounded to float32 (exp and log: compositions of exp2 and
    log2), held to a few ulps of it (the table of docs/register-tiles.md)."""
    if b.exact_only or b.dt != "float32":
        return
    name_of = b.pick(sorted(APPROXIMATE))
    call, model, ulps, floor = APPROXIMATE[name_of]
    x = nx.wide(b.t)
    if floor:  # the .ftz forms read a subnormal argument as a zero of its sign
        x = np.where(np.abs(x) < 2.0**-126, np.copysign(0.0, x), x)
    with np.errstate(all="ignore"):
        want = model(x)
    # exp is 2^hi · (1 + lo·ln 2): where that is subnormal or overflows, the composition's last
    # rounding is not the function's, so those elements are not compared
    dont_care = np.abs(x) > 80 if name_of == "exp" else np.zeros(x.shape, bool)
    bound = np.where(np.isfinite(want), 2.0**-21, 0) if name_of in ("log", "log2") else None
    expected = nx.round_to(np.where(dont_care, 0, want), "float32")
    out = b.add_output(
        expected, name_of, exact=False, ulps=ulps, floor=floor or 2.0**-149, bound=bound, dont_care=dont_care
    )
    index = ", ".join(":" for _ in b.shape)
    b.emit(f"ad.store({out}.at[{index}], {call})")


STEPS = {  # name: (function, weight for float tiles, weight for int32 tiles)
    "arith": (arith, 10, 10),
    "int_division": (int_division, 0, 5),
    "int_by_tile": (int_by_tile, 0, 2),
    "fma": (fma, 3, 0),
    "sqrt": (sqrt, 2, 0),
    "sign": (sign, 3, 3),
    "extremum": (extremum, 5, 5),
    "where": (where, 6, 6),
    "cast": (cast, 4, 3),
    "reduce_back": (reduce_back, 6, 4),
    "reduce_twice": (reduce_twice, 2, 2),
    "side_sum": (side_sum, 2, 0),
    "side_reduce": (side_reduce, 3, 3),
    "loop": (loop, 3, 3),
    "running_total": (running_total, 1, 1),
    "smem_round_trip": (smem_round_trip, 2, 2),
    "approximate": (approximate, 2, 0),
}


def draw_step(b: Builder) -> None:
    column = 1 if nx.is_float(b.dt) else 2
    name = b.weighted([(name, entry[column]) for name, entry in STEPS.items() if entry[column]])
    b.steps.append(name)
    STEPS[name][0](b)
