"""The Python operators of a register tile (`+ - * / // % & | ^ << >>`, comparisons), each
naming the `arith` op it makes; `RegisterTile` (`frontend/tiles.py`) supplies how a binary op,
a modulo and a comparison are traced (`_binary`, `_modulo`, `_compare`) and has the unary ones
and `**`.

Integer division, modulo and shifts (int32) have Python's floor semantics, wrapping at the int32
ends; shift amounts read unsigned, and 32 or more shift every bit out (the sign's copies for
>>), as PTX's shl/shr clamp them (docs/register-tiles.md).
"""

from __future__ import annotations

from xdsl.dialects import arith

from asyncdsl import dtypes
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend.scalars import check_divisor, is_power_of_two
from asyncdsl.frontend.tile_arguments import is_numpy_number, numpy_promotion, plain_number

FLOOR_DIVISION = "// of register tiles (floats divide with /)"
MODULO = "% of register tiles"


class TileOperators:
    """Python's operators on a tile, in terms of the hooks `RegisterTile` defines."""

    __slots__ = ()
    # numpy defers to the tile's operators (np.float32(0.5) * t is t.__rmul__), and its functions
    # refuse a tile (np.exp(t)), where it would otherwise make an object array of it.
    __array_ufunc__ = None

    def __add__(self, other):
        return self._binary(other, arith.AddfOp, arith.AddiOp)

    def __radd__(self, other):
        return self._binary(other, arith.AddfOp, arith.AddiOp, reverse=True)

    def __sub__(self, other):
        return self._binary(other, arith.SubfOp, arith.SubiOp)

    def __rsub__(self, other):
        return self._binary(other, arith.SubfOp, arith.SubiOp, reverse=True)

    def __mul__(self, other):
        return self._binary(other, arith.MulfOp, arith.MuliOp)

    def __rmul__(self, other):
        return self._binary(other, arith.MulfOp, arith.MuliOp, reverse=True)

    def __truediv__(self, other):
        return self._binary(other, arith.DivfOp, None,
                            what="division of register tiles (for integers use //)")

    def __rtruediv__(self, other):
        return self._binary(other, arith.DivfOp, None, reverse=True, what="division of register tiles")

    def __and__(self, other):
        return self._binary(other, None, arith.AndIOp, what="& of register tiles", bitwise=True)

    def __rand__(self, other):
        return self._binary(other, None, arith.AndIOp, reverse=True, what="& of register tiles", bitwise=True)

    def __or__(self, other):
        return self._binary(other, None, arith.OrIOp, what="| of register tiles", bitwise=True)

    def __ror__(self, other):
        return self._binary(other, None, arith.OrIOp, reverse=True, what="| of register tiles", bitwise=True)

    def __xor__(self, other):
        return self._binary(other, None, arith.XOrIOp, what="^ of register tiles", bitwise=True)

    def __rxor__(self, other):
        return self._binary(other, None, arith.XOrIOp, reverse=True, what="^ of register tiles", bitwise=True)

    def __floordiv__(self, other):
        check_divisor(plain_number(other), "a register tile's //")
        return self._binary(other, None, arith.FloorDivSIOp, what=FLOOR_DIVISION)

    def __rfloordiv__(self, other):
        return self._binary(other, None, arith.FloorDivSIOp, reverse=True, what=FLOOR_DIVISION)

    def __mod__(self, other):
        check_divisor(plain_number(other), "a register tile's %")
        if is_numpy_number(other) and numpy_promotion(self.dtype, [other], MODULO) == self.dtype:
            other = other.item()  # a numpy scalar that keeps the tile's dtype acts as its number
        if self.dtype == dtypes.int32 and is_power_of_two(other):
            # Python's remainder by 2^k is the low k bits in two's complement, negatives too
            # (-5 % 8 == 3 == -5 & 7): one `and` where the general form takes three.
            return self & (other - 1)
        return self._modulo(other, reverse=False)

    def __rmod__(self, other):
        return self._modulo(other, reverse=True)

    def __lshift__(self, other):
        _check_shift(other, "<<")
        return self._binary(other, None, arith.ShLIOp, what="<< of register tiles")

    def __rlshift__(self, other):
        return self._binary(other, None, arith.ShLIOp, reverse=True, what="<< of register tiles")

    def __rshift__(self, other):
        _check_shift(other, ">>")
        return self._binary(other, None, arith.ShRSIOp, what=">> of register tiles")

    def __rrshift__(self, other):
        return self._binary(other, None, arith.ShRSIOp, reverse=True, what=">> of register tiles")

    def __lt__(self, other):
        return self._compare("lt", other)

    def __le__(self, other):
        return self._compare("le", other)

    def __gt__(self, other):
        return self._compare("gt", other)

    def __ge__(self, other):
        return self._compare("ge", other)

    def __eq__(self, other):  # type: ignore[override]
        return self._compare("eq", other)

    def __ne__(self, other):  # type: ignore[override]
        return self._compare("ne", other)


def _check_shift(amount, operator: str) -> None:
    """A negative constant shift is refused, as Python refuses it: PTX would read it unsigned,
    as a shift of 32 or more (every bit out), which no one means by `x << -1`."""
    amount = plain_number(amount)
    if is_int(amount) and amount < 0:
        raise TraceError(f"tile {operator} {amount}: negative shift count", user_location())
