"""PTX lowering rules, one module per feature; `lower_to_ptx.RULES` merges their tables."""
