"""Counting outcomes (overall and per step kind) and showing failures."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from .run import FAILURES, OUTCOMES, Result


@dataclass
class Summary:
    results: dict[int, Result] = field(default_factory=dict)

    def add(self, index: int, result: Result) -> None:
        self.results[index] = result

    @property
    def counts(self) -> Counter:
        return Counter(r.outcome for r in self.results.values())

    @property
    def failures(self) -> int:
        return sum(self.counts[o] for o in FAILURES)

    @property
    def ran_share(self) -> float:
        """The share of programs that ran to the end (ok or mismatch): what the run measured."""
        counts = self.counts
        return (counts["ok"] + counts["mismatch"]) / max(1, len(self.results))

    def line(self) -> str:
        counts = self.counts
        text = f"programs={len(self.results)} " + " ".join(f"{o}={counts[o]}" for o in OUTCOMES)
        text += f" ran={100 * self.ran_share:.1f}%"
        if counts["skipped"]:
            text += f" skipped={counts['skipped']}"
        return text

    def by_step(self) -> str:
        """For each kind of step: in how many programs it was, and how they ended."""
        seen: dict[str, Counter] = defaultdict(Counter)
        for result in self.results.values():
            for step in set(result.steps):
                seen[step][result.outcome] += 1
        return "\n".join(
            f"{step}: " + " ".join(f"{o}={c[o]}" for o in OUTCOMES if c[o])
            for step, c in sorted(seen.items())
        )

    def refusals(self, limit: int = 10) -> str:
        """The most common refusal messages (first line, numbers kept), most frequent first."""
        reasons = Counter(
            r.detail.splitlines()[0][:160] for r in self.results.values() if r.outcome == "refused"
        )
        return "\n".join(f"{n} × {reason}" for reason, n in reasons.most_common(limit))

    def shown(self, per_class: int, outcomes=FAILURES) -> str:
        blocks = []
        for outcome in outcomes:
            chosen = [r for _, r in sorted(self.results.items()) if r.outcome == outcome][:per_class]
            blocks += [
                f"===== {outcome}: program {r.name} (at {r.stage or '?'})\n{r.source}\n----- {r.detail}\n"
                for r in chosen
            ]
        return "\n".join(blocks)

    def write_report(self, path: str) -> None:
        with open(path, "w") as file:
            for _, result in sorted(self.results.items()):
                if result.outcome != "ok":
                    file.write(json.dumps(asdict(result)) + "\n")
