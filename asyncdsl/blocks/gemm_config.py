"""The configuration of a warp-specialized GEMM as one value instead of a dozen positional
parameters: tile shape, ring depth, how the consumers share a tile, tile order, split K.

    from asyncdsl.blocks.gemm_config import GemmConfig

    config = GemmConfig(BN=128, STAGES=6, SPLIT_K=2)
    config.check()                           # refuses what no kernel can be built with
    part = config.part                       # (64, 128): one consumer's accumulator
    constexprs = config.constexprs()         # the kernel's keyword arguments, for a launch

A kernel takes the fields as constexprs (so each configuration compiles once) and rebuilds the
value in its body: `GemmConfig(BM=BM, BN=BN, ...)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from asyncdsl.frontend import language as ad


@dataclass(frozen=True)
class GemmConfig:
    """BM x BN tiles, BK-deep slices of K, STAGES slots in the load ring; SPLIT: the consumers
    halve a tile by rows "m" or columns "n"; EPILOGUE "tma64" (64 x 64 pieces through two
    slots) or "tma" (a consumer's whole part at once); SNAKE: the band width of the tile order
    (0: row by row); REGISTERS: (producer, consumer) registers a thread, or None; IN_FLIGHT: one
    wgmma kept running (1) or none (0); SPLIT_K: units per tile; SHARE: the operand the CTAs of
    a cluster multicast ("a" or "b"); EVICT_FIRST: the operands L2 gives up first."""

    BM: int = 128
    BN: int = 256
    BK: int = 64
    STAGES: int = 4
    SPLIT: str = "m"
    EPILOGUE: str = "tma64"
    SNAKE: int = 16
    REGISTERS: tuple | None = (40, 232)
    IN_FLIGHT: int = 1
    SPLIT_K: int = 1
    SHARE: str = "b"
    EVICT_FIRST: str = ""

    def check(self, consumers: int = 2) -> None:
        """Refuse, at trace time, a configuration the kernel cannot be built for, with `consumers`
        warpgroups sharing each tile (`parts`)."""
        check_tiles(self.BM, self.BN, self.BK, self.STAGES)
        if not isinstance(self.SPLIT_K, int) or self.SPLIT_K < 1:
            raise ad.TraceError(f"SPLIT_K must be a positive int, got {self.SPLIT_K!r}")
        if self.SPLIT not in ("m", "n"):
            raise ad.TraceError(f"SPLIT says how the consumers halve a tile, by rows 'm' or columns 'n', "
                                f"got {self.SPLIT!r}")
        if self.EPILOGUE not in ("tma", "tma64"):
            raise ad.TraceError(f"EPILOGUE is 'tma' (the whole part at once) or 'tma64' (64 x 64 pieces), "
                                f"got {self.EPILOGUE!r}")
        eviction_policies(self.EVICT_FIRST)
        if self.SHARE not in ("a", "b"):
            raise ad.TraceError(
                f"SHARE says which operand the CTAs of a cluster share: 'a' or 'b', got {self.SHARE!r}")
        if self.IN_FLIGHT not in (0, 1):
            raise ad.TraceError(
                f"IN_FLIGHT says whether one wgmma stays in flight: 0 or 1, got {self.IN_FLIGHT!r}")
        a_parts, b_parts = self.parts(consumers)
        rows, columns = self.BM // a_parts, self.BN // b_parts
        if rows % 64 or columns % 64 or columns > 256:  # one wgmma's accumulator, 64 x 64 store pieces
            halved = "" if consumers == 1 else f", halved by {'rows' if self.SPLIT == 'm' else 'columns'},"
            raise ad.TraceError(f"a BM x BN = {self.BM} x {self.BN} tile{halved} gives each consumer a "
                                f"{rows} x {columns} accumulator: its rows and columns must be multiples of "
                                f"64, its columns 256 at most (one wgmma's N)")
        if self.IN_FLIGHT and self.STAGES < 2:  # its slot is held while the next step waits for one
            raise ad.TraceError(f"IN_FLIGHT=1 keeps a wgmma and its slot busy while the next K step waits "
                                f"for a slot: STAGES must be 2 or more, got {self.STAGES} (or IN_FLIGHT=0)")

    def parts(self, consumers: int = 2) -> tuple[int, int]:
        """How many parts the a and the b slice of a step are cut into, one per consumer
        warpgroup: (2, 1) when two consumers halve the tile by rows, (1, 2) by columns."""
        return (1, 1) if consumers == 1 else (2, 1) if self.SPLIT == "m" else (1, 2)

    @property
    def part(self) -> tuple[int, int]:
        """One of two consumers' accumulator: half the tile's rows or columns (`SPLIT`)."""
        a_parts, b_parts = self.parts()
        return self.BM // a_parts, self.BN // b_parts

    def constexprs(self) -> dict:
        """The fields as keyword arguments of a kernel taking them as constexprs."""
        return asdict(self)

    def with_(self, **changes) -> GemmConfig:
        """This configuration with some fields changed."""
        return replace(self, **changes)


def check_tiles(BM, BN, BK, STAGES) -> None:
    """Refuse, at trace time, tiles and rings a bf16 GEMM cannot be built with."""
    for name, value in (("BM", BM), ("BN", BN), ("BK", BK)):
        if not isinstance(value, int) or value <= 0 or value % 64:
            raise ad.TraceError(f"{name} must be a positive multiple of 64 (the tensor cores read columns of "
                                f"64 elements), got {value!r}")
    if not isinstance(STAGES, int) or STAGES < 1:
        raise ad.TraceError(f"STAGES must be a positive int, got {STAGES!r}")


def eviction_policies(evict_first: str) -> dict:
    """The `eviction_policy` of each operand's slices: "evict_first" for those `evict_first`
    names ("", "a", "b" or "ab"), the default for the others.  A problem of few tiles reads each
    slice of b once or twice, and lines kept for it only push out the dirty lines of earlier
    kernels, whose write-backs then compete with its reads."""
    if evict_first not in ("", "a", "b", "ab"):
        raise ad.TraceError("EVICT_FIRST names the operands whose slices L2 gives up first: '', 'a', 'b' or "
                            f"'ab', got {evict_first!r}")
    return {name: "evict_first" if name in evict_first else None for name in "ab"}
