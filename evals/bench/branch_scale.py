"""Diff and promote time at scale: a branch that owns N records of one step (default 100,000).

    python -m evals.bench.branch_scale                  # 100,000 records on main and on the branch
    python -m evals.bench.branch_scale --records 20000

The records are written straight into the store (no model, no embedding: vectors stay empty), as a
run of this two-step pipeline would leave them: a JSONL source and a plain-Python `notes` transform
that the branch overrides. Then `Branches.diff` and `Branches.promote` are timed, and the store
checked: main holds the branch's notes, the branch holds none of its own.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

PIPELINE = '''from synthex import Pipeline


def note(record):
    return "note: " + record.content


pipeline = Pipeline("scale")
pipeline.source("docs", file="docs.jsonl", format="jsonl")
pipeline.transform("notes", from_="docs", fn=note)
'''
BRANCH = '''PARENT = "main"


def short_note(record):
    return "short: " + record.content[:20]


def overrides(pipeline):
    pipeline.transform("notes", from_="docs", fn=short_note)
'''


def write_records(main, branch, n: int) -> None:
    """What runs of main and of the branch would store, computed by the steps' own code (exact ids,
    so the plan agrees), written without Dagster and without vectors."""
    from synthex.core.steps import execute_partition
    from synthex_resources.step_context import SnapshotContext

    store = main.app.store
    docs = main.steps["docs"]
    for period in docs.periods():
        ctx = SnapshotContext.of([], "main").at(period)
        sources = execute_partition(docs, ctx, set()).new_records
        store.records.upsert(sources, embed=False)
        for definition in (main, branch):
            ctx = SnapshotContext.of(sources, definition.branch_name).at(period)
            notes = execute_partition(definition.steps["notes"], ctx, set()).new_records
            store.records.upsert(notes, embed=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    from synthex.core.project import load_pipeline

    root = Path(tempfile.mkdtemp(prefix="synthex-branch-scale-"))
    (root / "pipeline.py").write_text(PIPELINE)
    lines = (json.dumps({"id": f"doc-{i}", "content": f"document {i} about topic {i % 97}",
                         "created_at": f"{2023 + (i % 24) // 12}-{(i % 12) + 1:02d}-15T10:00:00Z"})
             for i in range(args.records))
    (root / "docs.jsonl").write_text("\n".join(lines))
    (root / "branches").mkdir()
    (root / "branches" / "short.py").write_text(BRANCH)
    main_pipe = load_pipeline(root)
    branch = main_pipe.for_branch("short")
    t0 = time.perf_counter()
    write_records(main_pipe, branch, args.records)
    print(f"wrote {3 * args.records} rows in {time.perf_counter() - t0:.1f} s "
          f"({args.records} notes on main, {args.records} on the branch, {args.records} docs)", flush=True)
    branches = main_pipe.app.branches
    t0 = time.perf_counter()
    diff = branches.diff("short")
    diff_s = time.perf_counter() - t0
    [notes] = diff.steps
    print(f"diff     {diff_s:8.2f} s   changed steps {diff.changed_steps}: +{notes.added} -{notes.removed} "
          f"~{notes.changed}", flush=True)
    t0 = time.perf_counter()
    copied = branches.promote("short")
    promote_s = time.perf_counter() - t0
    main_notes = main_pipe.records("notes")
    own = len(main_pipe.app.store.records.ids_on_branch("short"))
    print(f"promote  {promote_s:8.2f} s   copied {copied}; main now holds {len(main_notes)} notes "
          f"({sum(r.content.startswith('short: ') for r in main_notes)} from the branch); branch rows left {own}")
    print(json.dumps({"records": args.records, "diff_s": round(diff_s, 2), "promote_s": round(promote_s, 2),
                      "changed": notes.changed, "copied": copied}))


if __name__ == "__main__":
    main()
