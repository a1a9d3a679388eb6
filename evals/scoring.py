"""Per-question metric rows for one architecture, and the result fields every eval reports.

``Tally.result`` carries, besides the means, one row per question under ``questions`` (id, text,
category, ranked hits, gold, and the metrics at turn and session level, with the fraction of the gold
found in the top k as ``recall@k``). The eval commands and the eval asset take that list out of the
result and write it to the project's ``eval_results`` DuckDB table (``evals/report.py``).
"""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

from evals.metrics import mean, score

RECALL_KS = (1, 3, 5, 10)


def recall_at(ranked: Sequence[str], gold: Set[str], k: int) -> float:
    """The share of the gold items found in the top k (recall@k in its textbook sense)."""
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def with_recall(scores: dict[str, float], ranked: Sequence[str], gold: Set[str]) -> dict[str, float]:
    """One question's metrics at one level: ``metrics.score``'s plus ``recall@k`` (per question only)."""
    return scores | {f"recall@{k}": recall_at(ranked, gold, k) for k in RECALL_KS}


@dataclass(frozen=True)
class QuestionScore:
    """One question's ranked turn and session ids and its metrics at each level (``metrics.score``)."""

    turns: list[str]
    sessions: list[str]
    turn: dict[str, float] | None  # None: the question has no gold turns (scored at session level only)
    session: dict[str, float]
    # A benchmark's own per-question figures (LongMemEval: freshness of a knowledge-update question);
    # None: none for this question.
    extra: dict[str, float] | None = None


class Tally:
    """Collects turn and session scores; ``by_category`` groups the ``category_level`` rows."""

    def __init__(self, category_level: str = "turn") -> None:
        self.category_level = category_level
        self.turn: list[dict[str, float]] = []
        self.session: list[dict[str, float]] = []
        self.by_category: dict[str, list[dict[str, float]]] = defaultdict(list)
        self.questions: list[dict[str, Any]] = []  # one row per question: see ``add``
        self.started = time.perf_counter()

    def add(self, turns: Sequence[str], gold_turns: Set[str], sessions: Sequence[str], gold_sessions: Set[str],
            category: str, *, question_id: str | None = None, question: str = "") -> None:
        """A question without gold turns (LongMemEval abstention-style sessions) adds a session row only.

        ``question_id`` defaults to the question's position in this tally (``#1``, ``#2``...), the same
        for every architecture scored on the same data.
        """
        scored = QuestionScore(list(turns), list(sessions), score(turns, gold_turns) if gold_turns else None,
                               score(sessions, gold_sessions))
        self.record(scored, gold_turns, gold_sessions, category, question_id=question_id, question=question)

    def record(self, scored: QuestionScore, gold_turns: Set[str], gold_sessions: Set[str], category: str, *,
               question_id: str | None = None, question: str = "") -> None:
        """One question scored already (``Benchmark.score``): its rows, by category, and its eval_results row."""
        rows = {"session": scored.session} | ({"turn": scored.turn} if scored.turn is not None else {})
        if scored.turn is not None:
            self.turn.append(scored.turn)
        self.session.append(scored.session)
        if self.category_level in rows:
            self.by_category[category].append(rows[self.category_level])
        self.questions.append({
            "question_id": question_id or f"#{len(self.questions) + 1}", "question": question, "category": category,
            "hits": list(scored.turns), "gold_turns": sorted(gold_turns), "gold_sessions": sorted(gold_sessions),
            "turn": with_recall(scored.turn, scored.turns, gold_turns) if scored.turn is not None else None,
            "session": with_recall(scored.session, scored.sessions, gold_sessions)})

    def result(self, **head: Any) -> dict[str, Any]:
        return head | {
            "n_questions": len(self.session),
            "metrics": {"turn": mean(self.turn), "session": mean(self.session)},
            "by_category": {c: mean(v) | {"n": len(v)} for c, v in sorted(self.by_category.items())},
            "wall_s": round(time.perf_counter() - self.started, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "questions": self.questions,
        }
