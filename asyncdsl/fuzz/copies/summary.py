"""Counting outcomes and showing failures."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from .generate import case_for
from .patterns import patterns
from .run import FAILURES, HINTS, OUTCOMES, Result


@dataclass
class Summary:
    seed: int
    results: dict[int, Result] = field(default_factory=dict)

    def add(self, index: int, result: Result) -> None:
        self.results[index] = result

    @property
    def counts(self) -> Counter:
        return Counter(r.outcome for r in self.results.values())

    @property
    def failures(self) -> int:
        counts = self.counts
        return sum(counts[outcome] for outcome in FAILURES)

    def line(self) -> str:
        counts = self.counts
        line = f"cases={len(self.results)} " + " ".join(f"{o}={counts[o]}" for o in OUTCOMES)
        if counts["skipped"]:  # a GPU run: also how many cases the GPU did not run
            model = sum(1 for r in self.results.values() if r.cpu_outcome == "mismatch")
            line += f" skipped={counts['skipped']} interpreter_vs_model_mismatch={model}"
        return line

    @property
    def ran_on_gpu(self) -> int:
        return sum(1 for r in self.results.values() if r.stage == "device")

    def shown(self, per_class: int) -> str:
        """Source and error of the first `per_class` failures of each class."""
        blocks = []
        for outcome in FAILURES:
            chosen = [r for _, r in sorted(self.results.items()) if r.outcome == outcome][:per_class]
            for result in chosen:
                blocks.append(
                    f"===== {outcome}: case {result.name} ({result.scenario}, at {result.stage or '?'})\n"
                    f"{result.source}\n----- {result.detail}\n"
                )
        return "\n".join(blocks)

    def write_report(self, path: str) -> None:
        with open(path, "w") as file:
            for index, result in sorted(self.results.items()):
                if result.outcome != "ok":
                    entry = asdict(result)
                    entry["patterns"] = patterns(case_for(self.seed, index, HINTS))
                    file.write(json.dumps(entry) + "\n")

    def by_pattern(self) -> str:
        """For each known bug pattern: how many cases showed it, and how they ended."""
        seen: dict[str, Counter] = defaultdict(Counter)
        for index, result in self.results.items():
            for name in patterns(case_for(self.seed, index, HINTS)):
                seen[name][result.outcome] += 1
        lines = []
        for name, counts in sorted(seen.items()):
            total = sum(counts.values())
            failed = sum(counts[o] for o in FAILURES)
            parts = " ".join(f"{o}={counts[o]}" for o in OUTCOMES if counts[o])
            lines.append(f"{name}: cases={total} failed={failed} ({100 * failed / total:.0f}%) {parts}")
        return "\n".join(lines)
