"""ProjectApp: everything a user does with one pipeline's memory, over the layers below.

It owns what it opens (the record store with its caches, the Dagster instance) for its lifetime;
``close()`` releases them. Dagster is imported only when a run has work to do, LanceDB only when the
store is first touched, so commands that need neither start fast.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from synthex.core.definition import PipelineDefinition, Plan
from synthex.core.deletions import DeletionConsent, DeletionVerdict, enforce
from synthex.core.errors import BadInputError, PipelineDefinitionError, SynthexError
from synthex.core.naming import MAIN, check_branch_name
from synthex.core.periods import now_iso
from synthex.core.progress import NullProgress, ProgressReporter
from synthex.core.record import CheckName, CheckOutcome, Record, Run, RunStats, RunStatus
from synthex.core.redact import redact
from synthex.core.scope import BranchScope
from synthex.core.sources.base import LineReader, SetsAside
from synthex.core.sources.quarantine import Quarantine, QuarantinedLine

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from synthex.app.branches import Branches
    from synthex.app.purge import PurgeReport
    from synthex.core.purge_journal import PurgeEvent
    from synthex_resources.cdc_state import SourceChanges
    from synthex_resources.embedder import Embedder
    from synthex_resources.hook_deliveries import DeliveryReport, HookState
    from synthex_resources.record_store import RecordStore
    from synthex_resources.search.rerankers import Rerankers
    from synthex_resources.search.strategies.registry import StrategyRegistry
    from synthex_resources.search.types import SearchResults




@dataclass
class SyncReport:
    changes: list[SourceChanges]
    run: Run

    @property
    def quarantined(self) -> list[QuarantinedLine]:
        """Stream lines and notes set aside (malformed or undatable; each source's first ones), by source."""
        return [line for c in self.changes if c.quarantine for line in c.quarantine.lines]

    @property
    def waiting(self) -> list[str]:
        """Sources with whole lines beyond this sync's batch (``Limits.stream_batch_lines``): the next sync reads them."""
        return [c.source for c in self.changes if c.waiting]

    def to_dict(self) -> dict[str, Any]:
        return {"sources": [c.to_dict() for c in self.changes], "run": self.run.to_dict()}


class RememberStatus(StrEnum):
    """What became of a remembered line (the reply says it; nothing else is ever claimed)."""

    QUEUED = "queued for sync"  # a whole, valid line in the stream: the next sync brings it into memory


class RunEngine(StrEnum):
    """Who executes a run's dirty partitions. Both leave the same records (``synthex_assets.in_process``)."""

    DAGSTER = "dagster"  # one Dagster run of the pipeline's job, listed in the UI: every door's runs
    # The same step executors called in this process, no Dagster run or instance: for many small throwaway
    # memories (an eval's workspaces), whose cost would otherwise be mostly a Dagster instance and run each.
    IN_PROCESS = "in-process"


class ProjectApp:
    def __init__(self, pipeline: PipelineDefinition, embedder: Embedder | None = None,
                 rerankers: Rerankers | None = None) -> None:
        self.pipeline = pipeline
        self._embedder = embedder
        self._rerankers = rerankers  # None: the app's own, made on first use
        self._store: RecordStore | None = None
        self._instance: DagsterInstance | None = None
        # Runs this app is executing now (on any thread), by id: a server that must exit before one
        # ends records it as interrupted (``interrupt_runs``) instead of leaving it "running". Once
        # interrupted, the app starts no new run. Re-entrant: a signal handler on the main thread may
        # interrupt while that thread is inside a locked section.
        self._active_runs: dict[str, Run] = {}
        self._active_lock = threading.RLock()
        self._interrupted: str | None = None

    # -- what it owns ---------------------------------------------------------------------------
    @property
    def store(self) -> RecordStore:
        if self._store is None:
            from synthex_resources.record_store import open_store

            self._store = open_store(self.pipeline.store_uri, self._embedder)
        return self._store

    @property
    def instance(self) -> DagsterInstance:
        if self._instance is None:
            from synthex_assets.instance import open_instance

            self._instance = open_instance(self.pipeline)
        return self._instance

    def _has_instance(self) -> bool:
        """Whether the project's Dagster instance exists (its own, or the shared one SYNTHEX_DAGSTER_HOME
        names); asked without importing Dagster."""
        return self.pipeline.instance_home.exists()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._instance is not None:
            self._instance.dispose()
            self._instance = None

    def __enter__(self) -> ProjectApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plan and run ---------------------------------------------------------------------------
    def plan(self, step: str | None = None, from_: str | None = None, full: bool = False,
             branch: str | None = None) -> Plan:
        from synthex_resources.planner import plan_pipeline

        branch = self.use_branch(branch).branch_name
        return plan_pipeline(self.pipeline, branch=branch, step=step, from_=from_, full=full, store=self.store)

    def deletion_verdicts(self, branch: str | None = None) -> list[DeletionVerdict]:
        """The deletion guard's verdict on each source step the branch owns (``synthex.core.deletions``)."""
        from synthex_resources.source_sync import deletion_verdicts

        branch = self.use_branch(branch).branch_name
        return deletion_verdicts(self.pipeline, self.store, branch)

    def source_shrinkage(self, branch: str | None = None) -> list[DeletionVerdict]:
        """Source steps whose source now holds fewer items than the store has records of it, whether a
        run applies that (an explicit or small deletion) or holds it back (``held_back``)."""
        return [v for v in self.deletion_verdicts(branch) if v.lost]

    def held_back(self, branch: str | None = None) -> list[DeletionVerdict]:
        """Sources whose deletions a run (a sync, a sensor) holds back until they are allowed."""
        return [v for v in self.deletion_verdicts(branch) if v.held_back]

    def run(self, step: str | None = None, from_: str | None = None, full: bool = False, branch: str | None = None,
            progress: ProgressReporter | None = None, wait: bool = False,
            on_wait: Callable[[str], None] | None = None, allow_deletions: bool = False,
            verbose: bool = False, resume_purge: bool = True, say: Callable[[str], None] | None = None,
            track_changes: bool = True, engine: RunEngine = RunEngine.DAGSTER, workers: int | None = None) -> Run:
        """Plan, then one Dagster run of the pipeline's job over every dirty partition. The Synthex run
        id is the Dagster run id. When nothing changed there is no Dagster run and nothing is recorded.
        ``engine`` ``IN_PROCESS``: the same partitions executed here without a Dagster run (``RunEngine``).

        A purge that was killed before it finished is finished first (``resume_purge``; off for the
        purge's own re-runs); ``say`` is told about it. A completed run on main leaves the change-tracking
        (CDC) state of the sources it read current (``track_changes``; ``sync`` tracks them itself), so the
        next sensor tick finds nothing new. ``workers`` (1..cores): a first ingest's records are embedded
        and written by that many processes, committed once per chunk (store/fragment_append.py); the
        records are the ones one process writes. None: the pipeline's ``ingest_workers``, as many as this
        machine allows (``usable_declared_workers``; ``say`` is told when it is lowered)."""
        workers = self.ingest_workers_for(workers, say)
        definition = self.use_branch(branch)
        if definition.shared_toml is not None:  # where a run first uses a shared TOML's hooks and sources
            definition.shared_toml.check(definition)
        branch = definition.branch_name
        if resume_purge:
            self.finish_interrupted_purge(say=say)
        detect = (lambda: self._detect_source_changes(branch, step, from_)) if track_changes else list
        return self._tracked_run(step, from_, full, branch, progress, wait, on_wait, allow_deletions, verbose,
                                 detect, self._commit_source_changes, engine, workers)[0]

    def ingest_workers_for(self, workers: int | None, say: Callable[[str], None] | None = None) -> int:
        """A run's ingest workers: an explicit ``workers`` checked strictly (``check_ingest``); None, the
        pipeline's declared ``ingest_workers`` taken as a ceiling on this machine (``say`` is told when it is
        lowered: fewer cores, or an embedder no worker can rebuild)."""
        if workers is not None:
            self.check_ingest(workers)
            return workers
        declared = self.pipeline.ingest_workers
        if declared == 1:
            return 1
        from synthex_resources.store.fragment_append import usable_declared_workers

        usable, lowered = usable_declared_workers(declared, self.store.embedder)
        if lowered is not None and say is not None:
            say(f"warning: {lowered}")
        return usable

    def check_ingest(self, workers: int) -> None:
        """``run(workers=N)``: N is 1..cores and, above 1, the store's embedder can be rebuilt in a worker
        process (``for_worker``); else a one-line SynthexError, before anything runs."""
        if workers == 1 and type(workers) is int:
            return
        from synthex_resources.store.fragment_append import check_worker_embedder, check_workers

        check_worker_embedder(self.store.embedder, check_workers(workers))

    def _tracked_run(self, step: str | None, from_: str | None, full: bool, branch: str,
                     progress: ProgressReporter | None, wait: bool, on_wait: Callable[[str], None] | None,
                     allow_deletions: bool, verbose: bool, detect: Callable[[], list[SourceChanges]],
                     commit: Callable[[list[SourceChanges]], None],
                     engine: RunEngine = RunEngine.DAGSTER, workers: int = 1) -> tuple[Run, list[SourceChanges]]:
        """One run under the branch's lock, with what ``detect`` says the sources changed (detected once the
        lock is held, so a run or sync that waited for another counts only what that one did not take in)
        and ``commit``-ted once the run completed."""
        from synthex_resources.branch_lock import BranchLock

        run = Run(id=str(uuid.uuid4()), pipeline=self.pipeline.name, branch=branch,
                  steps=self.pipeline.select(step, from_), status=RunStatus.RUNNING, started_at=now_iso())
        # One writer per branch: detecting, planning and writing happen under the branch's lock.
        with BranchLock(self.pipeline.data_dir, branch, run.id).acquire(wait=wait, on_wait=on_wait):
            tracked = detect()
            # A suspicious shrink stops the run here, records untouched (synthex.core.deletions); the step ops
            # of the run launched below are told it was judged (or allowed) under this lock.
            enforce(self.deletion_verdicts(branch), allow_deletions)
            consent = DeletionConsent.ALLOWED if allow_deletions else DeletionConsent.GUARDED
            done = self._run_locked(run, step, from_, full, branch, progress, verbose, consent, engine, on_wait,
                                    workers)
            commit(tracked)
            return done, tracked

    def _detect_source_changes(self, branch: str, step: str | None, from_: str | None) -> list[SourceChanges]:
        """What the sources this run reads on main changed since their committed CDC state, detected before
        the run plans (a change after this is seen again by the next tick or sync: at least once). None on
        another branch: the CDC state is main's (the sensors plan every branch from it)."""
        if branch != MAIN:
            return []
        selected = set(self.pipeline.select(step, from_))
        sources = [s for s in self.pipeline.root().source_steps() if s in selected]
        if not sources:
            return []
        from synthex_resources.cdc_state import TokenSnapshot, open_cdc_state
        from synthex_resources.source_sync import detect_changes

        # Every source's token as stored: nothing changed, known without opening (importing) DuckDB.
        snapshot = TokenSnapshot.load(self.pipeline.data_dir)
        if snapshot is not None:
            unchanged = detect_changes(self.pipeline, snapshot, sources, pull=False)
            if all(c.token_unchanged for c in unchanged):
                return unchanged
        with open_cdc_state(self.pipeline.data_dir) as cdc:  # held for milliseconds, never during the run
            return detect_changes(self.pipeline, cdc, sources, pull=False)  # a run never calls an API

    def _commit_source_changes(self, changes: list[SourceChanges]) -> None:
        if not changes or all(c.token_unchanged for c in changes):
            return
        from synthex_resources.cdc_state import open_cdc_state
        from synthex_resources.source_sync import commit_changes

        with open_cdc_state(self.pipeline.data_dir) as cdc:
            commit_changes(self.pipeline, cdc, changes)

    def _run_locked(self, run: Run, step: str | None, from_: str | None, full: bool, branch: str,
                    progress: ProgressReporter | None, verbose: bool = False,
                    deletions: DeletionConsent = DeletionConsent.GUARDED,
                    engine: RunEngine = RunEngine.DAGSTER, on_wait: Callable[[str], None] | None = None,
                    workers: int = 1) -> Run:
        reporter = progress or NullProgress()
        started = time.monotonic()
        self._fail_abandoned_runs(branch, run.id)
        undelivered = self.deliver_hooks(branches=[branch]).failed  # left pending by an earlier run
        try:
            plan = self.plan(step=step, from_=from_, full=full, branch=branch)
        except BaseException as exc:  # a prompt can raise while planning (token estimates render it)
            self._record_failure(run, exc, started)
            raise
        reporter.start({s: plan.per_step.get(s, {}).get("records", 0) for s in self.pipeline.select(step, from_)})
        positions = self._source_positions(branch, step, from_)  # how far this run's plan read its streams
        if not plan.steps:
            # Nothing to do: no Dagster run and nothing written (so no LanceDB or Dagster import either).
            reporter.finish()
            run.steps, run.status, run.completed_at = [], RunStatus.COMPLETED, now_iso()
            run.wall_s = time.monotonic() - started
            self._commit_positions(positions)
            if undelivered:
                raise SynthexError("; ".join(undelivered))
            return run
        store = self.store
        run.steps = plan.steps
        if workers == 1 and set(plan.steps) & set(self.use_branch(branch).search_steps()):
            # Loads while Dagster imports and the run is created. Not with ingest workers: they embed a first
            # ingest, each with its own model, and this process loads one only if a chunk is embedded here.
            store.warm_embedder()
        with self._active_lock:
            if self._interrupted is not None:  # the process is stopping: a run started now could not finish
                reporter.finish()
                raise SynthexError(f"run not started: {self._interrupted}")
            store.runs.save(run)
            self._active_runs[run.id] = run
        try:
            if engine is RunEngine.IN_PROCESS:
                outcomes = self._execute_in_process(run.id, branch, plan, full, reporter, deletions, workers)
            else:
                run.dagster_run_ids = [run.id]
                outcomes = self._launch(run.id, branch, plan, full, reporter, verbose, deletions, on_wait, workers)
            failed = [o for o in outcomes if not o.passed]
            messages = [str(o) for o in failed]
            if undelivered and not any(o.check == CheckName.HOOKS for o in failed):
                # Retried at the start; a step op of this run may have delivered it since.
                messages += [f"{s.output}@{s.branch}: on_update hook still undelivered: {s.last_error}"
                             for s in self.hooks_due(branches=[branch]) if s.last_error]
            if messages:  # the records are written; what failed is named (e.g. an undelivered hook)
                raise SynthexError("run finished with failed checks: " + "; ".join(messages))
            run.status = RunStatus.COMPLETED
            self._commit_positions(positions)
        except BaseException as exc:
            run.status, run.error = RunStatus.FAILED, redact(str(exc) or type(exc).__name__)
            raise
        finally:
            reporter.finish()
            run.step_stats = store.runs.step_stats(run.id)
            run.stats = RunStats()
            for stats in run.step_stats.values():
                run.stats.add(stats)
            run.completed_at = now_iso()
            run.wall_s = time.monotonic() - started
            with self._active_lock:  # after an interrupt_runs, this final status (the truth) is the one kept
                self._active_runs.pop(run.id, None)
                store.runs.save(run)
        return run

    def _source_positions(self, branch: str, step: str | None, from_: str | None) -> dict[str, Any]:
        """How far each source step this run writes was read (a stream: its lines; ``Limits.stream_batch_lines``
        caps a read beyond the last committed position)."""
        definition = self.use_branch(branch)
        scope = definition.scope()
        selected = set(self.pipeline.select(step, from_))
        out = {}
        for name, source in definition.sources().items():
            origin = source.reader()
            if name in selected and scope.owns(name) and isinstance(origin, LineReader):
                out[name] = (origin, origin.read_position())
        return out

    @staticmethod
    def _commit_positions(positions: dict[str, Any]) -> None:
        """The run completed: what it read is in memory, so the next read may take a batch beyond it."""
        for origin, position in positions.values():
            origin.commit_position(position)

    # -- live memory: sync and remember (docs/architecture.md, "Live memory") ------------------------
    def sync(self, source: str | None = None, branch: str | None = None, progress: ProgressReporter | None = None,
             wait: bool = True, on_wait: Callable[[str], None] | None = None, allow_deletions: bool = False,
             verbose: bool = False, say: Callable[[str], None] | None = None,
             workers: int | None = None) -> SyncReport:
        """One pass: fetch API pages, detect what each source gained / changed / lost since the last sync
        (CDC state in DuckDB), run the dirty partitions of ``source`` (all sources: the whole pipeline)
        and everything downstream, then record the sources' new state. The run's own planning decides
        what to compute, so a sync after a failed one repairs whatever the state says. ``workers``: as
        ``run``'s (None: the pipeline's ``ingest_workers``, as many as this machine allows), checked before
        anything is detected."""
        workers = self.ingest_workers_for(workers, say)
        from synthex_resources.cdc_state import open_cdc_state
        from synthex_resources.source_sync import commit_changes, detect_changes

        def detect() -> list[SourceChanges]:
            with open_cdc_state(self.pipeline.data_dir) as cdc:  # held for milliseconds, never during the run
                return detect_changes(self.pipeline, cdc, [source] if source else None)

        def commit(changes: list[SourceChanges]) -> None:
            with open_cdc_state(self.pipeline.data_dir) as cdc:
                commit_changes(self.pipeline, cdc, changes)

        branch = self.use_branch(branch).branch_name
        # Before detecting changes: an unfinished purge may still have items for the CDC state to forget.
        self.finish_interrupted_purge(say=say)
        run, changes = self._tracked_run(None, source, False, branch, progress, wait, on_wait, allow_deletions,
                                         verbose, detect, commit, workers=workers)
        return SyncReport(changes=changes, run=run)

    def unsynced_sources(self, sources: list[str] | None = None) -> list[str]:
        """The source steps (of ``sources``; default all) whose items changed since their last completed
        sync: a sync that was stopped before it recorded them, or lines remembered and never synced.
        Reads the sources and the CDC state only (no fetch, no plan, nothing written)."""
        from synthex_resources.cdc_state import open_cdc_state
        from synthex_resources.source_sync import detect_changes

        with open_cdc_state(self.pipeline.data_dir) as cdc:
            return [c.source for c in detect_changes(self.pipeline, cdc, sources, pull=False) if c.any]

    def remember(self, text: str, *, id: str | None = None, created_at: str | None = None,
                 metadata: dict[str, Any] | None = None, source: str | None = None) -> dict[str, Any]:
        """Append what an agent says to the project's stream source; the next sync (a sensor tick,
        ``synthex sync``, the MCP server) brings it into memory like any other data. Returns the item's
        key, the id its record will have, the source, the stream file, its ``status`` (a ``RememberStatus``)
        and ``warnings`` (e.g. a half line a dead writer left was ended first). A line that could not be
        synced is refused before anything is written (one line: ``BadInputError``, or ``SourceError`` when
        the stream file cannot be appended to), never reported as queued."""
        self.pipeline.limits.check_remember(text, id, metadata)  # before anything is parsed or written
        from synthex.core.errors import SourceError
        from synthex.core.hashing import fingerprint, materialization_key, record_id
        from synthex.core.importers.jsonl import item_from_row
        from synthex.core.purges import PurgeLedger
        from synthex.core.sources.bounded import future_refusal
        from synthex.core.sources.stream import append_lines, content_key, encode_line

        streams = self.pipeline.stream_sources()
        if source is None and len(streams) != 1:
            raise PipelineDefinitionError(
                "remember needs a stream source: add pipeline.source(\"inbox\", stream=\"inbox.jsonl\")"
                if not streams else f"several stream sources ({', '.join(streams)}): name one with source=")
        name = source or streams[0]
        if name not in streams:
            raise PipelineDefinitionError(f"{name!r} is not a stream source; stream sources: {', '.join(streams) or 'none'}")
        if not isinstance(text, str) or not text.strip():
            raise BadInputError("remember: the text is empty")
        row: dict[str, Any] = {"text": text, "created_at": created_at or now_iso()}
        if id:
            row["id"] = id
        if metadata:
            row["metadata"] = metadata
        try:  # the same checks a stream line gets when read, before anything is written
            item = item_from_row(row, "remember", None, {})
        except SourceError as exc:
            raise BadInputError(str(exc)) from None
        key = item.key or content_key(item)
        # What the stream's reader would set aside or never import is refused here, not queued.
        if refusal := future_refusal(self.pipeline.limits, f"remember: item {key!r}", item.created_at):
            raise BadInputError(refusal.replace(": skipped: ", ": refused: ", 1))
        line_bytes = len(encode_line(row))
        if line_bytes > self.pipeline.limits.stream_line_bytes:
            raise BadInputError(f"remember: the line is {line_bytes} bytes, over the limit of "
                                f"{self.pipeline.limits.stream_line_bytes} (Limits.stream_line_bytes)")
        if PurgeLedger(self.pipeline.data_dir).load().hides_item(name, key):
            raise BadInputError(f"remember: item {key!r} of {name!r} was purged (`synthex purge`) and is never "
                                f"imported again; give it another id")
        step = self.pipeline.steps[name]
        path = step.reader().path  # type: ignore[attr-defined]
        half_line = append_lines(path, [row])
        warnings = [f"{path}: its last line had no newline ({half_line} bytes: a writer died mid-line); it was "
                    f"ended first so it stands alone, and is set aside (quarantined) unless it is a whole line"
                    ] if half_line else []
        record = record_id(materialization_key(name, step.version_hash(), [fingerprint(item.content)], key))
        return {"id": key, "record_id": record, "source": name, "path": str(path),
                "status": RememberStatus.QUEUED, "warnings": warnings}

    # -- on_update hooks (at least once: synthex_resources.hook_deliveries) ---------------------------
    def hooks_due(self, branches: list[str] | None = None) -> list[HookState]:
        """Hooked projections whose current record was not delivered yet (e.g. the endpoint was down)."""
        if not any(o.on_update is not None for o in self.pipeline.outputs.values()):
            return []
        from synthex_resources.hook_deliveries import HookDeliveries

        return HookDeliveries(self.pipeline, self.store).due(branches=branches)

    def deliver_hooks(self, branches: list[str] | None = None) -> DeliveryReport:
        """Deliver every due hook now (each tried a few times with backoff); failures stay pending."""
        from synthex_resources.hook_deliveries import DeliveryReport, HookDeliveries

        if not any(o.on_update is not None for o in self.pipeline.outputs.values()):
            return DeliveryReport()
        return HookDeliveries(self.pipeline, self.store).deliver_due(branches=branches)

    def _fail_abandoned_runs(self, branch: str, current: str) -> None:
        """Runs of this branch still marked running died without finishing (a run holds the branch lock
        until it ends, and we hold it now): mark them failed, here and in Dagster. On a deployment's shared
        instance the lock is this machine's only: a run whose Dagster run is still in progress may be another
        machine's, live; Dagster's run monitoring judges those (synthex_assets.queued_runs)."""
        running = self.store.runs.running(branch, except_id=current)
        if running and self._has_instance():
            from synthex_assets.queued_runs import runs_through_queue

            if runs_through_queue(self.instance):
                held = {r.id for r in running if (d := self.instance.get_run_by_id(r.id)) is not None
                        and not d.is_finished}
                running = [r for r in running if r.id not in held]
        for run in running:
            self.mark_failed(run, f"killed: the run ended without finishing (found by run {current} at {now_iso()})")

    def interrupt_runs(self, reason: str) -> list[Run]:
        """The process is about to exit while runs of this app are still executing (on other threads):
        record each as failed with ``reason`` now, so none stays "running", and start no new run. A run
        that still ends before the process exits records its own final status afterwards. The partitions
        it did not write stay dirty: the next run or sync computes them."""
        with self._active_lock:
            self._interrupted = reason
            runs = [copy.copy(run) for run in self._active_runs.values()]  # the executing thread keeps its own
            for run in runs:
                self.mark_failed(run, reason)
        return runs

    def close_abandoned_runs(self, branch: str | None = None, found_by: str = "a new start") -> list[Run]:
        """Runs of ``branch`` left "running" by a process that died (no one holds the branch lock, which a
        live run holds until it ends): marked failed, here and in Dagster, and returned; the next run of
        the branch recomputes what they did not write. A branch being written now is left alone."""
        from synthex_resources.branch_lock import BranchBusyError, BranchLock

        branch = self.use_branch(branch).branch_name
        lock = BranchLock(self.pipeline.data_dir, branch, f"check-{uuid.uuid4()}")
        try:
            lock.acquire()
        except BranchBusyError:
            return []
        try:
            runs = self.store.runs.running(branch)
            for run in runs:
                self.mark_failed(run, f"killed: the run ended without finishing (found by {found_by} at {now_iso()})")
            return runs
        finally:
            lock.release()

    def mark_failed(self, run: Run, reason: str) -> None:
        """A run that died without finishing: failed in the runs table and in Dagster."""
        run.status, run.error = RunStatus.FAILED, reason
        self.store.runs.save(run)
        if self._has_instance():
            dagster_run = self.instance.get_run_by_id(run.id)
            if dagster_run is not None and not dagster_run.is_finished:
                self.instance.report_run_failed(dagster_run, reason)

    def _record_failure(self, run: Run, exc: BaseException, started: float) -> None:
        run.status, run.error = RunStatus.FAILED, redact(str(exc) or type(exc).__name__)
        run.completed_at, run.wall_s = now_iso(), time.monotonic() - started
        self.store.runs.save(run)

    def _launch(self, run_id: str, branch: str, plan: Plan, full: bool, reporter: ProgressReporter,
                verbose: bool = False, deletions: DeletionConsent = DeletionConsent.GUARDED,
                on_wait: Callable[[str], None] | None = None, workers: int = 1) -> list[CheckOutcome]:
        """One Dagster run of the plan's partitions; the outcome of every asset check it evaluated. On a
        deployment's instance it waits in Dagster's run queue first (``on_wait`` told why)."""
        from synthex_assets.definitions import build_definitions
        from synthex_assets.launcher import launch_pipeline_run
        from synthex_resources.llm import LLMConfig

        defs = build_definitions(self.pipeline, resources={"store": self.store, "llm": LLMConfig(),
                                                           "progress": reporter})
        return launch_pipeline_run(defs, self.pipeline, self.instance, run_id=run_id, branch=branch,
                                   partitions=plan.partitions, periods=plan.periods, full=full, verbose=verbose,
                                   deletions=deletions, on_wait=on_wait, workers=workers)

    def _execute_in_process(self, run_id: str, branch: str, plan: Plan, full: bool, reporter: ProgressReporter,
                            deletions: DeletionConsent, workers: int = 1) -> list[CheckOutcome]:
        """The plan's partitions executed here by the steps' executors, no Dagster run (``RunEngine.IN_PROCESS``)."""
        from synthex_assets.in_process import execute_in_process
        from synthex_resources.llm import LLMConfig

        return execute_in_process(self.pipeline, self.store, LLMConfig(), reporter, run_id=run_id, branch=branch,
                                  partitions=plan.partitions, full=full, deletions=deletions, workers=workers)

    def import_warnings(self, branch: str | None = None) -> list[str]:
        """What the importers left out or repaired in the sources, one line each, naming file and record."""
        from synthex.core.purges import PurgeLedger

        purged = PurgeLedger(self.pipeline.data_dir).load()
        out = []
        for step in self.use_branch(branch).sources().values():
            out += step.warnings()
            if purged.per_source.get(step.name):
                held = sum(1 for item in step.items() if purged.hides_item(step.name, item.key))
                if held:
                    out.append(f"{step.describe()}: {held} item(s) not imported: purged by `synthex purge` "
                               f"(listed by hash in {self.pipeline.data_dir / 'purged.json'})")
        return out

    def empty_sources(self) -> list[tuple[str, str]]:
        """(source, why) for each source that yields no item although it holds data: a folder whose files
        are no notes, an export split into parts read as a notes folder (``SourceOrigin.why_empty``)."""
        return [(name, why) for name, step in self.pipeline.sources().items() if (why := step.reader().why_empty())]

    def quarantined(self) -> list[Quarantine]:
        """Per source, the stream lines (notes) its reader sets aside (malformed, undatable, too long; a note
        not UTF-8 or badly dated) until they are fixed or removed; a stream's reader keeps them in
        ``<data dir>/quarantine/`` for other processes too, a notes folder's finds them again."""
        readers = [step.reader() for step in self.pipeline.sources().values()]
        return [q for r in readers if isinstance(r, SetsAside) and (q := r.quarantine())]

    # -- privacy ----------------------------------------------------------------------------------
    def purge(self, record_ids: str | list[str] | None = None, *, match: str | None = None, regex: bool = False,
              dry_run: bool = False, cascade: bool = True, say: Callable[[str], None] | None = None,
              on_event: Callable[[PurgeEvent], None] | None = None) -> PurgeReport:
        """Remove records and everything made from them on every branch, recompute what used them, and
        sweep their text out of every file of the data directory (``synthex.app.purge``). ``match``
        picks the source records whose text contains it (or matches it, with ``regex``).

        A purge killed earlier is finished first; when it was this same purge (its records are gone
        now), its report is the answer. ``on_event``: told each step of the purge once it is done."""
        from synthex.app.purge import Purger

        if not cascade:
            raise BadInputError("purge without cascade would leave records made from the purged one holding "
                                "its text; purge always cascades")
        purger = Purger(self)
        ids = [record_ids] if isinstance(record_ids, str) else list(record_ids or [])
        lock = purger.locked()
        try:
            finished = None if dry_run else purger.resume(say=say, on_event=on_event)
            if finished is not None:  # ids the finished purge removed are not asked for again
                ids = [i for i in ids if not any(r.startswith(i) for r in finished.affected_records)]
            if match is not None:
                ids += purger.match(match, regex=regex)
                if not ids and finished is None:
                    raise BadInputError(f"no source record matches {match!r} (nothing purged)")
            if not ids:
                if finished is not None:
                    return finished
                raise BadInputError("purge: give record ids or match=")
            return purger.purge(ids, dry_run=dry_run, say=say, on_event=on_event,
                                also_find=[match] if match and not regex and len(match) >= 4 else None)
        finally:
            if lock is not None:
                lock.release()

    def finish_interrupted_purge(self, say: Callable[[str], None] | None = None,
                                 on_event: Callable[[PurgeEvent], None] | None = None,
                                 wait: bool = False) -> PurgeReport | None:
        """Finish a purge that was killed before it finished (``synthex.core.purge_journal``); None when
        there is none, or when a live purge holds the purge lock (it is finishing it; ``wait`` waits)."""
        from synthex.core.purge_journal import PurgeJournal

        if not PurgeJournal(self.pipeline.data_dir).exists():  # a stat: the common case costs nothing
            return None
        from synthex.app.purge import Purger

        purger = Purger(self)
        lock = purger.locked(wait=wait)
        if lock is None:
            return None
        try:
            report = purger.resume(say=say, on_event=on_event)
        finally:
            lock.release()
        if report is not None and report.residue and say is not None:
            say("warning: purge residue still found in: "
                + ", ".join(f"{f} ({n})" for f, n in report.residue.items()))
        return report

    # -- branches ---------------------------------------------------------------------------------
    def use_branch(self, branch: str | None) -> PipelineDefinition:
        """The definition of ``branch`` (this app's own branch when None). A branch whose file is gone is
        one line (PipelineDefinitionError)."""
        name = check_branch_name(branch or self.pipeline.branch_name)
        return self.pipeline.for_branch(name)

    def scope(self, branch: str | None) -> BranchScope:
        """The scope a command on ``branch`` reads and writes (resolved once per command; every door
        resolves it the same way: ``PipelineDefinition.scope``)."""
        return self.use_branch(branch).scope()

    @property
    def branches(self) -> Branches:
        from synthex.app.branches import Branches

        return Branches(self)

    # -- read -----------------------------------------------------------------------------------
    def get(self, record_id: str, branch: str | None = None) -> Record | None:
        """A record by id, or by a unique prefix of it (the 8 characters search and lineage print); with
        ``branch``, only a record that branch reads (through its view)."""
        on = self.scope(branch) if branch else None
        found = self.store.records.get(record_id, on)
        if found is not None or len(record_id) >= 36:
            return found
        matches = self.store.records.ids_with_prefix(record_id)
        if len(matches) > 1:
            raise BadInputError(f"record id prefix {record_id!r} matches several records; give more characters")
        return self.store.records.get(matches[0], on) if matches else None

    def records(self, step: str, branch: str | None = None) -> list[Record]:
        return self.store.records.list(self.scope(branch), step=step)

    def stats(self, branch: str | None = None) -> dict[str, Any]:
        definition = self.use_branch(branch)
        scope = definition.scope()
        counts = self.store.records.counts(scope)
        return {"branch": definition.branch_name,
                "steps": {s: {"records": counts.get(s, 0), "kind": definition.steps[s].kind,
                              "served_by": scope.serves(s)} for s in definition.order()}}

    def runs(self, limit: int = 20) -> list[Run]:
        """Runs, newest first. Runs launched from the UI have no row of their own (only per-step stats):
        their status, start, end and wall time come from the Dagster instance."""
        runs = self.store.runs.recent(limit=limit)
        unrecorded = [r for r in runs if not r.dagster_run_ids]
        if unrecorded and self._has_instance():
            for run in unrecorded:
                dagster_run = self.instance.get_run_by_id(run.id)
                record = self.instance.get_run_record_by_id(run.id)
                if dagster_run is None or record is None:
                    continue
                run.dagster_run_ids = [run.id]
                run.status = {"SUCCESS": RunStatus.COMPLETED, "FAILURE": RunStatus.FAILED,
                              "CANCELED": RunStatus.FAILED}.get(dagster_run.status.value, RunStatus.RUNNING)
                if record.start_time and record.end_time:
                    run.wall_s = record.end_time - record.start_time
        return runs

    # -- search (design doc §6) ---------------------------------------------------------------------
    @cached_property
    def search_strategies(self) -> StrategyRegistry:
        """The search modes: built-in strategies and installed plugins' (``load_search_strategies``),
        loaded once per app; plugins that failed to load are on its ``failures``."""
        from synthex_resources.search.strategies.registry import load_search_strategies

        return load_search_strategies()

    @property
    def rerankers(self) -> Rerankers:
        """The second stages a search can name, kept for the app's lifetime (a model loads once), or the
        caller's, shared by many small projects (an eval's workspaces)."""
        if self._rerankers is None:
            from synthex_resources.search.rerankers import Rerankers

            self._rerankers = Rerankers()
        return self._rerankers

    def search(self, query: str, step: str | list[str] | None = None, exact: bool = False, branch: str | None = None,
               k: int = 10, mode: str | None = None, periods: list[str] | None = None,
               metadata: dict[str, Any] | None = None, rerank: str | None = None,
               rerank_top_n: int | None = None, as_of: str | None = None) -> SearchResults:
        """Surface search at a step (altitude); ``exact=True`` is verbatim search in leaf steps by default.

        ``as_of``: when the question is asked; the conversational recipe resolves relative dates in the
        query ("last week") against it. ``rerank``: a second stage of ``rerankers`` (``cross-encoder``:
        offline; ``llm``: one call to the configured model, real model only) reorders the recipe's top
        ``rerank_top_n`` hits (None: that reranker's default, 20)."""
        from synthex_resources.search.memory_search import search_memory

        return search_memory(self.pipeline, self.store, self.scope(branch), self.search_strategies, query,
                             step=step, exact=exact, k=k,
                             mode=mode, periods=periods, metadata=metadata, rerank=rerank,
                             rerank_top_n=rerank_top_n, as_of=as_of, rerankers=self.rerankers)

    def projection(self, name: str, branch: str | None = None) -> Record | None:
        """The latest record of a ``surface="projection"`` output's step (e.g. the world model)."""
        return self.store.records.latest(self.scope(branch), self.pipeline.projection_step(name))
