"""The string vocabularies of copies and kernels, typed: one `StrEnum` per option, defined once.

Users spell options as strings (`oob="undefined"`, `reduction="min"`, `arch="sm_100a"`); the
frontend turns them into these members, the IR mirrors each enum as an attribute
(`dialects/option_attrs.py`), and passes and the interpreter compare against members.  A member
prints as its string, `repr` included, so messages quote what the user wrote.
"""

from __future__ import annotations

from enum import StrEnum


class Option(StrEnum):
    """An option the user spells as a string."""

    def __repr__(self) -> str:
        return repr(self.value)


class Eviction(Option):
    """How long a TMA load's lines should stay in L2 (`createpolicy.fractional.L2::<policy>` and
    the load's `.L2::cache_hint`): `EVICT_FIRST` for data read once, which then gives way before
    other lines, the dirty ones of earlier kernels included; `EVICT_LAST` for data read again.
    A hint: the bytes copied are the same."""

    EVICT_FIRST = "evict_first"
    EVICT_LAST = "evict_last"


class Implementation(Option):
    """The copy engine a user asks for (tensor copies choose between TMA and bulk themselves)."""

    TMA = "tma"
    CP_ASYNC = "cp_async"


class Oob(Option):
    """What a slice past the array's edge gives.

    `ZEROS` zero-fills loads and clips stores through a TMA tensor map; `UNDEFINED` and
    `PROMISE_IN_BOUNDS` let a slice that is one contiguous run move as a plain bulk copy, clamped
    at the end of the array under `UNDEFINED`, moved whole under `PROMISE_IN_BOUNDS`.
    """

    ZEROS = "zeros"
    UNDEFINED = "undefined"
    PROMISE_IN_BOUNDS = "promise_in_bounds"


BULK_OOB_MODES = (Oob.UNDEFINED, Oob.PROMISE_IN_BOUNDS)  # the modes a bulk copy can take


class Reduction(Option):
    """The ops a TMA reduction combines with (what the user names; `PTX_OP` is what PTX names)."""

    ADD = "add"
    MIN = "min"
    MAX = "max"
    UMIN = "umin"
    UMAX = "umax"
    SMIN = "smin"
    SMAX = "smax"
    INC = "inc"
    DEC = "dec"
    AND = "and"
    OR = "or"
    XOR = "xor"


class Partition(Option):
    """How a leader-tracked collective load (Blackwell `cta_group::2`) shares its box: each CTA
    of the pair loads its own part, or both load all of it."""

    PARTITIONED = "partitioned"
    REPLICATED = "replicated"


class TileReduction(Option):
    """How a register tile is reduced along its axes (`tile.sum(axis)`, `.max`, `.min`)."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"


class Comparison(Option):
    """An elementwise comparison of register tiles; floats compare ordered (false on NaN)
    except NE, which holds when either is NaN (numpy's `!=`)."""

    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"


class Arch(Option):
    """A target: Hopper (the default) or Blackwell, whose copy forms asyncdsl emits and assembles."""

    SM_90A = "sm_90a"
    SM_100A = "sm_100a"


# The lowest PTX ISA version that covers what each target's kernels use (docs/hardware.md §13.1):
# everything on Hopper needs 8.0; Blackwell's cta_group::2 and gather4 forms 8.6.  A version is
# (major, minor), so that the highest of several is their `max`.
PtxVersion = tuple[int, int]
PTX_VERSIONS: dict[Arch, PtxVersion] = {Arch.SM_90A: (8, 0), Arch.SM_100A: (8, 6)}
BLACKWELL = Arch.SM_100A  # the first target with cta_group::2 copies and gather4/scatter4

# Where a kernel's TMA descriptors travel: by-value kernel parameters (the default) or a GMEM
# scratch the host fills before launch (`passes/allocate_descriptor_scratch.py`).
DESCRIPTOR_MODES = ("grid_constant", "scratch")
