"""``synthex purge``: remove a record and everything made from it, on every branch, and leave no trace of
its text anywhere under the project's data directory (design doc Part XI, "Selective Purge").

Order, each part safe to repeat after a crash (``purge`` again finishes the job):
1. the cascade: the record and every record whose provenance reaches it, on all branches;
2. under every branch's lock: the ledger (``.synthex/purged.json``) learns the ids and the source items,
   then the rows are deleted. From here on no plan produces them again;
3. each branch is re-run: aggregates and folds that used a purged record are recomputed without it;
4. the sweep, under every branch's lock: LLM cache entries that produced purged text, text in run and
   hook bookkeeping, the CDC state of purged items, LanceDB compaction (deletions materialized, FTS index
   rebuilt, tags and old versions removed), Dagster's event log and compute logs, DuckDB files, landing
   files; then a raw-byte scan of every file under the data directory for the purged text.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthex.core.errors import BadInputError
from synthex.core.naming import MAIN
from synthex.core.periods import now_iso
from synthex.core.project import branch_names
from synthex.core.purges import LedgerEntry, PurgeLedger, source_key_hash

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthex.app.services import AppServices
    from synthex_resources.purge import Cascade


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
                        "outside": self.outside, "seconds": round(self.seconds, 3)})
        return out


class Purger:
    """Purges for one project (``AppServices``: a ``ProjectApp``) (its store, Dagster instance and definition)."""

    def __init__(self, app: AppServices) -> None:
        self.app = app
        self.pipeline = app.pipeline.root()

    def branches(self) -> list[str]:
        return [MAIN, *branch_names(self.pipeline.project_dir)]

    def resolve(self, ids: list[str]) -> list[str]:
        """Full ids for ids or unique prefixes; an unknown one is one line."""
        out = []
        for given in ids:
            rec = self.app.get(given)
            if rec is None:
                raise BadInputError(f"record {given!r} not found on any branch (nothing purged)")
            out.append(rec.id)
        return out

    def match(self, pattern: str, regex: bool = False) -> list[str]:
        """Source records (any branch) whose text contains ``pattern`` (case-insensitive) or matches it."""
        from synthex_resources.purge import matching_records

        return matching_records(self.app.store, pattern, self.pipeline.source_steps(), regex=regex)

    def purge(self, ids: list[str], dry_run: bool = False, say: Callable[[str], None] | None = None,
              also_find: list[str] | None = None) -> PurgeReport:
        """``also_find``: literal text to sweep for besides the purged source lines (``--match TEXT``: a
        model's paraphrase of a purged record still quotes the name or number the user searched for)."""
        from synthex_resources.purge import find_cascade

        started = time.monotonic()
        tell = say or (lambda _msg: None)
        roots = self.resolve(ids)
        cascade = find_cascade(self.app.store, roots)
        report = PurgeReport(dry_run=dry_run, cascade=cascade)
        if dry_run or not cascade.rows:
            report.seconds = time.monotonic() - started
            return report
        store = self.app.store
        affected = cascade.affected_records
        records = store.records.get_many(affected)
        texts = {r.content for r in records}
        raws = {str(r.audit.get("raw_response") or "") for r in records} - {""}
        root_texts = [r.content for r in records if r.id in set(roots) or not r.source_ids]
        tell(f"purge: {len(affected)} record(s) on {len(cascade.branches)} branch(es): "
             + ", ".join(f"{s} {n}" for s, n in cascade.steps.items()))

        entries, source_keys = self._ledger_entries(cascade)
        with self._all_branches_locked():
            report.ledger_added = PurgeLedger(self.pipeline.data_dir).add(entries)
            from synthex_resources.purge import delete_rows

            delete_rows(store, affected)
        for branch in self.branches():
            run = self.app.run(branch=branch, allow_deletions=True, wait=True)
            report.recomputed[branch] = run.stats.output
            if run.stats.output:
                tell(f"purge: branch {branch}: {run.stats.output} record(s) recomputed without it")
        tell("purge: sweeping the data directory")
        with self._all_branches_locked():
            self._sweep(report, texts, raws, root_texts, affected, source_keys, list(also_find or []))
        report.seconds = time.monotonic() - started
        return report

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

    def _sweep(self, report: PurgeReport, texts: set[str], raws: set[str], root_texts: list[str],
               affected: list[str], source_keys: dict[str, list[str]], also_find: list[str]) -> None:
        from synthex_resources.cdc_state import CDC_FILE, open_cdc_state
        from synthex_resources.hook_deliveries import HOOK_DELIVERIES
        from synthex_resources.purge import compact_physically, drop_cached_responses, scrub_bookkeeping
        from synthex_resources.record_store import RUN_STEPS, RUNS
        from synthex_resources.residue import Needles, needles_of, scan, scrub_files

        store, data_dir = self.app.store, self.pipeline.data_dir
        needles = Needles(needles_of(root_texts) + also_find, {i[:8] for i in affected})
        report.cache_entries = drop_cached_responses(store, texts, raws, needles.texts)
        report.bookkeeping_rows = scrub_bookkeeping(store, needles.texts, [RUNS, RUN_STEPS, HOOK_DELIVERIES])
        if source_keys and (data_dir / CDC_FILE).exists():
            with open_cdc_state(data_dir) as cdc:
                report.cdc_items = sum(cdc.forget_items(s, keys) for s, keys in source_keys.items())
        report.compaction = compact_physically(store, stem=self.pipeline.lexical_stem).to_dict()
        # Dagster keeps connections to its SQLite files: close ours before they are rewritten.
        self.app.close()
        store_dir = Path(self.pipeline.store_uri)
        skip = [store_dir] if "://" not in self.pipeline.store_uri else []
        report.files_scrubbed = scrub_files(data_dir, needles, skip)
        if (data_dir / CDC_FILE).exists() and report.cdc_items:
            from synthex_resources.residue import rebuild_duckdb

            rebuild_duckdb(data_dir / CDC_FILE)  # forgotten items' hashes leave the file, not only the table
        report.residue = scan(data_dir, needles.forms())
        report.outside = self._sources_still_holding(needles.forms())

    def _sources_still_holding(self, forms: list[bytes]) -> list[str]:
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
                if f.exists() and not f.resolve().is_relative_to(data_dir) and occurrences(f, forms):
                    out.append(str(f))
        return out
