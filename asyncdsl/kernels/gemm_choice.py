"""Which of the bf16 GEMM kernels a problem gets, and with what configuration: the host function
`asyncdsl.kernels.gemm(a, b)`.

    from asyncdsl.kernels.gemm_choice import plan

    plan(8192, 4096, 4096, ctas=132)   # GemmPlan("pingpong", GemmConfig(BN=128, ...))

The choice counts tiles against the CTAs (one a multiprocessor, persistent):
- enough 128 x 256 tiles for a wave: the cooperative kernel (`gemm.matmul`), unless its last
  wave would be mostly idle where 256 x 128 tiles in CTA pairs sharing b make whole waves
  (3000 x 4104: 3.1 waves against 3), or K is short and the tiles make many waves, where the
  ping-pong kernel hides each tile's epilogue behind the other consumer's K loop
  (`gemm_pingpong`): the epilogue's share of a tile's time grows as K shrinks;
- fewer: the largest tiles of which there are about a wave, 128 x 128 (ping-pong from two rows
  of tiles on), then 64 x 128 and 64 x 64 with one consumer a CTA (`gemm.matmul_narrow`) and a
  deep ring of slices 128 deep, since a CTA of few tiles waits on memory; where a's rows do not
  start on 128-byte lines (K not a multiple of 64), 128 x 64 tiles in CTA pairs sharing each a
  slice instead of 64 x 128 ones, halving the ragged rows each CTA reads (1000^3);
- fewer still and K long: split K, the units of a tile adding up in order.
A problem of one row of tiles reads each slice of b once: L2 gives it up first (`EVICT_FIRST`).
The rules follow the configuration sweep of `benchmarks/matmul.py --table` on the H200
(docs/performance.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.blocks.shapes import product_shape
from asyncdsl.blocks.split_k_sum import split_k_flags
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.jit.autotune import Choice, autotune
from asyncdsl.kernels.dispatch import flag, launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.gemm_cooperative import (
    INTERPRETED_CTAS,
    matmul,
    matmul_2cta,
    matmul_narrow,
    matmul_narrow_2cta,
    matmul_split_k,
    matmul_split_k_2cta,
)
from asyncdsl.kernels.gemm_pingpong import matmul_pingpong
from asyncdsl.kernels.outputs import apart, empty, empty_product, partial_sums

_SCHEDULES = ("cooperative", "pingpong", "narrow")
# The constexprs each schedule's kernel takes from the configuration.
_FIELDS = {
    "cooperative": None,  # all of them
    "split_k": ("SPLIT_K", "BN", "STAGES", "BK"),  # the cooperative kernel with SPLIT_K > 1
    "pingpong": ("BM", "BN", "BK", "STAGES", "SNAKE"),
    "narrow": ("BM", "BN", "BK", "STAGES", "SNAKE", "IN_FLIGHT", "SHARE", "EVICT_FIRST"),
}
# Fields a kernel does not take but fixes, at the value it runs with: asking for that is no change.
_FIXED: dict[str, dict[str, object]] = {"split_k": {"SHARE": "a"}, "narrow": {"REGISTERS": None}}
# 128 x 256 tiles for this share of the CTAs count as a wave (2048^3: 128 tiles on 132); below
# it, the largest tiles of which there are _NEAR_WAVE of a wave.
_FULL_WAVE = 0.9
_NEAR_WAVE = 0.75


@dataclass(frozen=True)
class GemmPlan:
    """A GEMM kernel and its configuration: `schedule` "cooperative" (two consumers share a tile,
    `gemm.matmul`; SPLIT_K > 1: `gemm.matmul_split_k`), "pingpong" (each consumer its own tile,
    `gemm_pingpong.matmul_pingpong`) or "narrow" (one consumer a CTA, `gemm.matmul_narrow`);
    `pair`: in clusters of two CTAs sharing `config.SHARE`'s slices.  A field of `config` its
    kernel does not take must keep its default (split K takes SPLIT_K, BN, STAGES and BK)."""

    schedule: str
    config: GemmConfig = GemmConfig()
    pair: bool = False

    def kernel(self):
        if self.schedule not in _SCHEDULES:
            raise ArgumentError(f"a GemmPlan's schedule is one of {', '.join(_SCHEDULES)}, "
                                f"got {self.schedule!r}", user_location())
        if self.pair and self.schedule == "pingpong":
            raise ArgumentError("the ping-pong GEMM runs one CTA a cluster: a GemmPlan of it takes "
                                "pair=False", user_location())
        if self.config.SPLIT_K > 1:
            if self.schedule != "cooperative":  # it would run the cooperative kernel all the same
                raise ArgumentError(f"split K is a schedule of the cooperative kernel: a GemmPlan with "
                                    f"SPLIT_K={self.config.SPLIT_K} is 'cooperative', got {self.schedule!r}",
                                    user_location())
            return matmul_split_k_2cta if self.pair else matmul_split_k
        return {"cooperative": (matmul, matmul_2cta), "pingpong": (matmul_pingpong,),
                "narrow": (matmul_narrow, matmul_narrow_2cta)}[self.schedule][self.pair]

    def constexprs(self) -> dict:
        kind = "split_k" if self.config.SPLIT_K > 1 else self.schedule
        fields, every = _FIELDS[kind], self.config.constexprs()
        if fields is None:
            return every
        # A field the kernel does not take, set to anything but the default, would run another
        # configuration than the one asked for (split K ran BM=128 tiles of any schedule).
        default, fixed = GemmConfig().constexprs(), _FIXED.get(kind, {})
        ignored = [f"{name}={value!r}" for name, value in every.items() if name not in fields
                   and value != default[name] and (name not in fixed or value != fixed[name])]
        if ignored:
            kernel = "the split-K kernel" if kind == "split_k" else f"the {kind} kernel"
            raise ArgumentError(f"a GemmPlan of {kernel} takes {', '.join(fields)} of its GemmConfig, "
                                f"not {', '.join(ignored)}", user_location())
        return {name: every[name] for name in fields}


@on_stream
def gemm(a, b, *, out=None, config: GemmConfig | GemmPlan | None = None, tune: bool = False,
         ctas: int | None = None, stream=None):
    """c = a @ b for a (M, K) and b (K, N), both bfloat16 (or float16), in a new (M, N) array
    like a or in `out`, by the kernel `plan` picks for the shape; `config` overrides it (a
    `GemmConfig` for the cooperative kernel; SPLIT_K > 1: the splits add up in order through
    float32 partial sums made here).  `tune=True`: the plan's choice and its `candidates` timed
    on the GPU on a shape's first call, the fastest kept on disk for later calls and processes
    (that first call times kernels, so it cannot be captured in a CUDA graph)."""
    tune = flag(tune, "tune")
    m, n, k = product_shape(a, b)
    c = empty(a, (m, n), a.dtype) if out is None else apart(out, a=a, b=b)
    if 0 in (m, n, k):
        return empty_product(a, b, c, k)
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a) // 2 * 2)
    if config is None and tune and not on_host(a):  # the interpreter times nothing
        tuned = _tuned(m, n, k, ctas)
        if tuned is not None:
            tuned(a, b, c, stream=stream, CTAS=ctas)
            return c
    if config is None:
        chosen, kernel, constexprs = _planned(m, n, k, ctas)
    else:
        chosen = GemmPlan("cooperative", config) if isinstance(config, GemmConfig) else config
        if not isinstance(chosen, GemmPlan):
            raise ArgumentError(f"config is a GemmConfig or a GemmPlan, got {config!r}", user_location())
        kernel, constexprs = chosen.kernel(), chosen.constexprs()
    workspace = _workspace(a, m, n, chosen.config, chosen.pair, stream) if chosen.config.SPLIT_K > 1 else ()
    launch(kernel, a, b, c, *workspace, stream=stream, CTAS=ctas, **constexprs)
    return c


@lru_cache(maxsize=1024)
def _planned(m: int, n: int, k: int, ctas: int) -> tuple:
    """`plan`'s choice for a shape with its kernel and constexprs, worked out once a shape: a
    call of `gemm` then costs a dictionary lookup on top of the kernel's launch (the plan and
    its keyword arguments took about 18 us of Python a call)."""
    chosen = plan(m, n, k, ctas)
    return chosen, chosen.kernel(), chosen.constexprs()


# The neighbours `candidates` adds to `plan`'s choice: for problems of a wave of 128 x 256 tiles
# or more, the other tile shapes of the table's sweep that won rows of it; for fewer tiles, the
# few-tile rings that won the small rows (docs/notes/2026-12-03-gemm-table-shapes.md: pairs of
# 128 x 64 tiles sharing a at 1000^3, 64 x 128 tiles 64 deep in 8 stages at 1024^3).
_WAVE_NEIGHBOURS = (GemmPlan("cooperative", GemmConfig()), GemmPlan("pingpong", GemmConfig(BN=128)),
                    GemmPlan("cooperative", GemmConfig(BN=192)),
                    GemmPlan("cooperative", GemmConfig(BM=256, BN=128, SHARE="b"), pair=True))
# Pairs of 128 x 64 tiles sharing each slice of a: `plan`'s choice where a's rows are ragged.
_PAIRS_SHARING_A = GemmPlan("narrow", GemmConfig(BM=128, BN=64, BK=128, STAGES=4, SHARE="a"), pair=True)
_FEW_TILE_NEIGHBOURS = (
    _PAIRS_SHARING_A,
    GemmPlan("narrow", GemmConfig(BM=64, BN=128, BK=64, STAGES=8)),
    GemmPlan("narrow", GemmConfig(BM=64, BN=128, BK=128, STAGES=4)),
    GemmPlan("cooperative", GemmConfig(BN=64, BK=128, STAGES=4)))


def candidates(m: int, n: int, k: int, ctas: int) -> list[GemmPlan]:
    """What `gemm(tune=True)` times for an m x n x k product: `plan`'s choice first, then its
    neighbours of the same kind of problem (in CTA pairs only on an even count of CTAs); a
    split-K plan alone (its units need workspaces the others do not take)."""
    chosen = plan(m, n, k, ctas)
    if chosen.config.SPLIT_K > 1:
        return [chosen]
    many = -(-m // 128) * -(-n // 256) >= _FULL_WAVE * ctas
    neighbours = _WAVE_NEIGHBOURS if many else _FEW_TILE_NEIGHBOURS
    return [chosen, *(other for other in neighbours if other != chosen and (ctas % 2 == 0 or not other.pair))]


@lru_cache(maxsize=256)
def _tuned(m: int, n: int, k: int, ctas: int):
    """The `asyncdsl.autotune` call of a shape's `candidates`, None where there is one."""
    plans = candidates(m, n, k, ctas)
    if len(plans) == 1:
        return None
    return autotune([Choice(chosen.kernel(), **chosen.constexprs()) for chosen in plans])


