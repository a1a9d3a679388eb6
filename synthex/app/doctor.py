"""`synthex doctor`: find, and with ``repair`` fix, what an older version or a crash may have left.

- duplicate ids: one record id stored in several rows (two concurrent runs before the branch lock);
  repaired by keeping one row per id;
- dangling sources: a record whose ``sources`` name ids that no longer exist; repaired by deleting the
  record, so the next run recomputes it from what exists;
- runs stuck in "running" whose branch no run holds: repaired by marking them failed;
- an unfinished purge (killed before it finished: ``synthex.core.purge_journal``): repaired by finishing
  it (first, since it deletes records and re-runs branches; the other checks then look again);
- an interrupted promote (its journal is still there: ``Branches.interrupted_promotions``): repaired by
  running the promote again, which finishes it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from synthex.core.purge_journal import PurgeJournal, PurgeProgress

# `synthex doctor`'s exit status when it reports a problem it did not repair (0: healthy or repaired; 1 and
# 2 are every command's "failed" and "bad input"), so a script or a cron job can tell without parsing.
PROBLEMS_FOUND_EXIT = 3

if TYPE_CHECKING:
    from synthex.app.branches import InterruptedPromotion
    from synthex.app.services import AppServices


@dataclass
class DoctorReport:
    duplicate_ids: list[str] = field(default_factory=list)
    dangling: dict[str, list[str]] = field(default_factory=dict)  # record id -> missing source ids
    stuck_runs: list[str] = field(default_factory=list)
    unfinished_purge: PurgeProgress | None = None
    interrupted_promotes: list[InterruptedPromotion] = field(default_factory=list)
    repaired: bool = False

    @property
    def healthy(self) -> bool:
        return not (self.duplicate_ids or self.dangling or self.stuck_runs or self.unfinished_purge
                    or self.interrupted_promotes)

    @property
    def exit_code(self) -> int:
        return 0 if self.healthy or self.repaired else PROBLEMS_FOUND_EXIT

    def to_dict(self) -> dict[str, Any]:
        purge = self.unfinished_purge
        return {"healthy": self.healthy, "duplicate_ids": self.duplicate_ids, "dangling_sources": self.dangling,
                "stuck_runs": self.stuck_runs,
                "unfinished_purge": purge.to_dict() | {"message": purge.describe()} if purge else None,
                "interrupted_promotes": [p.to_dict() for p in self.interrupted_promotes],
                "repaired": self.repaired}


def dangling_sources(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """record id -> the source ids it names that no row holds."""
    known = {r["id"] for r in rows}
    out = {}
    for row in rows:
        missing = [s for s in (row["sources"] or []) if s not in known]
        if missing:
            out[row["id"]] = missing
    return out


def diagnose(app: AppServices) -> DoctorReport:
    from synthex.app.branches import Branches
    from synthex_resources.branch_lock import BranchBusyError, BranchLock

    store = app.store
    rows = store.records.scan(["id", "branch", "sources"])
    counts = Counter((r["id"], r["branch"]) for r in rows)  # one row per (id, branch) is the rule
    report = DoctorReport(duplicate_ids=sorted({i for (i, _), n in counts.items() if n > 1}),
                          dangling=dangling_sources(rows),
                          unfinished_purge=PurgeJournal(app.pipeline.data_dir).progress(),
                          interrupted_promotes=Branches(app).interrupted_promotions())
    for run in store.runs.running():
        lock = BranchLock(app.pipeline.data_dir, run.branch, run.id)
        try:
            lock.acquire()  # free: nobody is running on that branch, so the run is dead
        except BranchBusyError:  # a live run holds the branch: leave it alone
            continue
        lock.release()
        report.stuck_runs.append(run.id)
    return report


def repair(app: AppServices, report: DoctorReport) -> DoctorReport:
    from synthex.core.record import Record

    if report.unfinished_purge is not None:
        app.finish_interrupted_purge(wait=True)
        found = diagnose(app)  # the purge deleted records and re-ran branches: look again
        report.duplicate_ids, report.dangling = found.duplicate_ids, found.dangling
        report.stuck_runs = sorted(set(report.stuck_runs) | set(found.stuck_runs))
    if report.interrupted_promotes:  # before the record checks: a promote moves rows
        from synthex.app.branches import Branches

        for promotion in report.interrupted_promotes:
            Branches(app).promote(promotion.branch)  # an unreadable journal: one line, nothing repaired
    store = app.store
    if report.duplicate_ids:
        kept: dict[tuple[str, str], Record] = {}
        for row in store.records.all_rows_of(report.duplicate_ids):  # one copy per (id, branch), with its vector
            kept.setdefault((row["id"], row["branch"]), store.to_record(row))
        for branch in {b for _, b in kept}:
            store.records.delete_ids([i for i, b in kept if b == branch], branch=branch)  # every copy
        store.records.upsert(list(kept.values()), embed=False)
    dangling = dict(report.dangling)
    while dangling:  # deleting a record can leave its own descendants dangling: cascade
        store.records.delete_ids(list(dangling))
        dangling = dangling_sources(store.records.scan(["id", "sources"]))
    for run in app.runs(limit=100_000):
        if run.id in report.stuck_runs:
            app.mark_failed(run, "killed: found stuck in 'running' by synthex doctor")
    report.repaired = True
    return report
