"""Kernel source for a case, written with the public API only (`import asyncdsl as ad`).

The source is imported from a file, so every error asyncdsl raises can be checked against a
real file:line.  A load kernel takes (x, dump[, fill]): it loads the case's window into its
buffer and dumps the whole buffer, byte for byte, into its own slab of `dump` (after filling
it from `fill` when the load may leave bytes alone).  A store kernel takes (src, y): it fills
its buffer with the raw bytes of its slab of `src`, then stores the case's window into `y`.
The harness moves whole buffers with plain bulk copies; 4-bit buffers, which bulk copies do
not take, go through TMA in slabs of at most 4 dims.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import expr
from .cases import Case, Condition, Entry, Rest, Span, Squeeze, Window
from .layout import Tile

KERNEL_NAME = "fuzz_kernel"
HARNESS_RANK = 4  # 4-bit harness slabs: the slab index and the CTA's collapse into one dim


@dataclass(frozen=True)
class Source:
    text: str
    kernel_lines: tuple[int, int]  # first (the decorator) and last line of the kernel
    copy_line: int  # the line of the case's async_copy
    call_lines: tuple[int, ...]  # the lines that compile and interpret the kernel

    def names_user_line(self, line: int) -> bool:
        first, last = self.kernel_lines
        return first <= line <= last or line in self.call_lines


def array_names(case: Case) -> tuple[str, ...]:
    if case.direction == "store":
        return ("src", "y")
    return ("x", "dump", "fill") if case.needs_fill else ("x", "dump")


def render_key(key: tuple[Entry, ...]) -> str:
    parts = []
    for entry in key:
        if isinstance(entry, Squeeze):
            parts.append(expr.render(entry.index))
        elif isinstance(entry, Window):
            parts.append(f"ad.ds({expr.render(entry.start)}, {entry.size})")
        elif isinstance(entry, Span):
            parts.append(f"{'' if entry.lo is None else entry.lo}:{'' if entry.hi is None else entry.hi}")
        else:
            assert isinstance(entry, Rest)
            parts.append("...")
    return ", ".join(parts) if len(parts) != 1 else parts[0]


def render_transforms(case: Case) -> str:
    items = []
    for transform in case.transforms:
        if isinstance(transform, Tile):
            rounding = ", ad.Rounding.DOWN" if transform.round_down else ""
            items.append(f"ad.TileTransform({transform.tiling!r}{rounding})")
        else:
            items.append(f"ad.TransposeTransform({transform.permutation!r})")
    return "(" + "".join(f"{item}, " for item in items).rstrip(" ") + ")"


def render_condition(condition: Condition) -> str:
    return f"{expr.render(condition.lhs)} {condition.op} {condition.rhs}"


def _cta_line(case: Case) -> str:
    terms, stride = [], 1
    for axis, extent in enumerate(case.grid):
        if extent > 1:
            terms.append(f"ad.program_id({axis})" + (f" * {stride}" if stride > 1 else ""))
        stride *= extent
    return "cta = " + (" + ".join(terms) if terms else "0") + "  # this CTA's slab of the harness arrays"


def _copy_options(case: Case, barrier: str | None) -> str:
    options = []
    if barrier:
        options.append(f"barrier={barrier}")
    if case.transforms:
        options.append(f"transforms={render_transforms(case)}")
    if case.swizzle is not None:
        options.append(f"swizzle={case.swizzle}")
    if case.collective:
        options.append(f"collective={case.collective!r}")
    if case.partition == "replicated":
        options.append("partition=ad.CopyPartition.REPLICATED")
    elif case.partition == "partitioned":
        options.append("partition=ad.CopyPartition.PARTITIONED(0)")
    if case.predicate is not None:
        options.append("predicate=cond")
    if case.reduction:
        options.append(f"reduction={case.reduction!r}")
    if case.implementation != "tma":
        options.append(f"implementation={case.implementation!r}")
    if case.oob != "zeros":
        options.append(f"oob={case.oob!r}")
    if not case.arrive:
        options.append("arrive=False")
    if case.misuse and case.misuse[0] == "transforms":
        options = [o for o in options if not o.startswith("transforms=")] + [f"transforms={case.misuse[1]}"]
    if case.misuse and case.misuse[0] == "copy-option":
        options.append(case.misuse[1])
    return ", ".join(options)


def _slabs(case: Case) -> list[tuple[int, ...]]:
    """The leading indices of the 4-bit harness slabs (one empty tuple: the whole buffer)."""
    shape = case.buffer_shape
    lead = max(0, len(shape) - HARNESS_RANK)
    indices: list[tuple[int, ...]] = [()]
    for extent in shape[:lead]:
        indices = [(*i, k) for i in indices for k in range(extent)]
    return indices


def _harness_into_buffer(case: Case, gmem: str, whole: bool, barrier: str) -> list[str]:
    """Fill `buf` from `gmem` (the whole array, or its slab `gmem.at[cta]`) and wait."""
    if not case.element.packed:
        source = gmem if whole else f"{gmem}.at[cta]"
        return [
            f'ad.async_copy({source}, buf, barrier={barrier}, oob="promise_in_bounds")',
            f"{barrier}.wait()",
        ]
    lines = []
    for index in _slabs(case):
        smem = f"buf.at[{', '.join(map(str, index))}]" if index else "buf"
        key = ", ".join(([] if whole else ["cta"]) + [str(i) for i in index])
        source = f"{gmem}.at[{key}]" if key else gmem
        lines.append(f"ad.async_copy({source}, {smem}, barrier={barrier})")
    return lines + [f"{barrier}.wait()"]


def _harness_out_of_buffer(case: Case) -> list[str]:
    """Dump `buf` into this CTA's slab of `dump`."""
    if not case.element.packed:
        return ['ad.async_copy(buf, dump.at[cta], oob="promise_in_bounds")']
    lines = []
    for index in _slabs(case):
        smem = f"buf.at[{', '.join(map(str, index))}]" if index else "buf"
        lines.append(f"ad.async_copy({smem}, dump.at[{', '.join(['cta', *map(str, index)])}])")
    return lines


