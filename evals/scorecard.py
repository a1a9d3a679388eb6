"""The design's scorecard (design doc §9.5) on an eval result: precision@5, temporal accuracy, memory
freshness, provenance completeness, incremental speedup, each against its target and with the protocol that
produced it.

A figure the benchmark cannot give is an explicit entry (``ScoreState.NOT_MEASURABLE``: LoCoMo has no
knowledge-update questions), and one this eval did not measure says why (``ScoreState.NOT_MEASURED``: the
workspaces were ingested by an earlier eval, so there was no first run to time). ``ScorecardCollector`` is fed
by ``evals.benchmarks.evaluate`` as it searches and scores, so every door (``synthex eval``,
``pipeline.eval``, the Dagster eval asset) reports the same figures from the same hits.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from evals.scoring import QuestionScore


class ScoredBenchmark(Protocol):
    """What the scorecard reads of a benchmark (``evals.benchmarks.Benchmark``; a protocol here, since the
    benchmarks module imports this one)."""

    title: str
    category_level: str
    temporal_categories: tuple[str, ...]
    knowledge_update_categories: tuple[str, ...]


class AskedQuestion(Protocol):
    """What the scorecard reads of a question (``evals.benchmarks.BenchmarkQuestion``)."""

    gold_turns: frozenset[str]
    gold_sessions: frozenset[str]
    category: str

PRECISION_K = 5


class ScoreState(StrEnum):
    """Whether a scorecard figure has a value, and if not, why not."""

    MEASURED = "measured"
    NOT_MEASURABLE = "not measurable"  # the benchmark has nothing to measure it on
    NOT_MEASURED = "not measured"  # measurable, but this eval did not (the protocol says why)


class Comparison(StrEnum):
    """How a figure is held against its target (§9.5 writes ``> 0.80``, ``< 0.1x``, ``100 %``)."""

    ABOVE = ">"
    AT_LEAST = ">="
    BELOW = "<"

    def holds(self, value: float, target: float) -> bool:
        ops: dict[Comparison, Callable[[float, float], bool]] = {
            Comparison.ABOVE: operator.gt, Comparison.AT_LEAST: operator.ge, Comparison.BELOW: operator.lt}
        return ops[self](value, target)


@dataclass(frozen=True)
class ScoreEntry:
    """One figure of the scorecard: ``value`` (None unless measured), its target, whether it is met (None
    unless measured), how it was produced (``protocol``) and over how many items (``n``)."""

    name: str
    value: float | None
    target: float
    comparison: Comparison
    state: ScoreState
    protocol: str
    n: int = 0

    @property
    def met(self) -> bool | None:
        if self.state is not ScoreState.MEASURED or self.value is None:
            return None
        return self.comparison.holds(self.value, self.target)

    @property
    def target_text(self) -> str:
        return f"{self.comparison.value} {self.target:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "target": self.target, "comparison": self.comparison.value,
                "met": self.met, "state": self.state.value, "protocol": self.protocol, "n": self.n}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ScoreEntry:
        return cls(name=raw["name"], value=raw.get("value"), target=float(raw["target"]),
                   comparison=Comparison(raw["comparison"]), state=ScoreState(raw["state"]),
                   protocol=str(raw.get("protocol", "")), n=int(raw.get("n", 0)))

    def cell(self) -> str:
        """The figure as a table cell: the value and whether it meets the target, or the state."""
        if self.state is not ScoreState.MEASURED or self.value is None:
            return self.state.value
        return f"{self.value:.4f} ({'met' if self.met else 'not met'})"


# The names, in §9.5's order, and their targets.
PRECISION = "precision@5"
TEMPORAL = "temporal_accuracy"
FRESHNESS = "freshness"
PROVENANCE = "provenance_completeness"
SPEEDUP = "incremental_speedup"
TARGETS: dict[str, tuple[float, Comparison]] = {
    PRECISION: (0.80, Comparison.ABOVE), TEMPORAL: (0.75, Comparison.ABOVE), FRESHNESS: (0.70, Comparison.ABOVE),
    PROVENANCE: (1.0, Comparison.AT_LEAST), SPEEDUP: (0.1, Comparison.BELOW)}


@dataclass(frozen=True)
class Scorecard:
    """The five §9.5 figures of one result, always all five (an unmeasured one says so)."""

    entries: tuple[ScoreEntry, ...] = ()

    def __getitem__(self, name: str) -> ScoreEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise KeyError(f"no scorecard figure {name!r}; figures: {', '.join(e.name for e in self.entries)}")

    def __contains__(self, name: object) -> bool:
        return any(entry.name == name for entry in self.entries)

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries]

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{name: {name, value, target, comparison, met, state, protocol, n}}`` in §9.5's order."""
        return {entry.name: entry.to_dict() for entry in self.entries}

    @classmethod
    def from_dict(cls, raw: dict[str, dict[str, Any]] | None) -> Scorecard:
        return cls(tuple(ScoreEntry.from_dict(v) for v in (raw or {}).values()))