def plan(m: int, n: int, k: int, ctas: int) -> GemmPlan:
    """The kernel and configuration for an m x n x k product on `ctas` CTAs (the module's
    docstring says why; CTA pairs only where `ctas` is even)."""
    def tiles(bm, bn):
        return -(-m // bm) * -(-n // bn)

    def filled(count):  # the share of the CTA slots the tiles' waves fill
        return count / (-(-count // ctas) * ctas)

    if tiles(128, 256) >= _FULL_WAVE * ctas:
        # CTA pairs only on an even count: the grid is whole clusters of two
        if m >= 256 and ctas % 2 == 0 and filled(tiles(128, 256)) < 0.8 \
                and filled(tiles(256, 128)) > filled(tiles(128, 256)):
            return GemmPlan("cooperative", GemmConfig(BM=256, BN=128, SHARE="b"), pair=True)
        if k <= 4096 and tiles(128, 128) >= 15 * ctas:
            return GemmPlan("pingpong", GemmConfig(BN=128))
        return GemmPlan("cooperative", _wave_filling(m, n, ctas))
    one_row = m <= 128
    if tiles(128, 128) >= _NEAR_WAVE * ctas:
        if one_row:
            return GemmPlan("cooperative", GemmConfig(BN=128, BK=128, STAGES=3, EVICT_FIRST="b"))
        return GemmPlan("pingpong", GemmConfig(BN=128, STAGES=6))
    if tiles(64, 128) >= _NEAR_WAVE * ctas:
        if k % 64 and ctas % 2 == 0:  # a's rows of 2k bytes start inside 128-byte lines
            return _PAIRS_SHARING_A
        return GemmPlan("narrow", GemmConfig(BM=64, BN=128, BK=128, STAGES=4))
    if tiles(64, 64) >= _NEAR_WAVE * ctas or k < 2048:
        return GemmPlan("narrow", GemmConfig(BM=64, BN=64, BK=128, STAGES=6, EVICT_FIRST="ab"))
    splits = max(2, min(4, ctas // tiles(128, 64)))
    return GemmPlan("cooperative", GemmConfig(BN=64, STAGES=8, SPLIT_K=splits))


def choose(m: int, n: int, k: int, ctas: int) -> GemmConfig:
    """The cooperative kernel's configuration for an m x n x k product on `ctas` CTAs (the GEMMs
    with an epilogue of their own run only that kernel): 128 x 256 tiles when they fill the CTAs
    (128 x 192 when those make whole waves where 256 leaves the last one less than half full),
    128 x 64 tiles in a deep ring when 128 x 256 ones leave CTAs idle, split K in order when even
    those leave half the CTAs idle and K is long."""
    def tiles(bn):
        return -(-m // 128) * -(-n // bn)

    if tiles(256) >= ctas:
        return _wave_filling(m, n, ctas)
    if tiles(64) >= ctas // 2 or k < 2048:
        return GemmConfig(BN=64, STAGES=8)
    return GemmConfig(BN=64, BK=64, STAGES=8, SPLIT_K=min(4, ctas // tiles(64)))


def _wave_filling(m: int, n: int, ctas: int) -> GemmConfig:
    """The cooperative kernel's tiles for a problem of at least a wave of them: 128 x 256, or
    128 x 192 where those make whole waves and 128 x 256 leave the last one less than half full."""
    def tiles(bn):
        return -(-m // 128) * -(-n // bn)

    return GemmConfig(BN=192) if tiles(192) % ctas == 0 and tiles(256) % ctas < ctas / 2 else GemmConfig()


def _workspace(a, m: int, n: int, config: GemmConfig, pair: bool, stream) -> tuple:
    """Split K's float32 partial sums and flags for an (m, n) c (`outputs.partial_sums`)."""
    return partial_sums(a, stream, ("split K", m, n, config.SPLIT_K, config.BN, pair),
                        (config.SPLIT_K - 1, m, n), split_k_flags(m, n, config.BN, 2 if pair else 1))
