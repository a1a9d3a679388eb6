"""``synthex run --workers N`` on a large chat export: wall time and records/s of a first ingest with 1 and 2
workers, back to back, and whether the two records tables are the same.

    python -m evals.bench.run_workers [--turns 1000] [--workers 1 2]

The export: a ChatGPT export built from the LongMemEval dev haystacks
(/work/shared/data/longmemeval/longmemeval_s_dev.json.gz), one conversation per distinct haystack session
(dated by the haystack), until it holds ``--turns`` turns. The project: ``synthex init --template
conversational`` over it (every turn a record; ``turns-in-context``, the searched step, embeds each turn
with the one before it: the step the workers write). Each ``synthex run`` is a fresh process on a fresh
project, as a user runs it; its wall time includes the process's start, its CPU seconds its workers'.
Prints one line per run, whether
the tables are equal (every column but the run's id and time), the load average, and a JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file

DATA = shared_data_file(LONGMEMEVAL_S_DEV)
SEARCHED = "turns-in-context"
RUN_SPECIFIC = ("run_id", "created_at")


def chat_export(turns: int) -> list[dict[str, Any]]:
    """ChatGPT-export conversations from the dev haystacks' sessions (each once, in file order) holding at
    least ``turns`` turns in all."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    total = 0
    for question in json.load(gzip.open(DATA)):
        for sid, date, session in zip(question["haystack_session_ids"], question["haystack_dates"],
                                      question["haystack_sessions"], strict=True):
            if sid in seen or total >= turns:
                continue
            seen.add(sid)
            out.append(conversation(sid, datetime.strptime(date[:10] + date[-6:], "%Y/%m/%d %H:%M").timestamp(),
                                    [(t["role"], t["content"]) for t in session]))
            total += len(session)
    return out


def conversation(sid: str, when: float, turns: list[tuple[str, str]]) -> dict[str, Any]:
    """One session as a ChatGPT export's conversation: a chain of message nodes, a second apart."""
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"{sid}/{n}")) for n in range(len(turns) + 1)]
    mapping: dict[str, Any] = {ids[0]: {"id": ids[0], "message": None, "parent": None, "children": []}}
    for n, (role, text) in enumerate(turns, start=1):
        mapping[ids[n]] = {"id": ids[n], "parent": ids[n - 1], "children": [], "message": {
            "id": ids[n], "author": {"role": role, "name": None, "metadata": {}}, "create_time": when + n,
            "content": {"content_type": "text", "parts": [text]}, "status": "finished_successfully",
            "metadata": {}}}
        mapping[ids[n - 1]]["children"].append(ids[n])
    return {"title": sid, "create_time": when, "update_time": when + len(turns), "mapping": mapping,
            "current_node": ids[-1], "conversation_id": str(uuid.uuid5(uuid.NAMESPACE_URL, sid)), "id": sid}


def table(root: Path) -> list[dict[str, Any]]:
    import lance

    rows = lance.dataset(str(root / ".synthex" / "lancedb" / "records.lance")).to_table().to_pylist()
    kept = [json.loads(json.dumps({k: v for k, v in r.items() if k not in RUN_SPECIFIC}).replace(str(root), "<root>"))
            for r in rows]
    return sorted(kept, key=lambda r: (r["step"], r["id"], r["branch"]))


def main() -> None:
    from synthex.core.project import render_template

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="synthex-run-workers-"))
    try:
        export = work / "export" / "conversations.json"
        export.parent.mkdir()
        export.write_text(json.dumps(chat_export(args.turns)), encoding="utf-8")
        body = render_template("lme-export", [("chat", str(export), "chat-turns")], agent="bench",
                               template="conversational")
        results: dict[str, dict[str, Any]] = {}
        tables: dict[int, list[dict[str, Any]]] = {}
        for workers in args.workers:
            root = work / f"workers-{workers}"
            root.mkdir()
            (root / "pipeline.py").write_text(body, encoding="utf-8")
            load_before = os.getloadavg()
            cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([str(Path(sys.executable).parent / "synthex"), "run", "--workers", str(workers),
                            "--project", str(root)], check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN)  # the run and its workers (waited for by it)
            cpu_s = cpu.ru_utime + cpu.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
            tables[workers] = table(root)
            records = len(tables[workers])
            searched = sum(1 for r in tables[workers] if r["step"] == SEARCHED)
            results[str(workers)] = {"wall_s": round(wall, 1), "records": records, "embedded": searched,
                                     "cpu_s": round(cpu_s, 1), "records_per_s": round(records / wall, 1),
                                     "embedded_per_s": round(searched / wall, 1),
                                     "load_before": [round(x, 2) for x in load_before],
                                     "load_after": [round(x, 2) for x in os.getloadavg()]}
            print(f"--workers {workers}: {records} records ({searched} embedded) in {wall:.1f} s = "
                  f"{records / wall:.1f} records/s ({searched / wall:.1f} embedded/s), {cpu_s:.1f} CPU-s; load "
                  f"{results[str(workers)]['load_before']} -> {results[str(workers)]['load_after']}", flush=True)
        first = tables[args.workers[0]]
        equal = {str(w): t == first for w, t in tables.items()}
        print(f"tables equal to --workers {args.workers[0]} (every column but run_id, created_at): {equal}")
        print(json.dumps({"turns": args.turns, "conversations": len(json.loads(export.read_text())),
                          "results": results, "equal": equal}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
