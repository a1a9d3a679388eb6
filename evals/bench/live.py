"""Live memory figures: table-source throughput, sensor tick cost on an unchanged table, and the time
from a change (a row, a file, a stream line) to its record being searchable.

    python -m evals.bench.live                    # 100,000-row tables, 20 idle ticks each
    python -m evals.bench.live --rows 20000 --ticks 10
    python -m evals.bench.live --daemon --changes 5   # through `synthex ui`'s daemon (evals/bench/live_daemon.py)

Everything runs as the product runs it: a project whose pipeline.py names a DuckDB table (watermark
mode), a SQLite table (per-row hash mode), a folder and a stream; the sensors of its Definitions are
evaluated against a real Dagster instance, and the runs they request are executed in process (the
daemon would launch the same runs; its interval, ``Pipeline(sensor_interval_s=)``, adds at most that much;
``--daemon`` measures through the real daemon instead).
Source records get no vectors here (no search output names them), so the figures are about the
source path, not the embedder (docs/benchmarks.md has the embedder's own figures).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

PIPELINE = '''
from synthex import Pipeline

pipeline = Pipeline("live-bench", agent="bench")
pipeline.source("tickets", table="tickets", dsn="duckdb:///crm.duckdb", pk="id", updated_at="updated_at",
                created_at="opened_at")
pipeline.source("contacts", table="contacts", dsn="sqlite:///crm.sqlite", pk="id", created_at="created")
pipeline.source("notes", folder="notes")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("digest", from_="inbox", fn=lambda r: r.content)
pipeline.output("search", from_=["digest"], surface="search")
'''
MONTHS = [f"2024-{m:02d}" for m in range(1, 13)]


def build_project(root: Path, rows: int) -> None:
    import duckdb

    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    (root / "notes").mkdir()
    (root / "notes" / "2024-01-02-kickoff.md").write_text("Kickoff: the roadmap for the year")
    (root / "inbox.jsonl").write_text(json.dumps({"id": "m0", "text": "first message", "created_at": "2024-01-01"}) + "\n")
    with duckdb.connect(str(root / "crm.duckdb")) as db:
        db.execute(f"""CREATE TABLE tickets AS SELECT i AS id, 'ticket ' || i || ': ' || (['printer', 'vpn', 'laptop',
                       'badge'])[1 + i % 4] || ' issue on floor ' || (i % 9) AS subject,
                       TIMESTAMP '2024-01-01' + INTERVAL (i % 360) DAY AS opened_at,
                       TIMESTAMP '2024-01-01' + INTERVAL (i % 360) DAY AS updated_at FROM range({rows}) t(i)""")
    with sqlite3.connect(root / "crm.sqlite") as db:
        db.execute("CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT, city TEXT, created TEXT)")
        db.executemany("INSERT INTO contacts VALUES (?, ?, ?, ?)",
                       ((i, f"person {i}", f"city {i % 97}", f"{MONTHS[i % 12]}-15") for i in range(rows)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Bench:
    def __init__(self, root: Path, instance) -> None:
        from synthex.core.project import load_pipeline
        from synthex_assets.definitions import build_definitions

        self.root, self.instance = root, instance
        self.pipeline = load_pipeline(root)
        self.defs = build_definitions(self.pipeline)

    def tick(self, source: str):
        from dagster import SensorResult, build_sensor_context

        from synthex_assets.sensors import sensor_name

        context = build_sensor_context(instance=self.instance, resources={"cdc": self.defs.resources["cdc"]},
                                       definitions=self.defs)
        result = self.defs.get_sensor_def(sensor_name(source))(context)
        if isinstance(result, SensorResult):
            for request in result.dynamic_partitions_requests or []:
                self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return result

    def execute(self, result) -> None:
        job = self.defs.resolve_job_def("live_bench")
        for request in getattr(result, "run_requests", None) or []:
            job.execute_in_process(instance=self.instance, tags=request.tags, asset_selection=request.asset_selection)

    def until_searchable(self, source: str, query: str, expect: str, step: str) -> dict[str, float]:
        started = time.monotonic()
        result = self.tick(source)
        ticked = time.monotonic()
        self.execute(result)
        ran = time.monotonic()
        hits = self.pipeline.search(query, step=step, mode="bm25", k=5)
        found = time.monotonic()
        assert any(expect in h.content for h in hits), f"{expect!r} not found after the run"
        return {"tick_s": ticked - started, "run_s": ran - ticked, "search_s": found - ran, "total_s": found - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help="table rows (default 100,000; --daemon: 200)")
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--work", default=None, help="work dir (default: a temp dir)")
    parser.add_argument("--daemon", action="store_true",
                        help="change -> searchable through `synthex ui`'s daemon (--rows default: 200)")
    parser.add_argument("--changes", type=int, default=5, help="with --daemon: changes per kind")
    args = parser.parse_args()
    if args.daemon:
        from evals.bench.live_daemon import run_daemon_bench

        work = Path(args.work or tempfile.mkdtemp(prefix="bench-live-daemon-"))
        rows = args.rows if args.rows is not None else 200
        figures = run_daemon_bench(work, rows, args.changes)
        (work / "bench_live_daemon.json").write_text(json.dumps(figures, indent=2))
        print(f"figures: {work / 'bench_live_daemon.json'}")
        return
    import logging

    from dagster import instance_for_test

    from synthex.core.definition import SENSOR_INTERVAL_S
    from synthex.core.importers.tables import read_items

    logging.getLogger("dagster").setLevel(logging.WARNING)
    args.rows = args.rows if args.rows is not None else 100_000
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-live-"))
    root = work / "proj"
    build_project(root, args.rows)
    out: dict[str, object] = {"rows": args.rows, "sensor_interval_s": SENSOR_INTERVAL_S}
    with instance_for_test() as instance:
        bench = Bench(root, instance)
        for source in ("tickets", "contacts"):
            spec = bench.pipeline.steps[source].table
            started = time.monotonic()
            read_items(spec, root)
            read_s = time.monotonic() - started
            started = time.monotonic()
            result = bench.tick(source)
            tick_s = time.monotonic() - started
            started = time.monotonic()
            bench.execute(result)
            run_s = time.monotonic() - started
            written = len(bench.pipeline.records(source))
            assert written == args.rows, (source, written)
            out[f"{source}_first_sync"] = {"read_rows_per_s": round(args.rows / read_s), "first_tick_s": round(tick_s, 2),
                                           "run_s": round(run_s, 1), "rows_per_s_through_run": round(args.rows / run_s)}
            print(f"{source}: read {args.rows / read_s:,.0f} rows/s; first tick (CDC + plan) {tick_s:.1f}s; "
                  f"run {run_s:.1f}s = {args.rows / run_s:,.0f} rows/s into records", flush=True)
        for source in ("tickets", "contacts", "notes", "inbox"):
            bench.execute(bench.tick(source))  # every source in sync before idle ticks
            times = []
            for _ in range(args.ticks):
                started = time.monotonic()
                result = bench.tick(source)
                times.append(time.monotonic() - started)
                assert not getattr(result, "run_requests", None), f"{source}: an idle tick requested a run"
            out[f"{source}_idle_tick"] = {"p50_s": round(statistics.median(times), 4), "p95_s": round(pct(times, 0.95), 4)}
            print(f"{source}: idle tick p50 {statistics.median(times) * 1000:.0f} ms, p95 {pct(times, 0.95) * 1000:.0f} ms "
                  f"({'rows: ' + format(args.rows, ',') if source in ('tickets', 'contacts') else 'small'})", flush=True)

        import duckdb

        with duckdb.connect(str(root / "crm.duckdb")) as db:
            db.execute("UPDATE tickets SET subject = 'ticket 7: the aquarium pump is humming', "
                       "updated_at = TIMESTAMP '2025-01-01' WHERE id = 7")
        row = bench.until_searchable("tickets", "aquarium pump", "aquarium", "tickets")
        with sqlite3.connect(root / "crm.sqlite") as db:
            db.execute("UPDATE contacts SET city = 'Zanzibar' WHERE id = 11")
        hashed = bench.until_searchable("contacts", "Zanzibar", "Zanzibar", "contacts")
        (root / "notes" / "2024-03-04-retro.md").write_text("Retro: the espresso machine needs descaling")
        note = bench.until_searchable("notes", "espresso descaling", "espresso", "notes")
        from synthex.core.sources.stream import append_lines

        append_lines(root / "inbox.jsonl", [{"id": "m1", "text": "the harbour ferry leaves at nine",
                                             "created_at": "2024-03-05T08:00:00Z"}])
        line = bench.until_searchable("inbox", "harbour ferry", "ferry", "digest")
        for name, figures in (("changed DuckDB row (watermark)", row), ("changed SQLite row (hash)", hashed),
                              ("new note file", note), ("new stream line (+ transform, embedded)", line)):
            out[f"latency_{name}"] = {k: round(v, 2) for k, v in figures.items()}
            print(f"{name}: searchable {figures['total_s']:.1f}s after the tick started (tick {figures['tick_s']:.2f}s, "
                  f"run {figures['run_s']:.1f}s, search {figures['search_s']:.2f}s); plus up to "
                  f"{SENSOR_INTERVAL_S}s until the daemon's next tick", flush=True)
    (work / "bench_live.json").write_text(json.dumps(out, indent=2))
    print(f"figures: {work / 'bench_live.json'}")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
