"""Change -> searchable through the real daemon: ``synthex ui`` runs (webserver, daemon, code server),
a stream line is appended, a note written, a table row changed, and each is timed until ``search``
finds it, with the breakdown Dagster's own records give:

- ``tick_s``: the change until the run the source sensor requested was created (the wait for the next
  tick, plus the tick itself);
- ``queue_s``: created until started (the run coordinator's queue and the launch);
- ``run_s``: started until finished (the run's process: imports, the steps, Dagster's events);
- ``search_s``: finished until the bench's ``search`` found the text (one query; the bench polls the
  run's status every 0.1 s, then searches).

    python -m evals.bench.live --daemon --changes 5            # the demo's size
    python -m evals.bench.live --daemon --changes 5 --rows 100000

The project: the demo's ChatGPT export (200 conversations) -> transcripts, a notes folder, a SQLite table
(``updated_at`` watermark; SQLite so the bench's writes never meet DuckDB's single-writer lock while a
tick reads), a stream -> a transform; a search output over all four (embedded). ``synthex run`` brings it
in sync before the daemon starts; one unmeasured change per kind warms it up.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PIPELINE = '''
from synthex import Pipeline

pipeline = Pipeline("live-daemon-bench", agent="bench")
pipeline.source("chatgpt", file="chatgpt.json", format="chatgpt-export")
pipeline.transform("transcripts", from_="chatgpt", fn=lambda r: r.content)
pipeline.source("tickets", table="tickets", dsn="sqlite:///crm.sqlite", pk="id", updated_at="updated_at",
                created_at="opened_at")
pipeline.source("notes", folder="notes")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("digest", from_="inbox", fn=lambda r: r.content)
pipeline.output("search", from_=["transcripts", "tickets", "notes", "digest"], surface="search")
'''
RUN_DONE = {"SUCCESS", "FAILURE", "CANCELED"}
# Tickets beyond this many repeat an earlier ticket's text (each row is still its own record): the store
# embeds each distinct text once, so a 100k-row project is built in minutes, not the hour 100k
# embeddings take on a loaded 2-core machine. What is measured (one changed row) is embedded as usual.
DISTINCT_TICKETS = 2_000


def subject(i: int) -> str:
    return f"ticket {i}: {('printer', 'vpn', 'laptop', 'badge')[i % 4]} issue on floor {i % 9}"


def build_project(root: Path, rows: int) -> None:
    from synthex.core.project import DEMO_EXPORT
    from synthex.core.sources.stream import append_lines

    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    (root / "chatgpt.json").write_bytes(DEMO_EXPORT.read_bytes())
    (root / "notes").mkdir()
    for i in range(20):
        (root / "notes" / f"2024-{1 + i % 12:02d}-{1 + i:02d}-note.md").write_text(f"Note {i}: the weekly plan, item {i}")
    append_lines(root / "inbox.jsonl", [{"id": "m0", "text": "first message", "created_at": "2024-01-01T08:00:00Z"}])
    with sqlite3.connect(root / "crm.sqlite") as db:
        db.execute("CREATE TABLE tickets (id INTEGER PRIMARY KEY, subject TEXT, opened_at TEXT, updated_at TEXT)")
        db.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?)",
                       ((i, subject(i % DISTINCT_TICKETS),
                         f"2024-{1 + i % 12:02d}-15 09:00:00", f"2024-{1 + i % 12:02d}-15 09:00:00")
                        for i in range(rows)))


def word(n: int) -> str:
    """A word no record has: the only hit of its BM25 query."""
    letters = "bcdfghjklmnpqrstvwxz"
    out = ""
    n += 1000
    while n:
        n, d = divmod(n, len(letters))
        out += letters[d]
    return "zy" + out + "qu"


@dataclass
class Change:
    kind: str
    source: str
    step: str
    make: Callable[[Path, int, str], None]


def _line(root: Path, n: int, w: str) -> None:
    from synthex.core.sources.stream import append_lines

    append_lines(root / "inbox.jsonl", [{"id": f"b{n}", "text": f"the harbour ferry {w} leaves at nine",
                                         "created_at": "2024-03-05T08:00:00Z"}])


def _note(root: Path, n: int, w: str) -> None:
    path = root / "notes" / f"2024-03-{1 + n % 28:02d}-retro-{n}.md"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"Retro {n}: the espresso machine {w} needs descaling")
    tmp.rename(path)  # whole or absent: a tick never reads half a note


def _row(root: Path, n: int, w: str) -> None:
    with sqlite3.connect(root / "crm.sqlite") as db:
        changed = db.execute("UPDATE tickets SET subject = ?, updated_at = ? WHERE id = (SELECT min(id) + ? % count(*) "
                             "FROM tickets)", (f"ticket {n}: the aquarium pump {w} is humming",
                                               time.strftime("%Y-%m-%d %H:%M:%S"), n)).rowcount
    assert changed == 1, f"no ticket row changed for change {n}"


CHANGES = [Change("stream line", "inbox", "digest", _line), Change("new note", "notes", "notes", _note),
           Change("changed table row", "tickets", "tickets", _row)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"synthex ui exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/server_info", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer in {timeout:.0f}s")


class Daemon:
    """``synthex ui`` on the project, as a user starts it; stopped (its process group) on exit."""

    def __init__(self, root: Path, log: Path) -> None:
        self.root, self.port, self.log = root, free_port(), log
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Daemon:
        out = self.log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "ui", "--project", str(self.root),
                                      "--port", str(self.port)], stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        wait_up(f"http://127.0.0.1:{self.port}", self.proc, 300)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Watch:
    """The bench's view: the project's Dagster instance (run records) and its search."""

    def __init__(self, root: Path) -> None:
        from synthex.core.project import load_pipeline
        from synthex_assets.instance import open_instance

        self.pipeline = load_pipeline(root)
        self.instance = open_instance(self.pipeline)

    def run_after(self, source: str, since: float, timeout: float):
        from dagster import RunsFilter

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            records = self.instance.get_run_records(RunsFilter(tags={"synthex/trigger": f"sensor:{source}"}), limit=5)
            fresh = [r for r in records if r.create_timestamp.timestamp() >= since]
            if fresh and fresh[-1].dagster_run.status.value in RUN_DONE:
                return fresh[-1]
            time.sleep(0.1)
        raise TimeoutError(f"{source}: no finished sensor run within {timeout:.0f}s")

    def searchable(self, query: str, step: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(query in h.content for h in self.pipeline.search(query, step=step, mode="bm25", k=5)):
                return time.time()
            time.sleep(0.1)
        raise TimeoutError(f"{query!r} not searchable in {step} within {timeout:.0f}s")


def one(watch: Watch, root: Path, change: Change, n: int, timeout: float) -> dict[str, float]:
    w = word(n)
    changed = time.time()
    change.make(root, n, w)
    record = watch.run_after(change.source, changed, timeout)
    if record.dagster_run.status.value != "SUCCESS":
        raise RuntimeError(f"{change.kind}: run {record.dagster_run.run_id} {record.dagster_run.status.value}")
    found = watch.searchable(w, change.step, 60)
    created = record.create_timestamp.timestamp()
    return {"tick_s": created - changed, "queue_s": record.start_time - created,
            "run_s": record.end_time - record.start_time, "search_s": found - record.end_time,
            "total_s": found - changed}


def summarize(samples: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {k: {"p50": round(statistics.median(s[k] for s in samples), 2), "max": round(max(s[k] for s in samples), 2)}
            for k in samples[0]}


def run_daemon_bench(work: Path, rows: int, changes: int, timeout: float = 180) -> dict[str, object]:
    """``work/proj`` is built (and synced) when missing, reused as it is otherwise (a 100k-row project's
    first sync embeds every row: minutes); each bench's words are new, so a reused project's earlier
    changes never answer a query."""
    from synthex_assets.instance import INSTANCE_YAML

    root = work / "proj"
    if not (root / "pipeline.py").exists():
        build_project(root, rows)
    salt = 100_000 * (1 + int(time.time()) % 9_000)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "run", "--project", str(root)], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"synthex run (first sync): {time.monotonic() - started:.1f}s", flush=True)
    out: dict[str, object] = {"rows": rows, "changes_per_kind": changes, "load_before": os.getloadavg()}
    rng = random.Random(7)
    with Daemon(root, work / "ui.log"):
        watch = Watch(root)
        out["instance_yaml"] = INSTANCE_YAML
        for i, change in enumerate(CHANGES):  # warm-up, unmeasured: the daemon's first ticks and runs
            one(watch, root, change, salt + 900 + i, timeout * 2)
        samples: dict[str, list[dict[str, float]]] = {c.kind: [] for c in CHANGES}
        for n in range(changes):
            for change in CHANGES:
                time.sleep(rng.uniform(0, 3))  # the change lands at a random phase of the tick loop
                figures = one(watch, root, change, salt + 1000 * (1 + CHANGES.index(change)) + n, timeout)
                samples[change.kind].append(figures)
                print(f"{change.kind}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
                      + f" (load {os.getloadavg()[0]:.2f})", flush=True)
        watch.instance.dispose()
    out["load_after"] = os.getloadavg()
    out["samples"] = samples
    out["summary"] = {kind: summarize(s) for kind, s in samples.items()}
    for kind, figures in out["summary"].items():  # type: ignore[union-attr]
        print(f"{kind}: " + "; ".join(f"{k} p50 {v['p50']:.1f} / max {v['max']:.1f}" for k, v in figures.items()))
    return out
