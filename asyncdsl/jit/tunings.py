"""What the tunings of one autotuned call found (`jit/autotune.py`), by tuning key: each choice's
median milliseconds or the reason it did not run, and which choice was chosen; and the same on
disk, so that a process tuning a call an earlier one tuned takes its choice without timing.

Choices are kept by name (`Choice.name`: the kernel and its constexpr settings), not as objects:
the results are plain data.  On disk (`$ASYNCDSL_CACHE_DIR/tunings`, the kernel cache's atomic
writes, checked reads and per-key locks) a tuning is JSON under a key the caller computes
(`Autotuned` names the choices' code, the call's argument layout and the device): only tunings
that timed their choice on a GPU are filed, and a file naming no choice of the call is a miss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asyncdsl.config import knobs
from asyncdsl.runtime.module_cache import ChecksummedFiles

TUNINGS_FORMAT = "asyncdsl-tunings-1"  # part of every disk key: bump when a tuning's record changes


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


class TuningFiles:
    """Tunings on disk, one file per key: the chosen choice's name and every choice's result."""

    def __init__(self, directory: Path | None = None):
        self._files = ChecksummedFiles(directory or knobs.cache_dir / "tunings", ".json",
                                       b"asyncdsl-tuning1", "an autotuning result")

    def locked(self, key: str):
        """The lock of `key` across processes: held while it is tuned, so that processes tuning
        the same call at once (a job's ranks) time it once and the others read the choice."""
        return self._files.locked(key)

    def load(self, key: str, names: frozenset[str]) -> tuple[str, dict[str, float | str]] | None:
        """(chosen name, results) filed under `key`, or None when there are none or they name a
        choice outside `names`."""
        import json  # here: a process that never tunes on a GPU never needs it

        data = self._files.load(key)
        if data is None:
            return None
        try:
            record = json.loads(data)
            chosen, results = record["chosen"], record["results"]
        except (ValueError, KeyError, TypeError):
            return None
        if chosen not in names or not isinstance(results, dict) or not set(results) <= names:
            return None
        return chosen, results

    def store(self, key: str, chosen: str, results: dict[str, float | str]) -> None:
        import json

        self._files.store(key, json.dumps({"chosen": chosen, "results": results}, sort_keys=True).encode())
