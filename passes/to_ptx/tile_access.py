"""Lowering of register tiles to and from shared memory (`load_smem`, `store_smem`).

A buffer holds its tile row-major, or through the layout it carries (transforms and swizzle).
Each thread moves its register vectors in the widest aligned pieces up to 16 bytes
(`ld/st.shared.v4.b32`) at the addresses `smem_addresses` plans: a thread term linear in the
thread's bits plus a constant per piece, swizzled when the buffer is.  16-bit elements pack two to a 32-bit
word (`mov.b32 {lo, hi}`), 8-bit ones four (`prmt`, `bfe`).

A peer CTA's copy of the buffer (`in cta %r`) is reached through distributed shared memory:
the same addresses, each distinct base register mapped by `mapa`, and `ld/st.shared::cluster`.

Stores are followed by a warpgroup barrier and preceded by one: a store in one layout and a load
in another exchange elements between threads, which must not overtake each other's reads and
writes.  Layouts that replicate elements store each element once (from the lowest replica).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import VectorType
from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.dialects.layout_attrs import inferred_layout, layout_of
from asyncdsl.hw.fragments import Layout, SplatLayout, replicated_layout
from asyncdsl.hw.layout_choice import strided_layout
from asyncdsl.hw.smem_layout import SmemLayout
from asyncdsl.hw.tiling import THREADS
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.smem_addresses import AccessPlan, piece_addresses
from asyncdsl.passes.to_ptx.smem_matrices import MatrixPlan, matrix_plan
from asyncdsl.passes.to_ptx.tile_registers import bind_tile, register_kind, tile_of


def buffer_alignment(ctx: KernelLowering, value: SSAValue) -> int:
    """The alignment (bytes) the address of SMEM buffer `value` is known to have."""
    owner = value.owner
    if isinstance(owner, ir.SmemViewOp):
        shape = ir.shape_of(owner.source)
        bits = ir.element_bits(owner.source.type)
        alignment = buffer_alignment(ctx, owner.source)
        for position in range(len(owner.indices)):
            stride = math.prod(shape[position + 1:]) * bits // 8
            alignment = math.gcd(alignment, stride)
        return alignment
    if isinstance(owner, ir.SmemWindowOp):
        # A traced start is a multiple of the window's step (the interpreter checks it).
        start = ctx.constant(owner.start)
        start = owner.step if start is None else start
        return math.gcd(buffer_alignment(ctx, owner.source), start * owner.unit_bytes)
    if isinstance(owner, ir.AllocSmemOp):
        return owner.alignment.value.data
    return 1


def _primary_threads(layout: Layout) -> np.ndarray | None:
    """Threads that hold the first copy of their elements (None: every thread does)."""
    if layout.replication == 1:
        return None
    replicas = layout.replica_threads()
    return replicas[:, 0] == np.arange(THREADS)


def primary_guard(ctx: KernelLowering, layout: Layout) -> SSAValue | None:
    """A predicate true in the threads that hold the first copy of each element they hold."""
    primary = _primary_threads(layout)
    if primary is None:
        return None
    # Replica digits are bit fields of the thread index: the first copy has them all zero.
    replicated_bits = [bit for bit in range(7) if not primary[1 << bit]]
    if not all(primary[t] == all(not (t >> bit) & 1 for bit in replicated_bits) for t in range(THREADS)):
        raise AssertionError(f"layout {layout}: replicas are not a set of thread bits")
    mask = sum(1 << bit for bit in replicated_bits)
    bits = ctx.b.emit("and.b32 {}, {}, {};", "b32", ctx.facts.thread, mask)
    return ctx.b.emit("setp.eq.u32 {}, {}, 0;", "pred", bits)


# -- moving one vector ---------------------------------------------------------------------------


def _split_words(ctx: KernelLowering, words: list[SSAValue], element_bytes: int) -> list[SSAValue]:
    """The elements packed in 32-bit `words`, lowest address first, one `.b16` register each."""
    b = ctx.b
    out: list[SSAValue] = []
    for word in words:
        if element_bytes == 2:
            out += b.emit_many("mov.b32 {{{}, {}}}, {};", ["b16", "b16"], word)
        else:
            out += _split_bytes(ctx, word, 4)
    return out


def _split_bytes(ctx: KernelLowering, word: SSAValue, count: int) -> list[SSAValue]:
    """The low `count` bytes of a 32-bit `word`, lowest first, one `.b16` register each."""
    b = ctx.b
    return [b.emit("cvt.u16.u32 {}, {};", "b16", b.emit("bfe.u32 {}, {}, {}, 8;", "b32", word, 8 * byte))
            for byte in range(count)]


def pack_words(ctx: KernelLowering, elements: list[SSAValue], element_bytes: int) -> list[SSAValue]:
    """`elements` (lowest address first) packed into 32-bit words."""
    b = ctx.b
    words = []
    per_word = 4 // element_bytes
    for start in range(0, len(elements), per_word):
        group = elements[start:start + per_word]
        if element_bytes == 2:
            words.append(b.emit("mov.b32 {}, {{{}, {}}};", "b32", *group))
            continue
        halves = _converted_pairs(ctx, group)
        if halves is not None:  # halfwords that each hold a converted pair, bytes in order
            words.append(b.emit("mov.b32 {}, {{{}, {}}};", "b32", *halves) if len(halves) == 2
                         else b.emit("cvt.u32.u16 {}, {};", "b32", halves[0]))
            continue
        word = b.emit("cvt.u32.u16 {}, {};", "b32", group[0])
        for position, element in enumerate(group[1:], start=1):
            wide = b.emit("cvt.u32.u16 {}, {};", "b32", element)
            word = b.emit("bfi.b32 {}, {}, {}, {}, 8;", "b32", wide, word, 8 * position)
        words.append(word)
    return words


def _converted_pairs(ctx: KernelLowering, group: list[SSAValue]) -> list[SSAValue] | None:
    """The halfwords of `ctx.byte_pairs` that hold a group's 8-bit elements (two or four) in
    their order, or None when the group is not made of such pairs."""
    found = [pair for element in group if (pair := ctx.byte_pairs.get(element)) is not None]
    if len(group) % 2 or len(found) != len(group):
        return None
    halves = [found[start][0] for start in range(0, len(group), 2)]
    return halves if found == [(half, byte) for half in halves for byte in (0, 1)] else None


def _halfword(ctx: KernelLowering, word: SSAValue) -> SSAValue:
    """The low 16 bits of a 32-bit `word`."""
    return ctx.b.emit("cvt.u16.u32 {}, {};", "b16", word)


def _address(offset: int) -> str:
    return f"[{{}}+{offset}]" if offset else "[{}]"


def load_piece(ctx: KernelLowering, address: SSAValue, offset: int, piece: int, element_bytes: int, kind: str,
               space: str = "shared", guard: SSAValue | None = None,
               other: SSAValue | None = None) -> list[SSAValue]:
    """One aligned access of `piece` bytes at `address + offset` in state space `space`, as
    one register per element; with `guard`, only where it holds (elsewhere each element is
    `other`)."""
    b = ctx.b
    if piece < 4:  # one 8- or 16-bit element, or two 8-bit ones
        template = f"ld.{space}.{'u8' if piece == 1 else 'b16'} {{}}, {_address(offset)};"
        pair = piece > element_bytes
        if guard is None:
            loaded = b.emit(template, "b16", address, instr=ptx.MemoryOp)
        else:
            assert other is not None, "a guarded load needs the value where its guard fails"
            fallback = _halfword(ctx, pack_words(ctx, [other, other], 1)[0]) if pair else other
            loaded = b.mov("b16", fallback)
            b.run(template, loaded, address, guard=guard, instr=ptx.MemoryOp)
        return _split_bytes(ctx, b.emit("cvt.u32.u16 {}, {};", "b32", loaded), 2) if pair else [loaded]
    count = piece // 4
    word_kind = "f32" if kind == "f32" else "b32"
    targets = ", ".join(["{}"] * count)
    destination = f"{{{{{targets}}}}}" if count > 1 else "{}"
    template = f"ld.{space}{f'.v{count}' if count > 1 else ''}.{word_kind} {destination}, {_address(offset)};"
    if guard is None:
        words = b.emit_many(template, [word_kind] * count, address, instr=ptx.MemoryOp)
    else:  # the fallback words first, then the load over them where the guard holds
        assert other is not None, "a guarded load needs the value where its guard fails"
        fallback = (other if element_bytes == 4
                    else pack_words(ctx, [other] * (4 // element_bytes), element_bytes)[0])
        words = [b.mov(word_kind, fallback) for _ in range(count)]
        b.run(template, *words, address, guard=guard, instr=ptx.MemoryOp)
    return words if element_bytes == 4 else _split_words(ctx, words, element_bytes)


def store_piece(ctx: KernelLowering, address: SSAValue, offset: int, elements: list[SSAValue],
                element_bytes: int, kind: str, guard: SSAValue | None, space: str = "shared") -> None:
    """Store `elements` (one register each) as one aligned access at `address + offset`."""
    b = ctx.b
    piece = len(elements) * element_bytes
    if piece < 4:  # one 8- or 16-bit element, or two 8-bit ones packed into a halfword
        value = (elements[0] if len(elements) == 1
                 else _halfword(ctx, pack_words(ctx, elements, element_bytes)[0]))
        b.run(f"st.{space}.{'u8' if piece == 1 else 'b16'} {_address(offset)}, {{}};", address,
              value, guard=guard, instr=ptx.MemoryOp)
        return
    words = elements if element_bytes == 4 else pack_words(ctx, elements, element_bytes)
    word_type = "f32" if kind == "f32" else "b32"
    listed = ", ".join(["{}"] * len(words))
    vector = f".v{len(words)}" if len(words) > 1 else ""
    operand = f"{{{{{listed}}}}}" if len(words) > 1 else listed
    b.run(f"st.{space}{vector}.{word_type} {_address(offset)}, {operand};", address, *words, guard=guard,
          instr=ptx.MemoryOp)


# -- whole tiles ---------------------------------------------------------------------------------


def _in_cta(ctx: KernelLowering, addresses: list[tuple[SSAValue, int]],
            cta: SSAValue | int | None) -> tuple[list[tuple[SSAValue, int]], str]:
    """The piece addresses (register, immediate offset) of this CTA's buffer, or with `cta` of
    its copy in the CTA of that cluster rank: each distinct register mapped once by `mapa`, whose
    window keeps offsets (PTX ISA, *mapa*), so the immediates stay; and the state space to use."""
    if cta is None:
        return addresses, "shared"
    mapped: dict[SSAValue, SSAValue] = {}
    for register, _ in addresses:
        if register not in mapped:
            mapped[register] = ctx.b.emit("mapa.shared::cluster.u32 {}, {}, {};", "b32", register, cta,
                                          instr=ptx.InstrOp)
    return [(mapped[register], offset) for register, offset in addresses], "shared::cluster"


def read_tile(ctx: KernelLowering, base: SSAValue, alignment: int, layout: Layout, shape, element,
              buffer_layout: SmemLayout | None = None, cta: SSAValue | int | None = None) -> np.ndarray:
    """The registers of a `shape` tile in `layout` read from the buffer at `base` (row-major, or
    laid out by `buffer_layout`), in this CTA or in the CTA of cluster rank `cta`."""
    element_bytes = ir.element_bits(_vector_of(element)) // 8
    kind = register_kind(element)
    plan = AccessPlan(layout, shape, element_bytes, buffer_layout or SmemLayout(shape, (), 0), alignment)
    # ldmatrix reads this CTA's shared memory only.
    matrices = (None if cta is not None
                else matrix_plan(plan, element_bytes, layout.replication != 1, alignment))
    if matrices is not None:
        registers = _load_matrices(ctx, base, plan, matrices)
    else:
        registers = []
        addresses, space = _in_cta(ctx, piece_addresses(ctx, base, plan), cta)
        for address, offset in addresses:
            registers += load_piece(ctx, address, offset, plan.piece_bytes, element_bytes, kind, space)
    return np.array(registers, dtype=object).reshape(layout.registers_shape(shape))


def _load_matrices(ctx: KernelLowering, base: SSAValue, plan: AccessPlan,
                   matrices: MatrixPlan) -> list[SSAValue]:
    """The plan's pieces by `ldmatrix`, one 16-bit register per element in piece order."""
    words: dict[int, SSAValue] = {}  # piece -> its word
    addresses = piece_addresses(ctx, base, matrices.addresses)
    for access in matrices.accesses:
        address, offset = addresses[access.address]
        count = len(access.pieces)
        targets = ", ".join(["{}"] * count)
        loaded = ctx.b.emit_many(
            f"ldmatrix.sync.aligned.m8n8.x{count}.shared.b16 {{{{{targets}}}}}, {_address(offset)};",
            ["b32"] * count, address, instr=ptx.MemoryOp)
        for piece, word in zip(access.pieces, loaded):
            words[piece] = word
    return _split_words(ctx, [words[piece] for piece in range(len(plan.pieces))], 2)


