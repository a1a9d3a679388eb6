"""Step kinds as plain functions, over an in-memory context (no Dagster, no store)."""

from dataclasses import dataclass, field

from synthex.core.llm import OfflineExtractiveCompleter
from synthex.core.record import Record
from synthex.core.steps import AggregateStep, FoldStep, MergeStep, TransformStep, execute_partition


@dataclass
class MemoryContext:
    upstream_records: dict[str, list[Record]]
    branch: str = "main"
    period: str = "2024-01"
    run_id: str = "r"
    completer: object = field(default_factory=OfflineExtractiveCompleter)
    state: Record | None = None

    def upstream(self, step):
        return self.upstream_records.get(step, [])

    def previous_state(self, step):
        return self.state

    def progress(self, n):
        pass


def rec(i, content, ts, step="src"):
    return Record(id=f"id-{i}", content=content, step=step, metadata={"time": {"created_at": ts}}, period=ts[:7])


def test_transform_is_one_to_one_with_sources():
    inputs = [rec(1, "alpha text here", "2024-01-02T00:00:00Z"), rec(2, "alpha text here", "2024-01-03T00:00:00Z")]
    step = TransformStep(name="t", from_=["src"], fn=lambda r: r.content.upper())
    result = execute_partition(step, MemoryContext({"src": inputs}), set())
    assert [r.source_ids for r in result.new_records] == [["id-1"], ["id-2"]]
    assert len({r.id for r in result.new_records}) == 2  # same content, still 1:1
    again = execute_partition(step, MemoryContext({"src": inputs}), set())
    assert [r.id for r in again.new_records] == [r.id for r in result.new_records]  # deterministic ids
    skipped = execute_partition(step, MemoryContext({"src": inputs}), result.keep_ids)
    assert skipped.new_records == [] and skipped.stats.skipped == 2


def test_aggregate_groups_by_week_inside_the_month():
    inputs = [rec(1, "one", "2024-01-01T09:00:00Z"), rec(2, "two", "2024-01-03T09:00:00Z"),
              rec(3, "three", "2024-01-10T09:00:00Z")]
    step = AggregateStep(name="weekly", from_=["src"], period="week",
                         prompt=lambda records, period: " ".join(r.content for r in records) + f" in {period}.")
    result = execute_partition(step, MemoryContext({"src": inputs}), set())
    groups = {r.meta("time.period"): r.source_ids for r in result.new_records}
    assert groups == {"2024-W01/2024-01": ["id-1", "id-2"], "2024-W02/2024-01": ["id-3"]}


def test_fold_passes_previous_state_in_order():
    seen = []

    def prompt(record, state):
        seen.append((record.content, state))
        return f"STATE AFTER {record.content} building on {state or 'nothing'}."

    prev = Record(id="prev", content="older knowledge", step="wm", metadata={"step": {"sequence": 4}})
    inputs = [rec(2, "b", "2024-01-09T00:00:00Z"), rec(1, "a", "2024-01-02T00:00:00Z")]
    step = FoldStep(name="wm", from_=["src"], prompt=prompt)
    ctx = MemoryContext({"src": inputs}, state=prev)
    [out] = execute_partition(step, ctx, set()).new_records
    assert [s[0] for s in seen] == ["a", "b"]
    assert seen[0][1] == "older knowledge"
    assert out.meta("step.sequence") == 5 and out.source_ids == ["id-1", "id-2", "prev"]
    # a different previous state is a different materialization key
    ctx2 = MemoryContext({"src": inputs}, state=Record(id="other", content="x", step="wm"))
    assert step.work(ctx2)[0].key != step.work(ctx)[0].key


def test_merge_drops_exact_duplicates():
    a = [rec(1, "same words", "2024-01-01T00:00:00Z", "a"), rec(2, "only in a", "2024-01-02T00:00:00Z", "a")]
    b = [rec(3, "same words", "2024-01-01T05:00:00Z", "b")]
    step = MergeStep(name="m", from_=["a", "b"])
    out = execute_partition(step, MemoryContext({"a": a, "b": b}), set()).new_records
    assert sorted(r.content for r in out) == ["only in a", "same words"]
    merged = next(r for r in out if r.content == "same words")
    assert merged.source_ids == ["id-1", "id-3"]
