"""A `synthex run`'s wall time on the project's own SQLite instance against a shared PostgreSQL instance
(`synthex deploy init`, docs/deploy.md): the same small project (12 conversations, 3 months), a fresh copy
and a fresh instance per repeat, SQLite and PostgreSQL alternately; then a second, no-change run on each.

    python -m evals.bench.instance [--repeats 3]

Starts its own PostgreSQL server (evals/postgres_server.py; a database per repeat) and, for each
PostgreSQL repeat, the deployment's code server and daemon (a `synthex run` there waits its turn in Dagster's run queue, so
the PostgreSQL figure includes the queue's dequeue; timed once the daemon's heartbeat is in the instance). Prints each run's wall
seconds, the load average, and a JSON line.
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

from evals.postgres_server import PostgresServer, free_port, start_postgres
from synthex.core.demo.generate import generate
from synthex.core.project import render_template


def make_project(root: Path, conversations: int = 12, months: int = 3, store_uri: str | None = None) -> Path:
    """The benchmark's project over a generated export; ``store_uri``: its records there (e.g. ``s3://...``)."""
    export = root / "exports" / "conversations.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(generate(conversations=conversations, months=months, seed=3)))
    project = root / "proj"
    project.mkdir()
    text = render_template("bench-memory", [("chatgpt", str(export), "auto")], agent="bench")
    if store_uri is not None:
        text = text.replace("Pipeline('bench-memory', agent='bench')",
                            f"Pipeline('bench-memory', agent='bench', store_uri={store_uri!r})")
        assert store_uri in text, "the template's Pipeline(...) line changed"
    (project / "pipeline.py").write_text(text)
    return project


def timed_run(project: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "run", "--project", str(project)], env=env,
                   check=True, capture_output=True, timeout=600)
    return time.perf_counter() - start


def postgres_env(server: PostgresServer, root: Path, db: str, project: Path) -> dict[str, str]:
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", port=server.port, user=server.user, password=server.password,
                            dbname="postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{db}"')
    conn.close()
    home = root / "deploy"
    port = free_port()
    subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "deploy", "init", str(home), "--project",
                    str(project), "--grpc-host", "127.0.0.1", "--grpc-port", str(port)], check=True,
                   capture_output=True, timeout=120)
    return {**os.environ, **server.env(), "DAGSTER_PG_DB": db, "SYNTHEX_DAGSTER_HOME": str(home),
            "SYNTHEX_PROJECT": str(project), "SYNTHEX_GRPC_PORT": str(port)}


def start_daemon(env: dict[str, str], root: Path) -> list[subprocess.Popen]:
    """The deployment's code server and daemon (its queue hands `synthex run`'s runs back:
    synthex_assets/queued_runs.py); without the code server the daemon's loop waits on loading it."""
    home = Path(env["SYNTHEX_DAGSTER_HOME"])
    daemon_env = {**env, "DAGSTER_HOME": str(home)}
    started = []
    for name, args in (("code-server", ["dagster", "api", "grpc", "-m", "synthex_assets.code_location", "-h",
                                         "127.0.0.1", "-p", env["SYNTHEX_GRPC_PORT"]]),
                       ("daemon", ["dagster._daemon", "run", "-w", str(home / "workspace.yaml")])):
        with open(root / f"{name}.log", "wb") as log:
            started.append(subprocess.Popen([sys.executable, "-m", *args], env=daemon_env, cwd=env["SYNTHEX_PROJECT"],
                                            stdout=log, stderr=subprocess.STDOUT))
    return started


WAIT_FOR_DAEMON = """
import os, sys, time
from dagster import DagsterInstance
from synthex_assets.queued_runs import queue_daemon_alive
instance = DagsterInstance.from_config(os.environ["SYNTHEX_DAGSTER_HOME"])
while not queue_daemon_alive(instance):
    time.sleep(1)
"""


def wait_for_daemon(env: dict[str, str], timeout: float = 300) -> None:
    """Until the daemon's queue loop has written its heartbeat to the instance."""
    subprocess.run([sys.executable, "-c", WAIT_FOR_DAEMON], env=env, check=True, timeout=timeout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SYNTHEX_"))}
    server = start_postgres()
    results: dict[str, dict[str, list[float]]] = {"sqlite": {"first": [], "again": []},
                                                  "postgres": {"first": [], "again": []}}
    try:
        with tempfile.TemporaryDirectory(prefix="synthex-bench-instance-") as tmp:
            for repeat in range(args.repeats):
                for kind in ("sqlite", "postgres"):
                    root = Path(tmp) / f"{kind}-{repeat}"
                    project = make_project(root)
                    env = (postgres_env(server, root, f"bench{repeat}", project) if kind == "postgres"
                           else dict(base_env))
                    # On the deployment a `synthex run` waits in Dagster's run queue: its daemon must run.
                    services = start_daemon(env, root) if kind == "postgres" else []
                    try:
                        if services:  # timed from a running daemon, not from its start-up
                            wait_for_daemon(env)
                        first, again = timed_run(project, env), timed_run(project, env)
                    finally:
                        for service in services:
                            service.terminate()
                            service.wait(timeout=60)
                    results[kind]["first"].append(first)
                    results[kind]["again"].append(again)
                    print(f"{kind:<8} repeat {repeat + 1}: first run {first:6.1f} s, no-change run {again:5.1f} s "
                          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        server.stop()
    for kind, runs in results.items():
        print(f"{kind:<8} median: first {statistics.median(runs['first']):.1f} s, "
              f"no-change {statistics.median(runs['again']):.1f} s")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
