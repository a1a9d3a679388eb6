"""``synthex purge``: remove a record and everything made from it, on every branch, and leave no trace of
its text anywhere under the project's data directory (design doc Part XI, "Selective Purge").

A purge is a journaled operation (``synthex.core.purge_journal``): the cascade is computed and its
targets (ids, ledger entries, item keys, the needles the sweep and the scan look for) are journaled
before anything is deleted; then each step below is done and recorded as done. Every step is safe to
run again, so a purge killed at any point is finished by the next ``synthex purge`` (same arguments,
or ``--resume``), ``synthex run`` / ``sync`` or ``synthex doctor --repair``. One purge at a time
(``PurgeLock``, held for the whole purge).

1. the cascade: the record and every record whose provenance reaches it, on all branches (journaled);
2. under every branch's lock: the ledger (``.synthex/purged.json``) learns the ids and the source items,
   then each branch's rows are deleted. From here on no plan produces them again;
3. each branch is re-run: aggregates and folds that used a purged record are recomputed without it;
4. the sweep, under every branch's lock: LLM cache entries that produced purged text, text in run and
   hook bookkeeping, the CDC state of purged items, LanceDB compaction (deletions materialized, FTS index
   rebuilt, tags and old versions removed), Dagster's event log and compute logs, DuckDB files, landing
   files; then a raw-byte scan of every file under the data directory for the purged text (the journal
   excepted); then the journal is removed.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthex.core.errors import BadInputError, SynthexError
from synthex.core.naming import MAIN
from synthex.core.periods import now_iso
from synthex.core.project import branch_names
from synthex.core.purge_journal import (
    RESUME_HINT,
    SWEEP,
    PurgeEvent,
    PurgeJournal,
    PurgePhase,
    PurgeProgress,
    PurgeStep,
    PurgeStepError,
    PurgeTargets,
    plan_steps,
)
from synthex.core.purges import LedgerEntry, PurgeLedger, source_key_hash

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthex.app.services import AppServices
    from synthex_resources.branch_lock import PurgeLock
    from synthex_resources.purge import Cascade
    from synthex_resources.residue import Needles


@dataclass
class PurgeReport:
    """What a purge removed (or, with ``dry_run``, would remove) and what the sweep found."""

    dry_run: bool
    cascade: Cascade
    ledger_added: int = 0
    recomputed: dict[str, int] = field(default_factory=dict)  # branch -> records written by the re-run
    cache_entries: int = 0
    bookkeeping_rows: int = 0
    cdc_items: int = 0
    compaction: dict[str, Any] = field(default_factory=dict)
    files_scrubbed: dict[str, int] = field(default_factory=dict)
    residue: dict[str, int] = field(default_factory=dict)  # file -> occurrences left (must be empty)
    outside: list[str] = field(default_factory=list)  # source files outside the data dir still holding it
    seconds: float = 0.0
    purge_id: str = ""
    resumed: bool = False  # finished a purge an earlier process began (and was killed in)

    @classmethod
    def from_progress(cls, progress: PurgeProgress, targets: PurgeTargets) -> PurgeReport:
        """The report of a journaled purge from what each of its steps recorded (in this process or an
        earlier one)."""
        from synthex_resources.purge import Cascade

        def result(step: PurgeStep, default: Any) -> Any:
            return progress.results.get(step.key, default)

        report = cls(dry_run=False, cascade=Cascade(list(targets.roots), list(targets.rows)),
                     purge_id=progress.purge_id)
        report.ledger_added = result(PurgeStep(PurgePhase.LEDGER), 0)
        report.recomputed = {s.branch: result(s, 0) for s in progress.steps
                             if s.phase is PurgePhase.RERUN and s.branch is not None}
        report.cache_entries = result(PurgeStep(PurgePhase.CACHE), 0)
        report.bookkeeping_rows = result(PurgeStep(PurgePhase.BOOKKEEPING), 0)
        report.cdc_items = result(PurgeStep(PurgePhase.CDC), 0)
        report.compaction = result(PurgeStep(PurgePhase.COMPACTION), {})
        report.files_scrubbed = result(PurgeStep(PurgePhase.FILES), {})
        scanned = result(PurgeStep(PurgePhase.SCAN), {})
        report.residue, report.outside = scanned.get("residue", {}), scanned.get("outside", [])
        return report

    @property
    def affected_records(self) -> list[str]:
        return self.cascade.affected_records

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dry_run": self.dry_run, **self.cascade.to_dict()}
        if not self.dry_run:
            out.update({"ledger_added": self.ledger_added, "recomputed": self.recomputed,
                        "cache_entries": self.cache_entries, "bookkeeping_rows": self.bookkeeping_rows,
                        "cdc_items": self.cdc_items, "compaction": self.compaction,
                        "files_scrubbed": self.files_scrubbed, "residue": self.residue,
                        "outside": self.outside, "seconds": round(self.seconds, 3),
                        "purge_id": self.purge_id, "resumed": self.resumed})
        return out


class _RerunProgress:
    """A re-run's progress reporter: tells the purge's hook each time a step writes records."""

    def __init__(self, step: PurgeStep, on_event: Callable[[PurgeEvent], None]) -> None:
        self.step, self.on_event = step, on_event

    def start(self, totals: dict[str, int]) -> None:
        pass

    def advance(self, step: str, n: int) -> None:
        self.on_event(PurgeEvent(self.step, done=False, detail=step))

    def finish(self) -> None:
        pass


class Purger:
    """Purges for one project (``AppServices``: a ``ProjectApp``) (its store, Dagster instance and definition).
    Callers hold the purge lock (``locked``) around ``resume`` and ``purge``."""

    def __init__(self, app: AppServices) -> None:
        self.app = app
        self.pipeline = app.pipeline.root()
        self.journal = PurgeJournal(self.pipeline.data_dir)

    def branches(self) -> list[str]:
        return [MAIN, *branch_names(self.pipeline.project_dir)]

    def locked(self, wait: bool = True) -> PurgeLock | None:
        """The project's purge lock, taken (None when another process holds it and ``wait`` is off)."""
        from synthex_resources.branch_lock import PurgeLock

        lock = PurgeLock(self.pipeline.data_dir)
        return lock if lock.acquire(wait=wait) else None

    def resolve(self, ids: list[str]) -> list[str]:
        """Full ids for ids or unique prefixes; an unknown one is one line (saying so when the ledger
        shows it was purged already)."""
        out = []
        for given in ids:
            rec = self.app.get(given)
            if rec is None:
                purged = [e for e in PurgeLedger(self.pipeline.data_dir).entries() if e.record_id.startswith(given)]
                if purged:
                    raise BadInputError(f"record {given!r} was purged at {purged[0].purged_at} (nothing left to "
                                        f"purge)")
                raise BadInputError(f"record {given!r} not found on any branch (nothing purged)")
            out.append(rec.id)
        return out

    def match(self, pattern: str, regex: bool = False) -> list[str]:
        """Source records (any branch) whose text contains ``pattern`` (case-insensitive) or matches it."""
        from synthex_resources.purge import matching_records

        return matching_records(self.app.store, pattern, self.pipeline.source_steps(), regex=regex)

    def resume(self, say: Callable[[str], None] | None = None,
               on_event: Callable[[PurgeEvent], None] | None = None) -> PurgeReport | None:
        """Finish the journaled purge, if there is one; None when there is none."""
        self.journal.discard_stale()
        progress = self.journal.progress()
        if progress is None:
            return None
        pending = progress.pending()
        (say or (lambda _msg: None))(
            f"purge: finishing the interrupted purge {progress.purge_id[:8]} of {progress.records} record(s) "
            f"(started {progress.started_at}; next step: {pending[0].describe() if pending else 'none'})")
        targets = self.journal.targets(self.app.store.cipher)
        report = self._complete(progress, targets, say, on_event)
        report.resumed = True
        return report

    def purge(self, ids: list[str], dry_run: bool = False, say: Callable[[str], None] | None = None,
              also_find: list[str] | None = None,
              on_event: Callable[[PurgeEvent], None] | None = None) -> PurgeReport:
        """``also_find``: literal text to sweep for besides the purged source lines (``--match TEXT``: a
        model's paraphrase of a purged record still quotes the name or number the user searched for).
        ``on_event``: told each step once it is recorded done, and progress inside re-runs and compaction."""
        from synthex_resources.purge import find_cascade

        started = time.monotonic()
        tell = say or (lambda _msg: None)
        roots = self.resolve(ids)
        cascade = find_cascade(self.app.store, roots)
        report = PurgeReport(dry_run=dry_run, cascade=cascade)
        if dry_run or not cascade.rows:
            report.seconds = time.monotonic() - started
            return report
        tell(f"purge: {len(cascade.affected_records)} record(s) on {len(cascade.branches)} branch(es): "
             + ", ".join(f"{s} {n}" for s, n in cascade.steps.items()))
        targets = self._targets(cascade, roots, list(also_find or []))
        progress = self.journal.begin(targets, plan_steps(cascade.branches, self.branches()),
                                      self.app.store.cipher)
        if on_event is not None:
            on_event(PurgeEvent(PurgeStep(PurgePhase.JOURNALED), done=True))
        report = self._complete(progress, targets, say, on_event)
        report.seconds = time.monotonic() - started
        return report

    # -- the journaled steps ----------------------------------------------------------------------
    def _targets(self, cascade: Cascade, roots: list[str], also_find: list[str]) -> PurgeTargets:
        """What the journal must hold for the purge to finish once the rows are gone."""
        from synthex.core.needle_prints import prints_of
        from synthex_resources.purge import lines_kept_elsewhere, text_digest
        from synthex_resources.residue import needles_of

        affected = cascade.affected_records
        records = self.app.store.records.get_many(affected)
        raws = {str(r.audit.get("raw_response") or "") for r in records} - {""}
        root_texts = [r.content for r in records if r.id in set(roots) or not r.source_ids]
        needles = needles_of(root_texts)
        shared = lines_kept_elsewhere(self.app.store, needles, set(affected))
        needles = [n for n in needles if n not in shared]
        entries, source_keys = self._ledger_entries(cascade)
        return PurgeTargets(roots=list(roots), rows=list(cascade.rows), ledger=[e.to_dict() for e in entries],
                            source_key_hashes={s: sorted(source_key_hash(s, k) for k in keys)
                                               for s, keys in source_keys.items()},
                            text_digests=sorted({text_digest(r.content) for r in records}),
                            raw_digests=sorted(text_digest(r) for r in raws),
                            needle_prints=[n.to_list() for n in prints_of(needles + also_find)],
                            id_prefixes=sorted({i[:8] for i in affected}))

    def _complete(self, progress: PurgeProgress, targets: PurgeTargets, say: Callable[[str], None] | None,
                  on_event: Callable[[PurgeEvent], None] | None) -> PurgeReport:
        """Do every step not yet done, in order, recording each; then remove the journal."""
        started = time.monotonic()
        tell = say or (lambda _msg: None)
        emit = on_event or (lambda _event: None)
        pending = progress.pending()

        def do(step: PurgeStep) -> None:
            try:
                result = self._step_action(step.phase)(step, targets, progress, tell, emit)
            except SynthexError:
                raise
            except Exception as exc:  # one line, never a traceback (`synthex purge --verbose` prints it)
                where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
                raise PurgeStepError(f"purge stopped at step {step.describe()}{where}: {type(exc).__name__}: "
                                     f"{exc}; the journal keeps what is left, {RESUME_HINT}") from exc
            self.journal.mark_done(progress, step, result)
            emit(PurgeEvent(step, done=True))

        head = [s for s in pending if s.phase in (PurgePhase.LEDGER, PurgePhase.DELETE)]
        if head:
            with self._all_branches_locked():
                for step in head:
                    do(step)
        for step in (s for s in pending if s.phase is PurgePhase.RERUN):
            do(step)
        sweep = [s for s in pending if s.phase in SWEEP]
        if sweep:
            tell("purge: sweeping the data directory")
            with self._all_branches_locked():
                for step in sweep:
                    do(step)
        self.journal.finish()
        report = PurgeReport.from_progress(progress, targets)
        report.seconds = time.monotonic() - started
        return report

    def _step_action(self, phase: PurgePhase) -> Callable[..., Any]:
        return {PurgePhase.LEDGER: self._write_ledger, PurgePhase.DELETE: self._delete_branch,
                PurgePhase.RERUN: self._rerun_branch, PurgePhase.CACHE: self._drop_cache,
                PurgePhase.BOOKKEEPING: self._scrub_bookkeeping, PurgePhase.CDC: self._forget_cdc_items,
                PurgePhase.COMPACTION: self._compact, PurgePhase.FILES: self._scrub_files,
                PurgePhase.CDC_REBUILD: self._rebuild_cdc, PurgePhase.SCAN: self._scan}[phase]

    def _write_ledger(self, step: PurgeStep, targets: PurgeTargets, *_: Any) -> int:
        return PurgeLedger(self.pipeline.data_dir).add([LedgerEntry(**e) for e in targets.ledger])

    def _delete_branch(self, step: PurgeStep, targets: PurgeTargets, *_: Any) -> int:
        ids = sorted({rid for rid, _, branch, _ in targets.rows if branch == step.branch})
        return self.app.store.records.delete_ids(ids, branch=step.branch, chunk=2000)

    def _rerun_branch(self, step: PurgeStep, targets: PurgeTargets, progress: PurgeProgress,
                      tell: Callable[[str], None], emit: Callable[[PurgeEvent], None]) -> int:
        if step.branch not in self.branches():
            return 0  # the branch was deleted since the purge began: nothing of it to recompute
        # One process: a re-run after a delete recomputes what was built on the purged records, never a first
        # ingest, and a purge must finish on any machine whatever ingest_workers pipeline.py declares.
        run = self.app.run(branch=step.branch, allow_deletions=True, wait=True, resume_purge=False,
                           progress=_RerunProgress(step, emit), workers=1)
        if run.stats.output:
            tell(f"purge: branch {step.branch}: {run.stats.output} record(s) recomputed without it")
        return run.stats.output

    def _needles(self, targets: PurgeTargets) -> Needles:
        from synthex_resources.residue import Needles

        return Needles(targets.prints(), set(targets.id_prefixes))

    def _drop_cache(self, step: PurgeStep, targets: PurgeTargets, *_: Any) -> int:
        from synthex_resources.purge import drop_cached_by_digest

        return drop_cached_by_digest(self.app.store, set(targets.text_digests), set(targets.raw_digests),
                                     self._needles(targets))

    def _scrub_bookkeeping(self, step: PurgeStep, targets: PurgeTargets, *_: Any) -> int:
        from synthex_resources.hook_deliveries import HOOK_DELIVERIES
        from synthex_resources.purge import scrub_bookkeeping
        from synthex_resources.record_store import RUN_STEPS, RUNS

        return scrub_bookkeeping(self.app.store, self._needles(targets), [RUNS, RUN_STEPS, HOOK_DELIVERIES])

    def _forget_cdc_items(self, step: PurgeStep, targets: PurgeTargets, *_: Any) -> int:
        from synthex_resources.cdc_state import CDC_FILE, open_cdc_state

        if not targets.source_key_hashes or not (self.pipeline.data_dir / CDC_FILE).exists():
            return 0
        with open_cdc_state(self.pipeline.data_dir) as cdc:
            # The journal names the items by the ledger's hash of their keys: the keys are read back here.
            forgotten = 0
            for source, hashes in targets.source_key_hashes.items():
                wanted = set(hashes)
                keys = [k for k in cdc.item_keys(source) if source_key_hash(source, k) in wanted]
                forgotten += cdc.forget_items(source, keys)
            return forgotten

    def _compact(self, step: PurgeStep, targets: PurgeTargets, progress: PurgeProgress,
                 tell: Callable[[str], None], emit: Callable[[PurgeEvent], None]) -> dict[str, Any]:
        from synthex_resources.purge import compact_physically

        return compact_physically(self.app.store, stem=self.pipeline.lexical_stem,
                                  on_table=lambda name: emit(PurgeEvent(step, done=False, detail=name))).to_dict()

    def _scrub_files(self, step: PurgeStep, targets: PurgeTargets, progress: PurgeProgress,
                     tell: Callable[[str], None], emit: Callable[[PurgeEvent], None]) -> dict[str, int]:
        from synthex_resources.residue import scrub_files

        # Dagster keeps connections to its SQLite files: close ours before they are rewritten.
        self.app.close()
        store_dir = Path(self.pipeline.store_uri)
        skip = [store_dir] if "://" not in self.pipeline.store_uri else []
        return scrub_files(self.pipeline.data_dir, self._needles(targets), [*skip, self.journal.dir],
                           on_file=lambda rel: emit(PurgeEvent(step, done=False, detail=rel)))

    def _rebuild_cdc(self, step: PurgeStep, targets: PurgeTargets, *_: Any) -> bool:
        from synthex_resources.cdc_state import CDC_FILE
        from synthex_resources.residue import rebuild_duckdb

        # Always when items were forgotten, even by an earlier (killed) process: forgotten items' hashes
        # leave the file only when it is copied, not when the table forgets them.
        path = self.pipeline.data_dir / CDC_FILE
        if not targets.source_key_hashes or not path.exists():
            return False
        rebuild_duckdb(path)
        return True

    def _scan(self, step: PurgeStep, targets: PurgeTargets, *_: Any) -> dict[str, Any]:
        from synthex_resources.residue import scan

        # The journal is scanned too: it names the purged text by prints only, so it must hold none.
        needles = self._needles(targets)
        return {"residue": scan(self.pipeline.data_dir, needles), "outside": self._sources_still_holding(needles)}

    # -- parts ------------------------------------------------------------------------------------
    def _ledger_entries(self, cascade: Cascade) -> tuple[list[LedgerEntry], dict[str, list[str]]]:
        """One entry per purged id; a source record's entry also names its item (by a hash of its key)."""
        from synthex.core.steps import SourceStep
        from synthex_resources.step_context import SnapshotContext

        when = now_iso()
        source_rows: dict[str, dict[str, set[str]]] = {}  # step -> period -> ids
        for rid, step, _, period in cascade.rows:
            if isinstance(self.pipeline.steps.get(step), SourceStep):
                source_rows.setdefault(step, {}).setdefault(period, set()).add(rid)
        keys_by_id: dict[str, tuple[str, str]] = {}
        for step_name, periods in source_rows.items():
            step = self.pipeline.steps[step_name]
            for period, ids in periods.items():
                for item in step.work(SnapshotContext.of([], MAIN).at(period)):
                    if item.id in ids:
                        keys_by_id[item.id] = (step_name, item.group_key)
        step_of = {rid: step for rid, step, _, _ in cascade.rows}
        entries, source_keys = [], {}
        for rid in cascade.affected_records:
            step = step_of[rid]
            found = keys_by_id.get(rid)
            entries.append(LedgerEntry(rid, step, when, source_key_hash(*found) if found else ""))
            if found:
                source_keys.setdefault(found[0], []).append(found[1])
        return entries, source_keys

    def _all_branches_locked(self) -> ExitStack:
        from synthex_resources.branch_lock import BranchLock

        stack = ExitStack()
        for branch in sorted(self.branches()):
            stack.enter_context(BranchLock(self.pipeline.data_dir, branch, "purge").acquire(wait=True))
        return stack

    def _sources_still_holding(self, needles: Needles) -> list[str]:
        """Source files outside the data directory (the user's exports) that still contain the text: the
        ledger keeps it out of every run; the file itself is the user's to edit."""
        from synthex.core.steps import SourceStep
        from synthex_resources.residue import occurrences

        out = []
        data_dir = self.pipeline.data_dir.resolve()
        for step in self.pipeline.steps.values():
            if not isinstance(step, SourceStep) or step.table is not None or step.api is not None:
                continue
            path = step.path()
            files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
            for f in files:
                if f.exists() and not f.resolve().is_relative_to(data_dir) and occurrences(f, needles):
                    out.append(str(f))
        return out
