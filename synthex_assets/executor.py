"""Executing one step over the (branch, period) partitions a run selected.

Plain Python (the step asset wraps it): partitions go branch by branch, periods in chronological
order. Upstream records are read once per chunk of periods and each chunk is written in one commit
(new rows upserted, superseded rows deleted: readers never see a half-written partition), except for a step
whose periods are sequential (a fold), which writes every period before the next one reads it as its
previous state. After writing: the three asset checks' outcomes (``CheckOutcome``), the FTS index
folded once, and the due projection hooks of this step delivered (synthex_resources.hook_deliveries).
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import StepError, SynthexError
from synthex.core.periods import now_iso
from synthex.core.progress import ProgressReporter
from synthex.core.purges import PurgeLedger
from synthex.core.record import CheckOutcome, Record, RunStats
from synthex.core.scope import BranchScope
from synthex.core.steps import Step, execute_partition
from synthex_assets.checks import CHECKS, HOOKS, PROVENANCE, RECORDS_PLANNED, UP_TO_DATE
from synthex_resources.branch_lock import BranchLock, held_by_run
from synthex_resources.hook_deliveries import HookDeliveries
from synthex_resources.llm import LLMConfig
from synthex_resources.planner import PlanReason, compute_partition_plan
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.step_context import StoreStepContext
from synthex_resources.store.fragment_append import IngestWorkers
from synthex_resources.store.vectors import EmbedAhead

PERIODS_PER_CHUNK = 12  # bounds the upstream records held in memory at once


@dataclass
class PartitionOutcome:
    branch: str
    period: str
    stats: RunStats
    new_records: list[Record]
    keep_ids: set[str]
    removed: int = 0

    @property
    def total(self) -> int:
        return len(self.keep_ids)


@dataclass
class StepResult:
    outcomes: list[PartitionOutcome] = field(default_factory=list)
    checks: dict[str, CheckOutcome] = field(default_factory=dict)  # check name -> its outcome
    index: dict[str, object] = field(default_factory=dict)
    hooks_fired: list[str] = field(default_factory=list)
    hook_error: str = ""
    served: dict[str, str] = field(default_factory=dict)  # branch -> the branch whose records serve this step

    @staticmethod
    def combine(results: list[StepResult]) -> StepResult:
        if len(results) == 1:
            return results[0]
        out = StepResult()
        for r in results:
            out.outcomes += r.outcomes
            out.hooks_fired += r.hooks_fired
            out.served.update(r.served)
            out.hook_error = "; ".join(e for e in (out.hook_error, r.hook_error) if e)
            out.index = r.index or out.index
            for name, outcome in r.checks.items():
                was = out.checks.get(name)
                out.checks[name] = outcome if was is None else CheckOutcome(
                    name, was.passed and outcome.passed, f"{was.detail}; {outcome.detail}",
                    partitions=(*was.partitions, *outcome.partitions))
        return out


class PrefetchedContext(StoreStepContext):
    """A step context whose upstream reads come from one query per chunk of periods."""

    def __init__(self, base: StoreStepContext, upstream_by_period: dict[tuple[str, str], list[Record]]) -> None:
        super().__init__(base.store, base.scope, base.period, base.run_id, base.completer, base.step, base.reporter)
        self._upstream = upstream_by_period

    def upstream(self, step: str) -> list[Record]:
        return self._upstream.get((step, self.period), [])


def group_partitions(partitions: list[tuple[str, str]]) -> dict[str, list[str]]:
    """branch -> its periods in chronological order (period keys sort chronologically)."""
    by_branch: dict[str, set[str]] = defaultdict(set)
    for branch, period in partitions:
        by_branch[branch].add(period)
    return {b: sorted(ps) for b, ps in sorted(by_branch.items())}


class StepExecutor:
    def __init__(self, pipeline: PipelineDefinition, step: Step, store: RecordStore, llm: LLMConfig,
                 reporter: ProgressReporter, run_id: str, full: bool = False,
                 workers: IngestWorkers | None = None) -> None:
        self.pipeline = pipeline
        self.step = step
        self.store = store
        self.llm = llm
        self.reporter = reporter
        self.run_id = run_id
        self.full = full
        # ``synthex run --workers N``: a chunk that is a first ingest is embedded and written by N processes
        # (``_run_chunk``); None or 1 worker: every chunk takes the one-process path.
        self.workers = workers or IngestWorkers()
        # Vectors are written now only for the steps a search surface names; any other step gets them
        # the first time a dense search targets it (docs/architecture.md, "Embedding").
        self.embed_at_write = step.name in pipeline.search_steps()
        # What `synthex purge` removed is never produced again (read once per step run).
        self.purged = PurgeLedger(pipeline.data_dir).load()

    def require_current_definition(self) -> None:
        """A code location (the UI) keeps the pipeline it loaded; after pipeline.py changes (an edit, a
        promote) running that old definition would treat current records as stale and delete them."""
        loaded = getattr(self.pipeline.root(), "source_file", None)
        if loaded is not None and loaded[0].exists() and loaded[0].stat().st_mtime_ns != loaded[1]:
            raise StepError(f"{loaded[0]} changed since this code location loaded it; reload the code "
                            f"location (UI: Deployment > Reload) and launch again")

    def run(self, partitions: list[tuple[str, str]]) -> StepResult:
        self.require_current_definition()
        by_branch = group_partitions(partitions)
        with ExitStack() as held:
            held.callback(self.workers.close)  # the run's ingest processes (if it started any) end with the step
            for branch in by_branch:  # a CLI run holds its branch already; a UI-launched run takes it here
                if not held_by_run(self.pipeline.data_dir, branch, self.run_id):
                    held.enter_context(BranchLock(self.pipeline.data_dir, branch, self.run_id).acquire())
            results = []
            for branch, periods in by_branch.items():
                # Each branch runs its own definition; a step it inherits is its parent's (nothing to do).
                definition = self.pipeline.for_branch(branch)
                scope = definition.scope()  # hashes every step's source: once per branch
                if not scope.owns(self.step.name):
                    note = f"branch {branch!r} reads step {self.step.name!r} through its parent (copy-on-write)"
                    results.append(StepResult(checks={c: CheckOutcome(c, True, note) for c in CHECKS},
                                              served={branch: scope.serves(self.step.name)}))
                    continue
                executor = StepExecutor(definition, definition.steps[self.step.name], self.store, self.llm,
                                        self.reporter, self.run_id, self.full, self.workers)
                results.append(executor._run(scope, periods))
            return StepResult.combine(results)

    def _run(self, scope: BranchScope, periods: list[str]) -> StepResult:
        completer = self.llm.get_completer(cache=self.store.llm_cache)
        result = StepResult()
        branch = scope.branch
        if self.step.sequential_periods:  # each period reads the one before: in order, one at a time
            self.require_fold_chain(branch, periods)
        chunk = 1 if self.step.sequential_periods else PERIODS_PER_CHUNK
        for start in range(0, len(periods), chunk):
            result.outcomes += self._run_chunk(scope, periods[start:start + chunk], completer)
        self.store.runs.record_step_stats(self.run_id, self.pipeline.name, self.step.name, now_iso(),
                                     [(o.branch, o.period, o.stats) for o in result.outcomes])
        if any(o.new_records or o.removed for o in result.outcomes):
            result.index = SearchEngine(self.store).ensure_index(optimize=True, stem=self.pipeline.lexical_stem)
        # The records are written: an undelivered hook is a failed check and stays pending, not a lost run.
        delivery = HookDeliveries(self.pipeline, self.store).deliver_due(step=self.step.name, branches=[branch])
        result.hooks_fired, result.hook_error = delivery.delivered, "; ".join(delivery.failed)
        result.checks = self._checks(result.outcomes)
        result.checks[HOOKS] = CheckOutcome(HOOKS, not result.hook_error, result.hook_error or
                                            f"delivered: {', '.join(result.hooks_fired) or 'none had to fire'}")
        return result

    def _run_chunk(self, scope: BranchScope, periods: list[str], completer: object) -> list[PartitionOutcome]:
        upstream: dict[tuple[str, str], list[Record]] = defaultdict(list)
        span = self.step.single_partition_period()
        if span is None:
            for rec in self.store.records.list_periods(scope, list(self.step.from_), periods):
                upstream[(rec.step, rec.period)].append(rec)
        elif span in periods:  # its one partition reads the inputs of every period; the others read none
            for rec in self.store.records.list(scope, steps=list(self.step.from_)):
                upstream[(rec.step, span)].append(rec)
        existing = self.store.records.partition_id_sets(scope, self.step.name, periods)
        # A first ingest of these partitions (nothing stored in them, so nothing to replace or delete) with
        # ingest workers: computed here, then embedded and written by the workers in one append, if none of
        # its ids is stored anywhere (``append_new``); any other chunk, or that one if an id is, the usual
        # way (one ``merge_insert``).
        spread = self.embed_at_write and self.workers.spread and not any(existing.values())
        if not self.embed_at_write or spread:
            outcomes = self._compute_chunk(scope, periods, upstream, existing, completer, None)
            started = time.monotonic()
        else:
            # Each partition's vectors are embedded while the next partition is computed (EmbedAhead).
            with EmbedAhead(self.store.vectors) as ahead:
                outcomes = self._compute_chunk(scope, periods, upstream, existing, completer, ahead)
                started = time.monotonic()
                ahead.wait()
        new = [r for o in outcomes for r in o.new_records]
        if spread and self.store.records.append_new(new, self.workers):
            removed = {o.period: 0 for o in outcomes}
        else:
            removed = self.store.records.write_partitions(
                scope, self.step.name, {o.period: (o.new_records, o.keep_ids) for o in outcomes},
                embed=self.embed_at_write)
        # The chunk's write (and the embedding still running when its computing ended) is shared among its
        # partitions by records written.
        write_s, written = time.monotonic() - started, sum(len(o.new_records) for o in outcomes)
        for o in outcomes:
            o.removed = removed[o.period]
            o.stats.duration += write_s * (len(o.new_records) / written if written else 1 / len(outcomes))
        return outcomes

    def _compute_chunk(self, scope: BranchScope, periods: list[str], upstream: dict[tuple[str, str], list[Record]],
                       existing: dict[str, set[str]], completer: object,
                       ahead: EmbedAhead | None) -> list[PartitionOutcome]:
        """Each period's partition computed in order; its new records handed to ``ahead`` to embed."""
        branch = scope.branch
        outcomes = []
        for period in periods:
            started = time.monotonic()
            base = StoreStepContext(self.store, scope, period, self.run_id, completer, step=self.step.name,
                                    reporter=self.reporter)
            try:
                part = execute_partition(self.step, PrefetchedContext(base, upstream), existing[period],
                                         full=self.full, reuse=self._held_elsewhere, purged=self.purged)
            except Exception as exc:
                # Counted where `synthex runs` reads it; the partition writes nothing and stays stale.
                self.store.runs.record_step_stats(self.run_id, self.pipeline.name, self.step.name, now_iso(),
                                             [(branch, period, RunStats(errors=1,
                                                                        duration=time.monotonic() - started))])
                named = isinstance(exc, StepError) and exc.step is not None
                if isinstance(exc, SynthexError) and not named:  # e.g. the LLM is down: say which step
                    raise StepError(f"step {self.step.name!r} {branch}|{period}: {exc}", step=self.step.name) from exc
                raise
            part.stats.duration = time.monotonic() - started
            outcomes.append(PartitionOutcome(branch, period, part.stats, part.new_records, part.keep_ids))
            if ahead is not None:
                ahead.submit(part.new_records)
        return outcomes

    def _held_elsewhere(self, ids: list[str]) -> dict[str, Record]:
        """Records another branch already computed (ids are content addresses): copied, not recomputed."""
        return {r.id: r for r in self.store.records.get_many(ids)}

    def require_fold_chain(self, branch: str, periods: list[str]) -> None:
        """A fold at P reads the state after the latest earlier period: refuse while a stale earlier
        period is not part of this run (before the first period, or a gap between the run's periods)."""
        plan = compute_partition_plan(self.pipeline, self.store, branch, self.pipeline.upstream(self.step.name))
        chosen = set(periods)
        stale = sorted(p for (s, p) in plan.work if s == self.step.name and p < periods[-1] and p not in chosen)
        if stale:
            first_after = min(p for p in periods if p > stale[0])
            raise StepError(
                f"step {self.step.name!r} {branch}|{first_after}: the fold's earlier period(s) "
                f"{', '.join(stale[:3])}{' ...' if len(stale) > 3 else ''} are stale and not in this run, so its "
                f"previous state is not final; materialize {branch}|{stale[0]} through {branch}|{periods[-1]} "
                f"in one run (or `synthex run --branch {branch}`)", step=self.step.name)

    def _checks(self, outcomes: list[PartitionOutcome]) -> dict[str, CheckOutcome]:
        new = [r for o in outcomes for r in o.new_records]
        referenced = {s for r in new for s in r.source_ids}
        found = set(self.store.records.rows_by_id(referenced, ["id"])) if referenced else set()
        dangling = sorted(referenced - found)
        missing = set(dangling)
        dangling_in = [f"{o.branch}|{o.period}" for o in outcomes
                       if any(s in missing for r in o.new_records for s in r.source_ids)]
        # A record the plan did not ask for (an id no work item has) is deleted as stale by the next run and
        # made again; one filed under another period is invisible to that period's readers.
        unplanned = [(o, r) for o in outcomes for r in o.new_records if r.id not in o.keep_ids or r.period != o.period]
        unplanned_in = list(dict.fromkeys(f"{o.branch}|{o.period}" for o, _ in unplanned))
        upstream = self.pipeline.upstream(self.step.name)
        stale = []
        stale_in: list[str] = []
        arrived = []
        for branch, periods in group_partitions([(o.branch, o.period) for o in outcomes]).items():
            # Only the run's periods are checked, so only they are planned (their records read).
            plan = compute_partition_plan(self.pipeline, self.store, branch, upstream, periods=periods)
            chosen = set(periods)
            # A source that gained items since this run planned (a stream line, a row, an API page)
            # makes its period dirty again: that is the next sync's work, not a failed run.
            new_data = {p for (s, p), w in plan.work.items()
                        if self.pipeline.steps[s].is_source and w.reason is PlanReason.NEW_INPUTS}
            for (s, p), w in sorted(plan.work.items()):
                if p in chosen:
                    (arrived if p in new_data else stale).append(f"{s} {branch}|{p} ({w.reason})")
                    if p not in new_data:
                        stale_in.append(f"{branch}|{p}")
        return {
            PROVENANCE: CheckOutcome(PROVENANCE, not dangling,
                                     f"{len(referenced)} source id(s) referenced by {len(new)} new record(s); "
                                     f"missing: {', '.join(dangling[:5]) or 'none'}", partitions=tuple(dangling_in)),
            RECORDS_PLANNED: CheckOutcome(
                RECORDS_PLANNED, not unplanned,
                f"{len(new)} new record(s) checked against their partitions' work items; unplanned or misfiled: "
                + (", ".join(f"{r.id[:16]} (period {r.period!r} in {o.branch}|{o.period})" for o, r in unplanned[:5])
                   or "none"), partitions=tuple(unplanned_in)),
            UP_TO_DATE: CheckOutcome(UP_TO_DATE, not stale,
                                     f"{len(outcomes)} partition(s) checked against the plan; stale: "
                                     f"{', '.join(stale[:5]) or 'none'}"
                                     + (f"; new source data arrived during the run (next sync): "
                                        f"{', '.join(arrived[:5])}" if arrived else ""),
                                     partitions=tuple(dict.fromkeys(stale_in))),
        }
