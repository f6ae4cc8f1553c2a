"""Hopper facts and planners as plain Python: no IR, no numpy engines."""
