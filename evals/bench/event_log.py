"""Dagster event log: the events of one recorded run written again, by Dagster's stock SQLite storage and by
the project's (synthex_assets/event_log.py), alternately, each into a fresh directory.

    python -m evals.bench.event_log PROJECT [--repeats 3]   # PROJECT: a project after its first `synthex run`

Prints wall and CPU seconds per storage and repeat, the load average, and a JSON line (issue 24).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from synthex.core.project import load_pipeline
from synthex_assets.dagster_internals import SqliteEventLogStorage
from synthex_assets.event_log import SqliteEventLog
from synthex_assets.instance import open_instance


def replay(storage_class: type, events: list) -> tuple[float, float]:
    root = tempfile.mkdtemp(prefix="synthex-bench-events-")
    storage = storage_class(root)
    wall, cpu = time.perf_counter(), time.process_time()
    for event in events:
        storage.store_event(event)
    out = time.perf_counter() - wall, time.process_time() - cpu
    storage.dispose()
    shutil.rmtree(root)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    pipe = load_pipeline(args.project)
    instance = open_instance(pipe)
    try:
        run = instance.get_runs()[-1]  # the first run: the full one
        events = [r.event_log_entry for r in instance.get_records_for_run(run.run_id).records]
    finally:
        instance.dispose()
        pipe.close()
    print(f"{len(events)} events of run {run.run_id}; load average {os.getloadavg()}", flush=True)
    figures: dict[str, list[tuple[float, float]]] = {"dagster": [], "synthex": []}
    for _ in range(args.repeats):
        for name, cls in (("dagster", SqliteEventLogStorage), ("synthex", SqliteEventLog)):
            figures[name].append(replay(cls, events))
            print(f"{name:<8} wall {figures[name][-1][0]:6.2f} s   CPU {figures[name][-1][1]:6.2f} s", flush=True)
    summary = {name: {"wall_p50": round(statistics.median(w for w, _ in rows), 3),
                      "cpu_p50": round(statistics.median(c for _, c in rows), 3)} for name, rows in figures.items()}
    print(json.dumps({"events": len(events), "repeats": args.repeats, "load_average": os.getloadavg(),
                      "storages": summary}))


if __name__ == "__main__":
    main()