def precision_at(ranked: Sequence[str], gold: Set[str], k: int = PRECISION_K) -> float:
    """Precision@k of one question: the number of gold items among the first ``k`` ranked ids, divided by
    ``k`` (always ``k``, even when fewer than ``k`` ids were ranked: a short list is not rewarded)."""
    return len(gold & set(ranked[:k])) / k


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


@dataclass
class ProvenanceCheck:
    """Whether records have a source path to a leaf, in one workspace: every source id resolves in the store
    (``Record.sources``, in the record's own branch scope) and every path ends in a record of a source step
    (``source_steps``). Memoized: each record's sources are read once."""

    source_steps: frozenset[str]
    known: dict[str, bool] = field(default_factory=dict)

    def complete(self, record: Any) -> bool:
        if record.id not in self.known:
            self.known[record.id] = False  # a cycle is not a path to a leaf
            self.known[record.id] = self._walk(record)
        return self.known[record.id]

    def _walk(self, record: Any) -> bool:
        ids = list(dict.fromkeys(record.source_ids))
        if not ids:
            return record.step in self.source_steps
        found = record.sources()
        if {r.id for r in found} != set(ids):
            return False  # a dangling source id: the path stops before a leaf
        return all(self.complete(r) for r in found)


def source_steps_of(pipe: Any) -> frozenset[str]:
    """The source steps of a pipeline and of the definitions it branches from."""
    names: set[str] = set()
    node = pipe
    while node is not None:
        names |= set(node.sources())
        node = getattr(node, "parent", None)
    return frozenset(names)


