"""N memories on one shared PostgreSQL server, one project and one database each (docs/deploy.md, "Many
memories on one PostgreSQL server"): per memory, the time to set it up, its first `synthex run` and a
`synthex search`, as p50 / p95 over the N memories, and each memory's daemon's resident memory and CPU.

    python -m evals.bench.team_memories [--memories 10]

Starts its own PostgreSQL server (evals/postgres_server.py). Per memory, one after the other: `CREATE
DATABASE`, a small project (2 conversations, 1 month, a seed of its own), `synthex deploy init`, its daemon
(kept running: memory i is set up, run and searched with the daemons of memories 1..i-1 still up), timed
until the daemon's heartbeat is in its database ("init"); then its first `synthex run` ("run", through its
own queue) and one hybrid `synthex search` in a new process ("search"). At the end, each daemon's CPU
over its lifetime (it runs the whole time, the memory's own run only for a part of it). Prints each
memory's figures and the load average, then a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evals.bench.processes import cpu_s, rss_mb
from evals.bench_instance import wait_for_daemon
from evals.postgres_server import PostgresServer, free_port, start_postgres
from synthex.core.demo.generate import generate
from synthex.core.project import render_template

QUERY = "which database did the user choose for search"


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], env=env, check=True,
                          capture_output=True, text=True, timeout=600)


def set_up_memory(server: PostgresServer, root: Path, index: int, base_env: dict[str, str]
                  ) -> tuple[dict[str, str], subprocess.Popen]:
    """Memory ``index``: its database, project, deployment folder and running daemon."""
    db = f"memory_{index}"
    server.create_database(db)
    export = root / "exports" / "conversations.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(generate(conversations=2, months=1, seed=100 + index)))
    project = root / "memory"
    project.mkdir()
    (project / "pipeline.py").write_text(render_template(f"memory-{index}", [("chatgpt", str(export), "auto")],
                                                         agent="bench"))
    home = root / "deploy"
    cli(base_env, "deploy", "init", str(home), "--project", str(project), "--grpc-host", "127.0.0.1",
        "--grpc-port", str(free_port()))
    env = {**base_env, **server.env(), "DAGSTER_PG_DB": db, "SYNTHEX_DAGSTER_HOME": str(home),
           "DAGSTER_HOME": str(home), "SYNTHEX_PROJECT": str(project)}
    with open(root / "daemon.log", "wb") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-w", str(home / "workspace.yaml")],
                                  env=env, cwd=project, stdout=log, stderr=subprocess.STDOUT)
    return env, daemon


def percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p95 (nearest rank: with 10 values the p95 is the largest)."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, -(-95 * len(ordered) // 100) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10)
    args = parser.parse_args()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SYNTHEX_", "DAGSTER_"))}
    server = start_postgres()
    daemons: list[subprocess.Popen] = []
    started: list[float] = []
    figures: dict[str, list[float]] = {"init": [], "run": [], "search": [], "daemon_rss_mb": []}
    try:
        with tempfile.TemporaryDirectory(prefix="synthex-bench-team-") as tmp:
            for index in range(args.memories):
                start = time.perf_counter()
                env, daemon = set_up_memory(server, Path(tmp) / f"m{index}", index, base_env)
                daemons.append(daemon)
                started.append(time.monotonic())
                wait_for_daemon(env)
                init = time.perf_counter() - start
                start = time.perf_counter()
                cli(env, "run", "--project", env["SYNTHEX_PROJECT"])
                run = time.perf_counter() - start
                start = time.perf_counter()
                hits = json.loads(cli(env, "search", QUERY, "--json", "--project", env["SYNTHEX_PROJECT"]).stdout)
                search = time.perf_counter() - start
                assert hits["hits"], f"memory {index}: no hit"
                runs = json.loads(cli(env, "runs", "--json", "--project", env["SYNTHEX_PROJECT"]).stdout)
                assert len(runs) == 1, f"memory {index} lists {len(runs)} runs: only its own one is expected"
                rss = rss_mb(daemon.pid)
                for name, value in (("init", init), ("run", run), ("search", search), ("daemon_rss_mb", rss)):
                    figures[name].append(value)
                print(f"memory {index + 1}/{args.memories}: init {init:5.1f} s, run {run:5.1f} s, "
                      f"search {search:4.1f} s, daemon {rss:.0f} MB (load {os.getloadavg()[0]:.1f})", flush=True)
        # What the daemons cost while the memories were idle: each one's CPU over its lifetime so far.
        idle = [cpu_s(d.pid) / (time.monotonic() - t) * 100 for d, t in zip(daemons, started, strict=True)]
        figures["daemon_cpu_pct"] = idle
        print(f"daemons' CPU over their lifetime: {', '.join(f'{v:.1f}' for v in idle)} % of a core", flush=True)
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
        server.stop()
    for name, values in figures.items():
        p50, p95 = percentiles(values)
        print(f"{name:<14} p50 {p50:6.1f}  p95 {p95:6.1f}  (n={len(values)})")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
