"""Runs and their per-partition stats: the ``runs`` and ``run_steps`` tables."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from synthex.core.record import Run, RunStats, RunStatus
from synthex_resources.store import filters
from synthex_resources.store.schemas import RUN_STEPS, RUN_STEPS_SCHEMA, RUNS, RUNS_SCHEMA
from synthex_resources.store.tables import LanceTables


class RunLog:
    def __init__(self, tables: LanceTables) -> None:
        self._tables = tables

    def save(self, run: Run) -> None:
        self._tables.upsert_rows(RUNS, RUNS_SCHEMA, [{"id": run.id, "pipeline": run.pipeline, "branch": run.branch,
                                                      "status": run.status, "started_at": run.started_at,
                                                      "data": json.dumps(run.to_dict())}])

    def running(self, branch: str | None = None, except_id: str | None = None) -> list[Run]:
        """Runs still marked running (of ``branch``, other than ``except_id``)."""
        where = filters.runs_where(RunStatus.RUNNING, branch, except_id)
        return [Run.from_dict(json.loads(row["data"])) for row in self._tables.read(RUNS, where)]

    def record_step_stats(self, run_id: str, pipeline: str, step: str, recorded_at: str,
                          per_partition: list[tuple[str, str, RunStats]]) -> None:
        """Stats of one step's (branch, period, stats) partitions in a run, one commit."""
        if not per_partition:
            return
        rows = [{"id": f"{run_id}/{step}/{branch}/{period}", "run_id": run_id, "pipeline": pipeline,
                 "branch": branch, "step": step, "period": period, "recorded_at": recorded_at,
                 "stats": json.dumps(stats.to_dict())} for branch, period, stats in per_partition]
        self._tables.upsert_rows(RUN_STEPS, RUN_STEPS_SCHEMA, rows)

    def step_stats(self, run_id: str) -> dict[str, RunStats]:
        out: dict[str, RunStats] = {}
        for row in self._tables.read(RUN_STEPS, filters.equals(run_id=run_id)):
            out.setdefault(row["step"], RunStats()).add(RunStats(**json.loads(row["stats"])))
        return out

    def recent(self, limit: int = 20) -> list[Run]:
        """Runs started from the CLI/Python, plus runs launched elsewhere (e.g. the Dagster UI), newest first."""
        found: dict[str, Run] = {}
        for row in self._tables.read(RUNS):
            found[row["id"]] = Run.from_dict(json.loads(row["data"]))
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self._tables.read(RUN_STEPS):
            if row["run_id"] not in found:
                by_run[row["run_id"]].append(row)
        for run_id, rows in by_run.items():
            run = Run(id=run_id, pipeline=rows[0]["pipeline"], branch=rows[0]["branch"],
                      steps=sorted({r["step"] for r in rows}), status=RunStatus.COMPLETED,
                      started_at=min(r["recorded_at"] for r in rows),
                      completed_at=max(r["recorded_at"] for r in rows))
            for r in rows:
                stats = RunStats(**json.loads(r["stats"]))
                run.stats.add(stats)
                run.step_stats.setdefault(r["step"], RunStats()).add(stats)
            found[run_id] = run
        return sorted(found.values(), key=lambda r: r.started_at, reverse=True)[:limit]