def _store_matrices(ctx: KernelLowering, base: SSAValue, plan: AccessPlan, matrices: MatrixPlan,
                    vectors: np.ndarray) -> None:
    """The plan's pieces by `stmatrix`, each piece one 32-bit word of two elements."""
    addresses = piece_addresses(ctx, base, matrices.addresses)
    for access in matrices.accesses:
        address, offset = addresses[access.address]
        words = []
        for index in access.pieces:
            piece = plan.pieces[index]
            words += pack_words(ctx, list(vectors[piece.slot][piece.lane:piece.lane + piece.lanes]), 2)
        listed = ", ".join(["{}"] * len(words))
        ctx.b.run(
            f"stmatrix.sync.aligned.m8n8.x{len(words)}.shared.b16 {_address(offset)}, {{{{{listed}}}}};",
            address, *words, instr=ptx.MemoryOp)


def write_tile(ctx: KernelLowering, base: SSAValue, alignment: int, layout: Layout, shape, element,
               regs: np.ndarray,
               buffer_layout: SmemLayout | None = None, cta: SSAValue | int | None = None) -> None:
    """Write the registers `regs` of a `shape` tile in `layout` to the buffer at `base`, in this
    CTA or in the CTA of cluster rank `cta`."""
    element_bytes = ir.element_bits(_vector_of(element)) // 8
    kind = register_kind(element)
    plan = AccessPlan(layout, shape, element_bytes, buffer_layout or SmemLayout(shape, (), 0), alignment)
    vectors = regs.reshape(-1, plan.vector)
    # stmatrix writes this CTA's shared memory only.
    matrices = (None if cta is not None
                else matrix_plan(plan, element_bytes, layout.replication != 1, alignment))
    if matrices is not None:
        _store_matrices(ctx, base, plan, matrices, vectors)
        return
    guard = primary_guard(ctx, layout)
    addresses, space = _in_cta(ctx, piece_addresses(ctx, base, plan), cta)
    for piece, (address, offset) in zip(plan.pieces, addresses):
        elements = list(vectors[piece.slot][piece.lane:piece.lane + piece.lanes])
        store_piece(ctx, address, offset, elements, element_bytes, kind, guard, space)


