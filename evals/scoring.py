"""Per-question metric rows for one architecture, and the result fields every eval reports."""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from evals.metrics import mean, score


class Tally:
    """Collects turn and session scores; ``by_category`` groups the ``category_level`` rows."""

    def __init__(self, category_level: str = "turn") -> None:
        self.category_level = category_level
        self.turn: list[dict[str, float]] = []
        self.session: list[dict[str, float]] = []
        self.by_category: dict[str, list[dict[str, float]]] = defaultdict(list)
        self.started = time.perf_counter()

    def add(self, turns: Sequence[str], gold_turns: set[str], sessions: Sequence[str], gold_sessions: set[str],
            category: str) -> None:
        """A question without gold turns (LongMemEval abstention-style sessions) adds a session row only."""
        rows = {"session": score(sessions, gold_sessions)}
        if gold_turns:
            rows["turn"] = score(turns, gold_turns)
            self.turn.append(rows["turn"])
        self.session.append(rows["session"])
        if self.category_level in rows:
            self.by_category[category].append(rows[self.category_level])

    def result(self, **head: Any) -> dict[str, Any]:
        return head | {
            "n_questions": len(self.session),
            "metrics": {"turn": mean(self.turn), "session": mean(self.session)},
            "by_category": {c: mean(v) | {"n": len(v)} for c, v in sorted(self.by_category.items())},
            "wall_s": round(time.perf_counter() - self.started, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
