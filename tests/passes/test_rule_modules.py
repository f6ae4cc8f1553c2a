"""`lower_to_ptx.RULES` loads the rule modules of an op's module with the first op of it: every
rule a `passes/to_ptx` module defines must be found that way, from a table that has loaded
nothing yet."""

from __future__ import annotations

import importlib
import pkgutil

from asyncdsl.passes import to_ptx
from asyncdsl.passes.lower_to_ptx import ELEMENTWISE_OP_MODULES, RULE_MODULES, RuleTable
from asyncdsl.passes.to_ptx import tile_math


def _rule_modules():
    for info in pkgutil.iter_modules(to_ptx.__path__):
        yield info.name, importlib.import_module(f"{to_ptx.__name__}.{info.name}")


def test_every_rule_module_is_named_for_the_op_modules_of_its_ops():
    for name, module in _rule_modules():
        for op_class in vars(module).get("RULES", {}):
            assert name in RULE_MODULES.get(op_class.__module__, ()), (
                f"to_ptx/{name}.py lowers {op_class.__name__}, but RULE_MODULES does not name it "
                f"for {op_class.__module__}")
    for op_class in tile_math.ELEMENT_RULES:
        assert op_class.__module__ in ELEMENTWISE_OP_MODULES, op_class.__name__


def test_a_fresh_table_finds_each_ops_own_rule():
    rules = {op_class: rule for _, module in _rule_modules()
             for op_class, rule in getattr(module, "RULES", {}).items()}
    assert rules
    for op_class, rule in rules.items():
        if op_class not in tile_math.ELEMENT_RULES:
            assert RuleTable().get(op_class) is rule, op_class.__name__


def test_elementwise_ops_get_the_per_element_rule_around_the_index_rule():
    # What the table gives an `arith`/`math` op (or a tile comparison, select, conversion) is the
    # per-element rule, which hands index arithmetic to the op's own rule where it has one.
    scalar_rules = importlib.import_module(f"{to_ptx.__name__}.scalars").RULES
    per_element = tile_math.elementwise(next(iter(tile_math.ELEMENT_RULES.values())), None).__qualname__
    for op_class in tile_math.ELEMENT_RULES:
        rule = RuleTable().get(op_class)
        assert rule is not None and rule is not scalar_rules.get(op_class), op_class.__name__
        assert rule.__qualname__ == per_element, op_class.__name__
