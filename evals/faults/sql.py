"""Fault-matrix cases for `synthex sql` (issue 20, item 5): user SQL reads the project's views and nothing
else, and a console query over the CDC state never keeps `synthex sync` from committing.

    python -m evals.fault_matrix --only "sql:"
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

from evals.fault_matrix import Case, Observed, Workbench, finish, quote, start, synthex

SANDBOX_WORDS = "external access is off in synthex sql"
# What stands out in a file a query must never show (/etc/shadow's and /etc/passwd's first field).
LEAK_MARKERS = ("root:",)


def refusal(obs: Observed, root: Path, query: str, label: str) -> None:
    """`synthex sql QUERY` must exit 2 with one line naming the sandbox, and print no rows."""
    result = synthex("sql", query, "--project", str(root), cwd=root)
    leaked = any(m in result.out + result.err for m in LEAK_MARKERS)
    obs.note(f"{label}: exit {result.code} {quote(result.message, 200)}")
    obs.check(result.code == 2, f"{label}: exit {result.code}, not 2")
    obs.check(result.one_line(), f"{label}: not one line")
    obs.check(SANDBOX_WORDS in result.message, f"{label}: the line does not say '{SANDBOX_WORDS}'")
    obs.check(result.out == "" and not leaked, f"{label}: rows or file content printed")


def case_read_text_shadow(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = wb.project("sql-shadow")
    obs.check(Path("/etc/shadow").exists() and os.access("/etc/shadow", os.R_OK),
              "/etc/shadow is not readable here: the case proves nothing")
    refusal(obs, root, "select content from read_text('/etc/shadow')", "read_text('/etc/shadow')")
    return obs.outcome()


def case_other_doors(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = wb.project("sql-doors")
    out = wb.root / "sql-doors-out"
    queries = {
        "glob('/root/*')": "select file from glob('/root/*')",
        "read_csv(https)": "select * from read_csv('https://127.0.0.1:9/x.csv')",  # loopback: nothing is tried
        "read_duckdb(cdc)": "select * from read_duckdb('.synthex/cdc.duckdb', table_name='cdc_items')",
        "INSTALL": "install httpfs",
        "LOAD": "load httpfs",
        "ATTACH": f"attach '{out}.duckdb' as other",
        "COPY TO": f"copy (select 1) to '{out}.csv'",
        "SET": "set enable_external_access = true",
        "PRAGMA": "pragma enable_profiling",
    }
    for label, query in queries.items():
        refusal(obs, root, query, label)
    written = sorted(p.name for p in wb.root.glob("sql-doors-out*"))
    obs.check(not written, f"files written: {written}")
    rows = synthex("sql", "select count(*) as n from records", "--json", "--project", str(root), cwd=root)
    obs.check(rows.code == 0 and json.loads(rows.out or "null") == [{"n": 0}],
              f"the views no longer answer: {quote(rows.message, 80)}")
    return obs.outcome()


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_s(pid: int) -> float:
    """User + system CPU time of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def case_long_query_during_sync(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    export = wb.write_export("sql-cdc")
    root = wb.project("sql-cdc", export)
    first = synthex("sync", "--project", str(root), cwd=root)
    if not obs.check(first.code == 0, f"the first sync failed: {quote(first.message, 120)}"):
        return obs.outcome()
    synced_at = synthex("sql", "select synced_at from cdc_sources", "--json", "--project", str(root), cwd=root)
    before = json.loads(synced_at.out)[0]["synced_at"]

    # How much CPU a whole console takes (start, snapshot, a query, exit): a console that used more than
    # that plus a second is inside its query, whatever the machine's load (no sleep decides it).
    cpu0 = children_cpu_s()
    quick = synthex("sql", "select count(*) from cdc_items", "--project", str(root), cwd=root)
    whole = children_cpu_s() - cpu0
    obs.check(quick.code == 0, f"a plain query over cdc_items failed: {quote(quick.message, 100)}")

    conversations = json.loads(export.read_text())
    conversations[0]["title"] = "retitled while a console was reading"
    export.write_text(json.dumps(conversations))
    # Never ends by itself (a cross join with 10^13 rows): killed once the sync is over.
    long = start("sql", "select count(*) from cdc_items, range(10000000000000)", "--project", str(root), cwd=root)
    try:
        deadline = time.monotonic() + 120
        while long.poll() is None and process_cpu_s(long.pid) < whole + 1.0 and time.monotonic() < deadline:
            time.sleep(0.05)
        in_query = long.poll() is None and process_cpu_s(long.pid) >= whole + 1.0
        obs.check(in_query, "the console query was not running when the sync started")
        sync = synthex("sync", "--project", str(root), cwd=root)
        still = long.poll() is None
    finally:
        long.kill()
        finish(long)
    obs.note(f"console query in progress before and after the sync: {in_query and still}")
    obs.check(still, "the console query ended before the sync did: no overlap")
    summary = [ln for ln in (sync.out + sync.err).splitlines() if ln.startswith("chatgpt:")]
    obs.note(f"sync exit {sync.code}: {quote(summary[0] if summary else sync.message, 90)}")
    obs.check(sync.code == 0 and "busy" not in sync.err, f"the sync failed: {quote(sync.message, 120)}")
    obs.check(bool(summary) and "1 changed" in summary[0], "the sync did not see the changed conversation")
    after = synthex("sql", "select synced_at from cdc_sources", "--json", "--project", str(root), cwd=root)
    committed = after.code == 0 and json.loads(after.out)[0]["synced_at"] != before
    obs.note(f"CDC state committed: {committed}")
    obs.check(committed, "the CDC state was not committed by the sync")
    return obs.outcome()


CASES = [
    Case("sql: read_text('/etc/shadow')",
         "refused, exit 2, one line 'external access is off in synthex sql'; nothing of the file printed",
         case_read_text_shadow),
    Case("sql: glob / read_csv(https) / INSTALL / ATTACH / COPY TO / SET",
         "each refused, exit 2, one line naming the sandbox; no file written; the views still answer",
         case_other_doors),
    Case("sql: long query over CDC during sync",
         "a `synthex sql` query over cdc_items running all through a `synthex sync`: the sync commits (exit 0)",
         case_long_query_during_sync),
]