def _vector_of(element) -> VectorType:
    return VectorType(element, [1])


def _load(ctx: KernelLowering, op: ir.LoadSmemOp) -> None:
    layout = inferred_layout(op.result)
    shape = tuple(op.result.type.get_shape())
    read_layout, read_shape = layout, shape
    if isinstance(layout, SplatLayout):
        # One element (infer-layouts gives a load a splat only through a full reduction of a
        # strided tile it meets, whose result has size-1 dims only): every thread reads it.
        read_shape = shape or (1,)
        read_layout = replicated_layout(read_shape)
    regs = read_tile(ctx, ctx.reg(op.smem), buffer_alignment(ctx, op.smem), read_layout, read_shape,
                     op.result.type.element_type, ir.smem_layout(op.smem.type), _rank(ctx, op))
    bind_tile(ctx, op.result, regs.reshape(layout.registers_shape(shape)))


def _store(ctx: KernelLowering, op: ir.StoreSmemOp) -> None:
    tile = tile_of(ctx, op.value)
    element = ir.shaped_type(op.value.type).element_type
    layout, regs = tile.layout, tile.regs
    b = ctx.b
    private = _thread_private(ctx, op)
    if not private:
        b.bar("sync", ctx.facts.named_barrier, 128)
    if isinstance(layout, SplatLayout):
        strided = strided_layout(tile.shape, ir.element_bits(op.value.type) / 8)
        if strided is None:
            _store_splat_elementwise(ctx, op, tile.flat()[0], math.prod(tile.shape))
        else:
            write_tile(ctx, ctx.reg(op.smem), buffer_alignment(ctx, op.smem), strided, tile.shape, element,
                       tile.expanded(strided), ir.smem_layout(op.smem.type), _rank(ctx, op))
    else:
        write_tile(ctx, ctx.reg(op.smem), buffer_alignment(ctx, op.smem), layout, tile.shape, element, regs,
                   ir.smem_layout(op.smem.type), _rank(ctx, op))
    if not private:
        b.bar("sync", ctx.facts.named_barrier, 128)



