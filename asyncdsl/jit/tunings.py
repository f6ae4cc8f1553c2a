"""What the tunings of one autotuned call found (`jit/autotune.py`), by tuning key: each choice's
median milliseconds or the reason it did not run, and which choice was chosen.

Choices are kept by name (`Choice.name`: the kernel and its constexpr settings), not as objects:
the results are plain data, which a store outside the process could hold as they are.
"""

from __future__ import annotations

from typing import Any


class Tunings:
    """The results of an autotuned call's tunings, in memory (see the module docstring)."""

    def __init__(self) -> None:
        # Filled while a key is tuned, so that the reasons are there when no choice is left.
        self.timings: dict[Any, dict[str, float | str]] = {}
        self._chosen: dict[Any, str] = {}

    def __len__(self) -> int:
        return len(self._chosen)

    def chosen(self, key: Any) -> str | None:
        """The name of the choice chosen for `key`, or None when `key` was not tuned yet."""
        return self._chosen.get(key)

    def choose(self, key: Any, name: str) -> None:
        self._chosen[key] = name

    def report(self, key: Any) -> str:
        """What the tuning for `key` measured, a line per choice, and what it chose."""
        lines = [f"asyncdsl.autotune {key}: {self._chosen[key]}"]
        for name, result in self.timings[key].items():
            timed = isinstance(result, float)
            lines.append(f"  {result:10.4f} ms  {name}" if timed else f"  {name}: {result}")
        return "\n".join(lines)
