"""The StepContext steps see: reads go to the record store, model calls to the LLM resource."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from synthex.core.llm import Completer
from synthex.core.progress import NullProgress, ProgressReporter
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore


@dataclass
class StoreStepContext:
    store: RecordStore
    scope: BranchScope  # the branch this step writes, and which branch serves each step it reads
    period: str
    run_id: str
    completer: Completer | None
    step: str = ""
    reporter: ProgressReporter = field(default_factory=NullProgress)

    @property
    def branch(self) -> str:
        return self.scope.branch

    def upstream(self, step: str) -> list[Record]:
        return self.store.records.list(self.scope, step=step, period=self.period)

    def previous_state(self, step: str) -> Record | None:
        return self.store.records.previous_state(self.scope, step, self.period)

    def progress(self, n: int) -> None:
        self.reporter.advance(self.step, n)


@dataclass
class SnapshotContext:
    """Planning context over one in-memory snapshot of a branch (one scan instead of one per partition)."""

    index: dict[tuple[str, str], list[Record]]  # (step, period) -> records, in store order
    branch: str
    period: str = ""
    run_id: str = "plan"
    completer: Completer | None = None
    every_period: bool = False  # upstream() reads every period (a step whose records span them)

    @classmethod
    def of(cls, records: list[Record], branch: str) -> SnapshotContext:
        index: dict[tuple[str, str], list[Record]] = defaultdict(list)
        for rec in records:
            index[(rec.step, rec.period)].append(rec)
        return cls(dict(index), branch)

    def at(self, period: str) -> SnapshotContext:
        return replace(self, period=period, every_period=False)

    def spanning(self, period: str) -> SnapshotContext:
        """The context of partition ``period`` of a step that reads its inputs of every period."""
        return replace(self, period=period, every_period=True)

    def ids(self, step: str, period: str) -> set[str]:
        return {r.id for r in self.index.get((step, period), [])}

    def periods(self) -> set[str]:
        return {p for (_, p) in self.index}

    def upstream(self, step: str) -> list[Record]:
        if self.every_period:
            return [r for (s, p) in sorted(self.index) if s == step for r in self.index[(s, p)]]
        return self.index.get((step, self.period), [])

    def previous_state(self, step: str) -> Record | None:
        earlier = [(p, recs) for (s, p), recs in self.index.items() if s == step and p < self.period and recs]
        if not earlier:
            return None
        return max(max(earlier, key=lambda e: e[0])[1], key=lambda r: r.id)

    def progress(self, n: int) -> None:
        pass
