"""Named rules that keep a class of program out of a run: each names a construct the tile language
is known to get wrong today, so that a run still measures everything else.  A run reports which
rules were active and how many draws each one changed (`--no-skip` turns them all off)."""

from __future__ import annotations

from dataclasses import dataclass, field

# name -> what the rule keeps out, and why
RULES: dict[str, str] = {
    "other_tile_total": "t + u.min(): the 0-d total of another tile broadcast into t; a ValueError "
    "('cannot reshape') or a LayoutError without a location",
    "unit_iota_mask": "ad.where(ad.iota((1, 1), ...) < k, ...) stretched over a (1, n) tile: a LayoutError "
                      "('a splat tile ... has no per-element map') without a location",
    "stretched_iota_mask": "a (rows, 1) or (1, columns) iota mask stretched in where (kept out "
                                 "everywhere): on a (16, 16) float16 tile, where(iota((16, 1)) < 3, u, t) "
                                 "and then (t > u).sum() or t.sum() is a LayoutError ('the register map "
                                 "differs between threads') without a location",
    "reduce_keepdims_again": "t + t.min(axis=0, keepdims=True).min(): a keepdims result reduced again; "
    "refused naming internal layouts, or a LayoutError without a location",
}


@dataclass(frozen=True)
class SkipRules:
    active: frozenset[str] = field(default_factory=lambda: frozenset(RULES))

    @classmethod
    def none(cls) -> SkipRules:
        return cls(frozenset())

    def describe(self) -> str:
        if not self.active:
            return "skip rules: none"
        return "skip rules: " + "; ".join(f"{name} ({RULES[name]})" for name in sorted(self.active))