def _thread_private(ctx: KernelLowering, op: ir.StoreSmemOp) -> bool:
    """Whether every register-tile access to this store's buffer (through any view) has the
    same shape and an unreplicated layout: then each thread only ever touches its own elements,
    and the store needs no barrier around it (async readers and writers synchronise through
    fences and mbarriers as usual).  Found for all buffers at once, at the kernel's first store."""
    private = ctx.analyses.get(_thread_private)
    if not isinstance(private, frozenset):  # the kernel's first store
        accesses = ctx.ops_of(ir.LoadSmemOp, ir.StoreSmemOp)
        private = ctx.analyses[_thread_private] = _thread_private_buffers(accesses)
    return ir.root_buffer(op.smem) in private


def _thread_private_buffers(accesses: Sequence[ir.LoadSmemOp | ir.StoreSmemOp]) -> frozenset[SSAValue]:
    """The root buffers whose register-tile accesses all have one shape and one unreplicated
    layout."""
    kinds: dict[SSAValue, set | None] = {}  # root buffer -> its accesses' (layout, shape); None: shared
    for access in accesses:
        tile = access.result if isinstance(access, ir.LoadSmemOp) else access.value
        root = ir.root_buffer(access.smem)
        layout = layout_of(tile)
        if layout is None or isinstance(layout, SplatLayout) or layout.replication != 1:
            kinds[root] = None
        elif (known := kinds.setdefault(root, set())) is not None:
            known.add((layout, tuple(ir.shaped_type(tile.type).get_shape())))
    return frozenset(root for root, known in kinds.items() if known is not None and len(known) == 1)