@dataclass
class ScorecardCollector:
    """Fed by ``evaluate`` for one architecture: each scored question, each workspace's hits, the first
    conversation's run times; ``scorecard()`` then builds the entries."""

    benchmark: ScoredBenchmark
    k: int
    scored: list[tuple[AskedQuestion, QuestionScore]] = field(default_factory=list)
    hits_checked: int = 0
    hits_complete: int = 0
    first_run_s: float | None = None
    rerun_s: float | None = None
    speedup_reason: str = "no conversation was evaluated"

    def record(self, question: AskedQuestion, scored: QuestionScore) -> None:
        self.scored.append((question, scored))

    def check_provenance(self, check: ProvenanceCheck, hits: Iterable[Any]) -> None:
        """Count each distinct hit of a workspace once (``check`` is that workspace's)."""
        for hit in hits:
            if hit.id in check.known:
                continue
            self.hits_checked += 1
            self.hits_complete += check.complete(hit)

    def scorecard(self) -> Scorecard:
        return Scorecard((self._precision(), self._temporal(), self._freshness(), self._provenance(),
                          self._speedup()))

    def _entry(self, name: str, value: float | None, protocol: str, n: int,
               state: ScoreState | None = None) -> ScoreEntry:
        target, comparison = TARGETS[name]
        state = state or (ScoreState.MEASURED if value is not None else ScoreState.NOT_MEASURED)
        return ScoreEntry(name, value, target, comparison, state, protocol, n)

    def _precision(self) -> ScoreEntry:
        with_gold = [(q, s) for q, s in self.scored if q.gold_turns]
        values = [precision_at(s.turns, q.gold_turns) for q, s in with_gold]
        ceiling = _mean([min(len(q.gold_turns), PRECISION_K) / PRECISION_K for q, _ in with_gold])
        protocol = (f"turn level: for each question with gold turns, the gold turns among the first {PRECISION_K} "
                    f"ranked turns (hits drilled down to their leaves) divided by {PRECISION_K}; mean over those "
                    f"questions. A question with g < {PRECISION_K} gold turns scores at most g/{PRECISION_K}"
                    + (f": the ceiling on this data is {ceiling:.4f}" if ceiling is not None else ""))
        if not with_gold:
            return self._entry(PRECISION, None, protocol + "; no question has gold turns", 0)
        return self._entry(PRECISION, _mean(values), protocol, len(values))

    def _temporal(self) -> ScoreEntry:
        categories = self.benchmark.temporal_categories
        level = self.benchmark.category_level
        protocol = (f"{level} level: the fraction of the questions of category {', '.join(map(repr, categories))} "
                    f"whose gold {level}s are all in the top {self.k} ({level} recall_all@{self.k})")
        if not categories:
            return self._entry(TEMPORAL, None, f"{self.benchmark.title} has no temporal question category", 0,
                               ScoreState.NOT_MEASURABLE)
        values = []
        for question, scored in self.scored:
            if question.category not in categories:
                continue
            ranked, gold = ((scored.turns, question.gold_turns) if level == "turn"
                            else (scored.sessions, question.gold_sessions))
            if gold:
                values.append(float(set(gold) <= set(ranked[: self.k])))
        if not values:
            return self._entry(TEMPORAL, None, protocol + "; no such question in this data", 0)
        return self._entry(TEMPORAL, _mean(values), protocol, len(values))

    def _freshness(self) -> ScoreEntry:
        if not self.benchmark.knowledge_update_categories:
            return self._entry(FRESHNESS, None, f"{self.benchmark.title} has no knowledge-update questions", 0,
                               ScoreState.NOT_MEASURABLE)
        fresh = [value for q, s in self.scored if q.category in self.benchmark.knowledge_update_categories
                 for name, value in (s.extra or {}).items() if name.startswith("fresh@")]
        names = sorted({n for _, s in self.scored for n in (s.extra or {}) if n.startswith("fresh@")}) or ["fresh@k"]
        protocol = (f"session level, knowledge-update questions: {names[0]} is 1 when the latest evidence session "
                    f"is in the top k sessions and ranked above every older evidence session (design doc §9.2); "
                    f"mean over those questions")
        if not fresh:
            return self._entry(FRESHNESS, None, protocol + "; no knowledge-update question in this data", 0)
        return self._entry(FRESHNESS, _mean(fresh), protocol, len(fresh))

    def _provenance(self) -> ScoreEntry:
        protocol = (f"every distinct record among the top {self.k} search hits of each workspace: complete when "
                    "each of its source ids resolves in the store and every path ends in a record of a source step; "
                    "the fraction complete")
        if not self.hits_checked:
            return self._entry(PROVENANCE, None, protocol + "; no hit to check", 0)
        return self._entry(PROVENANCE, round(self.hits_complete / self.hits_checked, 4), protocol, self.hits_checked)

    def _speedup(self) -> ScoreEntry:
        protocol = ("the first conversation's pipeline: time of a re-run with nothing changed divided by the time "
                    "of its first run in a fresh workspace (runs only: opening the store is not timed)")
        if self.first_run_s is None or self.rerun_s is None or self.first_run_s <= 0:
            return self._entry(SPEEDUP, None, f"{protocol}; not measured: {self.speedup_reason}", 0)
        return self._entry(SPEEDUP, round(self.rerun_s / self.first_run_s, 4),
                           f"{protocol} ({self.rerun_s:.2f} s / {self.first_run_s:.2f} s)", 1)


def scorecard_table(labels: Sequence[str], cards: Sequence[Scorecard]) -> str:
    """Markdown: one row per figure, its target, one column per result."""
    names = list(dict.fromkeys(n for card in cards for n in card.names()))
    rows = ["| figure | target | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for name in names:
        target, comparison = TARGETS.get(name, (0.0, Comparison.ABOVE))
        cells = [card[name].cell() if name in card else "n/a" for card in cards]
        rows.append(f"| {name} | {comparison.value} {target:g} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
