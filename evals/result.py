"""``EvalResult``: one architecture's eval result as a Python object (what ``pipeline.eval`` returns).

It wraps the result dict every eval door produces (``evals.benchmarks.evaluate`` / ``Tally.result``): the
figures are the same numbers ``synthex eval <benchmark> --json`` prints, not recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.scorecard import Scorecard, ScoreEntry

LEVELS = ("turn", "session")


@dataclass(frozen=True)
class EvalResult:
    """``benchmark``, ``branch`` and ``architecture`` it scored; ``turn`` / ``session``: mean metrics
    (recall_any@k, recall_all@k, ndcg_any@k, mrr); ``by_category``: the means per question category (at the
    benchmark's category level); ``questions``: one row per question (hits, gold, metrics); ``protocol``:
    for each figure group (``turn``, ``session``, ``by_category``), how it was produced; ``scorecard``: the
    design's §9.5 figures (``evals.scorecard.Scorecard``: each with its target, whether it is met, its state and
    its own protocol; empty for a peer's result); ``eval_run_id``: its rows in the ``eval_results`` table."""

    benchmark: str
    branch: str
    architecture: str
    pipeline: str
    data: str
    n_questions: int
    turn: dict[str, float]
    session: dict[str, float]
    by_category: dict[str, dict[str, float]]
    questions: list[dict[str, Any]]
    protocol: dict[str, str]
    eval_run_id: str | None = None
    scorecard: Scorecard = field(default_factory=Scorecard)
    extra: dict[str, Any] = field(default_factory=dict)  # the benchmark's other fields (qa, wall_s, ...)

    @classmethod
    def from_result(cls, result: dict[str, Any], questions: list[dict[str, Any]], protocol: dict[str, str]
                    ) -> EvalResult:
        """From one result dict of ``evaluate`` (its ``questions`` taken out before it was recorded)."""
        known = {"benchmark", "branch", "architecture", "pipeline", "data", "n_questions", "metrics",
                 "by_category", "questions", "eval_run_id", "scorecard"}
        return cls(benchmark=result["benchmark"], branch=result.get("branch", "main"),
                   architecture=result["architecture"], pipeline=result.get("pipeline", ""),
                   data=str(result.get("data", "")), n_questions=result["n_questions"],
                   turn=dict(result["metrics"].get("turn", {})), session=dict(result["metrics"].get("session", {})),
                   by_category={c: dict(v) for c, v in result["by_category"].items()}, questions=list(questions),
                   protocol=dict(protocol), eval_run_id=result.get("eval_run_id"),
                   scorecard=Scorecard.from_dict(result.get("scorecard")),
                   extra={k: v for k, v in result.items() if k not in known})

    @property
    def label(self) -> str:
        return self.branch if self.architecture == self.branch else f"{self.architecture} ({self.branch})"

    def metrics(self, level: str) -> dict[str, float]:
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r}; levels: {', '.join(LEVELS)}")
        return self.turn if level == "turn" else self.session

    def compare(self, other: EvalResult, metrics: tuple[str, ...] | None = None) -> str:
        """A markdown table: level, metric, this result, ``other``, delta (this minus other), turn level then
        session level, then the scorecard (``level`` "scorecard": each figure's value, or its state when it
        was not measured); ``metrics``: the rows of the turn and session levels (default: every metric either
        result has)."""
        from evals.report import HEADLINE

        if other.benchmark != self.benchmark:
            raise ValueError(f"cannot compare a {self.benchmark!r} result with a {other.benchmark!r} one")
        rows = [f"| level | metric | {self.label} | {other.label} | delta |", "|---|---|---:|---:|---:|"]
        for level in LEVELS:
            mine, theirs = self.metrics(level), other.metrics(level)
            names = metrics or tuple(m for m in HEADLINE if m in mine or m in theirs)
            for name in names:
                a, b = mine.get(name), theirs.get(name)
                delta = f"{a - b:+.4f}" if a is not None and b is not None else "n/a"
                rows.append(f"| {level} | {name} | {_fmt(a)} | {_fmt(b)} | {delta} |")
        for name in dict.fromkeys([*self.scorecard.names(), *other.scorecard.names()]):
            a_entry = self.scorecard[name] if name in self.scorecard else None
            b_entry = other.scorecard[name] if name in other.scorecard else None
            a, b = (e.value if e is not None else None for e in (a_entry, b_entry))
            delta = f"{a - b:+.4f}" if a is not None and b is not None else "n/a"
            rows.append(f"| scorecard | {name} | {_card_cell(a_entry)} | {_card_cell(b_entry)} | {delta} |")
        return "\n".join(rows)

    def compare_chart(self, other: EvalResult, path: str | Path) -> Path:
        """Grouped bars of both results (the same chart as ``synthex eval --compare``), written as a PNG."""
        from evals.report import chart

        return chart([self._as_report_row(), other._as_report_row()], Path(path))

    def _as_report_row(self) -> dict[str, Any]:
        return {"architecture": self.label, "benchmark": self.benchmark, "n_questions": self.n_questions,
                "metrics": {"turn": self.turn, "session": self.session}, "by_category": self.by_category}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields of ``synthex eval --json``'s result, plus ``questions`` and ``protocol``."""
        return {"benchmark": self.benchmark, "pipeline": self.pipeline, "architecture": self.architecture,
                "branch": self.branch, "data": self.data, "n_questions": self.n_questions,
                "metrics": {"turn": dict(self.turn), "session": dict(self.session)},
                "by_category": {c: dict(v) for c, v in self.by_category.items()}, "eval_run_id": self.eval_run_id,
                "protocol": dict(self.protocol), "scorecard": self.scorecard.to_dict(),
                "questions": list(self.questions), **self.extra}


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _card_cell(entry: ScoreEntry | None) -> str:
    return "n/a" if entry is None else entry.cell()