def harness_barrier(case: Case) -> str:
    count = len(_slabs(case)) if case.element.packed else 1
    return "ad.barrier()" if count == 1 else f"ad.barrier(arrival_count={count})"


def render(case: Case, expected_bytes: int) -> Source:
    """The module of `case`; `expected_bytes` is what a load with arrive=False announces."""
    names = array_names(case)
    smem_side = f"buf.at[{expr.render(case.slot)}]" if case.slots else "buf"
    gmem_array = names[0] if case.direction == "load" else names[1]
    key = render_key(case.key) if case.key else None
    if case.misuse and case.misuse[0] == "key":
        key = case.misuse[1]
    gmem_side = gmem_array if key is None else f"{gmem_array}.at[{key}]"
    body = [_cta_line(case), f"buf = ad.smem({case.buffer_shape!r}, {gmem_array}.dtype)"]
    predicated = case.predicate is not None
    if case.direction == "load":
        body.append("done = ad.barrier()")
        if case.needs_fill:
            body.append(f"filled = {harness_barrier(case)}")
            body += _harness_into_buffer(case, "fill", True, "filled")
            if case.collective:
                body.append("ad.cluster_barrier()  # no peer multicasts into a buffer still being filled")
        if case.predicate is not None:
            body.append(f"cond = {render_condition(case.predicate)}")
        if not case.arrive:
            announce = f"done.arrive_expect_tx({expected_bytes})"
            body += ["with ad.when(cond):", f"    {announce}"] if predicated else [announce]
        barrier = "done" if case.barrier else None
        copy = f"ad.async_copy({gmem_side}, {smem_side}, {_copy_options(case, barrier)})  # the copy"
        body.append(copy)
        copy_index = len(body)
        if not case.barrier:
            body.append("ad.await_cp_async_copy(0)")
        elif predicated:
            body += ["with ad.when(cond):", "    done.wait()"]
        else:
            body.append("done.wait()")
        if case.implementation == "cp_async":
            body.append("ad.fence_async_smem()  # cp.async wrote through the generic proxy")
        body += _harness_out_of_buffer(case)
    else:
        body.append(f"loaded = {harness_barrier(case)}")
        body += _harness_into_buffer(case, "src", False, "loaded")
        if case.predicate is not None:
            body.append(f"cond = {render_condition(case.predicate)}")
        body.append(f"ad.async_copy({smem_side}, {gmem_side}, {_copy_options(case, None)})  # the copy")
        copy_index = len(body)
    body.append("ad.await_async_copy(0)")

    kernel_option = f", {case.misuse[1]}" if case.misuse and case.misuse[0] == "kernel-option" else ""
    header = [
        f'"""Fuzz case {case.name} (generated)."""',
        "",
        "import asyncdsl as ad",
        "",
        "",
        f"@ad.kernel(grid={case.grid!r}, cluster={case.cluster!r}, arch={case.arch!r}{kernel_option})",
        f"def {KERNEL_NAME}({', '.join(names)}):",
    ]
    first = 6  # the decorator
    lines = header + ["    " + line for line in body]
    last = len(lines)
    copy_line = len(header) + copy_index
    lines += [
        "",
        "",
        "def compile_case(*arrays):",
        f"    return {KERNEL_NAME}.compile(*arrays)",
        "",
        "",
        "def interpret_case(*arrays):",
        f"    {KERNEL_NAME}.interpret(*arrays)",
        "",
        "",
        "def launch_case(*arrays):",
        f"    {KERNEL_NAME}(*arrays)",
        "",
    ]
    calls = (last + 4, last + 8, last + 12)
    return Source("\n".join(lines), (first, last), copy_line, calls)

