"""Many memories (projects) on one shared PostgreSQL-backed Dagster instance and one daemon: per memory, the
wall time to create it (export + pipeline.py), to `synthex run` it through the deployment's queue, and to
search it (one query, timed inside a process that opened only that memory); then the instance's tables and
row counts in PostgreSQL.

    python -m evals.bench.many_memories [--memories 10] [--namespaced]

Each memory is a small generated export (2 conversations, 1 month) with its own store and data dir; all
share one `synthex deploy init` home, one database, one code server and one daemon (evals/bench/instance.py).
``--namespaced``: each memory has its own namespace (``Pipeline(namespace="m<i>")``: its own asset keys and
partitions in the instance, docs/deploy.md); the dynamic partition definitions and asset keys the instance
then holds are counted too.
Prints p50/p95 per phase, the load average, the table counts and a JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evals.bench.instance import postgres_env, start_daemon, timed_run, wait_for_daemon
from evals.postgres_server import PostgresServer, start_postgres
from synthex.core.demo.generate import generate
from synthex.core.project import render_template

SEARCH = """
import json, sys, time
from synthex.core.project import load_pipeline
pipe = load_pipeline(sys.argv[1])
start = time.perf_counter()
hits = pipe.search("what did the user plan for the trip")
print(json.dumps({"seconds": time.perf_counter() - start, "hits": len(hits)}))
pipe.close()
"""


def make_memory(root: Path, index: int, namespaced: bool = False) -> Path:
    """Memory ``index``: its own export (seeded by index), pipeline name and project folder (and namespace)."""
    export = root / "exports" / "conversations.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(generate(conversations=2, months=1, seed=index)))
    project = root / "proj"
    project.mkdir()
    text = render_template(f"memory-{index}", [("chatgpt", str(export), "auto")], agent="bench")
    if namespaced:
        named = text.replace("agent='bench'", f"agent='bench', namespace='m{index}'", 1)
        assert named != text, "the template's Pipeline(...) line changed"
        text = named
    (project / "pipeline.py").write_text(text)
    return project


def timed_search(project: Path, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", SEARCH, str(project)], env=env, check=True, capture_output=True,
                          text=True, timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def pg_cursor(server: PostgresServer, db: str) -> Iterator[Any]:
    """A cursor on ``db`` of the bench's PostgreSQL server, closed with its connection."""
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", port=server.port, user=server.user, password=server.password,
                            dbname=db)
    try:
        with conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


def table_counts(server: PostgresServer, db: str) -> dict[str, int]:
    with pg_cursor(server, db) as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
        names = [row[0] for row in cur.fetchall()]
        counts = {}
        for name in names:
            cur.execute(f'SELECT count(*) FROM "{name}"')
            counts[name] = cur.fetchone()[0]
        return counts


def partition_definitions(server: PostgresServer, db: str) -> dict[str, int]:
    """Dynamic partitions definition name -> its keys, as the instance's table holds them."""
    with pg_cursor(server, db) as cur:
        cur.execute("SELECT partitions_def_name, count(*) FROM dynamic_partitions GROUP BY 1 ORDER BY 1")
        return dict(cur.fetchall())


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": statistics.median(ordered), "p95": p95, "n": len(ordered)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10)
    parser.add_argument("--namespaced", action="store_true", help="each memory its own namespace")
    args = parser.parse_args()
    server = start_postgres()
    times: dict[str, list[float]] = {"create": [], "run": [], "search": []}
    try:
        with tempfile.TemporaryDirectory(prefix="synthex-bench-many-") as tmp:
            start = time.perf_counter()
            first = make_memory(Path(tmp) / "m0", 0, args.namespaced)  # the deployment is initialised from memory 0
            first_created = time.perf_counter() - start
            env = postgres_env(server, Path(tmp), "many", first)
            env = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
            services = start_daemon(env, Path(tmp))
            try:
                wait_for_daemon(env)
                for index in range(args.memories):
                    start = time.perf_counter()
                    project = first if index == 0 else make_memory(Path(tmp) / f"m{index}", index, args.namespaced)
                    created = first_created if index == 0 else time.perf_counter() - start
                    ran = timed_run(project, {**env, "SYNTHEX_PROJECT": str(project)})
                    found = timed_search(project, env)
                    assert found["hits"] > 0, f"memory {index}: no hits"
                    times["create"].append(created)
                    times["run"].append(ran)
                    times["search"].append(found["seconds"])
                    print(f"memory {index}: create {created:.2f} s, run {ran:.1f} s, search "
                          f"{found['seconds'] * 1000:.0f} ms (load {os.getloadavg()[0]:.1f})", flush=True)
            finally:
                for service in services:
                    service.terminate()
                    service.wait(timeout=60)
            counts = table_counts(server, "many")
            partition_defs = partition_definitions(server, "many")
    finally:
        server.stop()
    summary = {phase: quantiles(values) for phase, values in times.items()}
    for phase, q in summary.items():
        print(f"{phase:<7} p50 {q['p50']:.3f} s  p95 {q['p95']:.3f} s  (n={q['n']})")
    print(f"instance: {len(counts)} tables, {sum(counts.values())} rows; largest: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:6]))
    print(f"dynamic partitions: {len(partition_defs)} definitions, {sum(partition_defs.values())} keys")
    print(json.dumps({"memories": args.memories, "namespaced": args.namespaced, "summary": summary, "tables": counts,
                      "partition_defs": partition_defs}))


if __name__ == "__main__":
    main()