def _store_splat_elementwise(ctx: KernelLowering, op: ir.StoreSmemOp, value: SSAValue, count: int) -> None:
    """A splat of `count` elements, a count no strided layout holds: thread t writes elements
    t, t + 128, ... below `count`, one at a time."""
    b = ctx.b
    element_bytes = ir.element_bits(op.value.type) // 8
    address = b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", ctx.facts.thread, element_bytes, ctx.reg(op.smem))
    [(address, _)], space = _in_cta(ctx, [(address, 0)], _rank(ctx, op))
    for start in range(0, count, THREADS):
        guard = None
        if start + THREADS > count:
            guard = b.emit("setp.lt.u32 {}, {}, {};", "pred", ctx.facts.thread, count - start)
        store_piece(ctx, address, start * element_bytes, [value], element_bytes,
                    register_kind(ir.shaped_type(op.value.type).element_type), guard, space)


def _rank(ctx: KernelLowering, op: ir.LoadSmemOp | ir.StoreSmemOp) -> SSAValue | int | None:
    """The cluster rank (a register or an immediate) of the CTA whose buffer the access reaches
    (None: this CTA's)."""
    return None if op.cta is None else ctx.operand(op.cta)


RULES: Rules = {
    ir.LoadSmemOp: _load,
    ir.StoreSmemOp: _store,
}
