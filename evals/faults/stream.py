"""Fault-matrix cases: a stream that never stalls (issue 20, item 3; `synthex sync` warnings, item 8b).

Each case writes a stream project, damages its stream the way a user or a dead writer would, and drives
the real CLI (`remember`, `sync`, `status`, `search`) in subprocesses: the bad line is set aside and named
by file:line, the lines after it are searchable, and nothing claims what did not happen.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from evals.fault_matrix import Case, Observed, Workbench, quote, synthex

STREAM_PIPELINE = '''
from synthex import Pipeline

pipeline = Pipeline("fault-matrix-stream", agent="tester")
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("notes", from_="inbox", fn=lambda r: r.content)
pipeline.output("search", from_=["notes"], surface="search")
'''
# A writer that dies at a known point: after half a line, before its newline.
KILLED_WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, b'{"text": "the boiler service is booked for Tues')
os.kill(os.getpid(), 9)
"""


def line(text: str, created_at: str) -> str:
    return json.dumps({"text": text, "created_at": created_at}) + "\n"


def stream_project(wb: Workbench, name: str, lines: str = "") -> tuple[Path, Path]:
    root = wb.root / "projects" / name
    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(STREAM_PIPELINE)
    stream = root / "inbox.jsonl"
    if lines:
        stream.write_text(lines)
    return root, stream


def sync_and_check(obs: Observed, root: Path, stream: Path, bad_line: int, reason: str,
                   searches: dict[str, str]) -> None:
    """`synthex sync` exits 0, its summary and its warnings name ``stream:bad_line``; `synthex status` (text and
    --json) shows it; each query of ``searches`` finds its text (the lines after the bad one flowed)."""
    where = f"{stream}:{bad_line}: "
    synced = synthex("sync", "--project", str(root), cwd=root)
    summary = synced.out.splitlines()[0] if synced.out else synced.message
    obs.note(f"sync exit {synced.code}: {quote(summary, 150)}")
    if not obs.check(synced.code == 0, f"the sync failed: {quote(synced.message, 160)}"):
        return
    obs.check("set aside (quarantined)" in summary and where in summary, "the sync summary does not name file:line")
    obs.check(any(w.startswith(f"warning: {where}") and reason in w for w in synced.err.splitlines()),
              "`synthex sync` printed no import warning naming the line")
    status = synthex("status", "--project", str(root), cwd=root)
    shown = [s.strip() for s in status.out.splitlines() if s.strip().startswith(where)]
    obs.note(f"status: {quote(shown[0] if shown else status.out.strip(), 150)}")
    obs.check(bool(shown) and reason in shown[0], "`synthex status` does not show the line set aside")
    as_json = synthex("status", "--json", "--project", str(root), cwd=root)
    listed = json.loads(as_json.out).get("quarantined", []) if as_json.code == 0 else []
    obs.check(any(q["file"] == str(stream) and bad_line in [x["line"] for x in q["lines"]] for q in listed),
              "`synthex status --json` does not list the line")
    for query, text in searches.items():
        found = synthex("search", query, "-k", "3", "--project", str(root), cwd=root)
        obs.check(found.code == 0 and text in found.out, f"`synthex search {query!r}` does not find {text!r}")
    obs.note(f"{len(searches)} later line(s) searchable")


def case_half_line_then_remember(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, stream = stream_project(wb, "stream-half-line", line("the ferry leaves at nine", "2024-03-01"))
    writer = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(stream)], timeout=60)
    half = stream.read_bytes().endswith(b"Tues")
    obs.note(f"writer killed by signal {-writer.returncode} mid-line: {half}")
    obs.check(writer.returncode == -signal.SIGKILL and half, "the writer was not killed mid-line")
    said = synthex("remember", "my sister lives in Porto", "--created-at", "2024-03-02", "--project", str(root),
                   cwd=root)
    obs.note(f"remember exit {said.code}: {quote(said.out.strip(), 90)} / {quote(said.message, 120)}")
    obs.check(said.code == 0 and "queued for sync" in said.out, "remember did not queue its line")
    obs.check("a writer died mid-line" in said.message, "remember did not say it repaired a half line")
    lines = stream.read_bytes().split(b"\n")
    obs.check(lines[1].endswith(b"Tues") and json.loads(lines[2])["text"] == "my sister lives in Porto",
              "the half line and remember's line do not stand on lines of their own")
    sync_and_check(obs, root, stream, 2, "invalid JSON",
                   {"sister Porto": "my sister lives in Porto", "ferry": "the ferry leaves at nine"})
    return obs.outcome()


def case_undatable_line(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, stream = stream_project(wb, "stream-undatable", line("the ferry leaves at nine", "2024-03-01")
                                  + line("call the plumber", "yesterday")
                                  + line("the cello lesson moved to friday", "2024-03-05"))
    sync_and_check(obs, root, stream, 2, "'yesterday'", {"cello lesson": "the cello lesson moved to friday"})
    return obs.outcome()


def case_malformed_mid_file(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, stream = stream_project(wb, "stream-malformed", line("the ferry leaves at nine", "2024-03-01")
                                  + line("my sister lives in Porto", "2024-03-02")
                                  + '{"text": "a broken line", "created_at": \n'
                                  + line("the cello lesson moved to friday", "2024-03-05")
                                  + line("the passport renewal is due in May", "2024-04-20"))
    sync_and_check(obs, root, stream, 3, "invalid JSON", {"cello lesson": "the cello lesson moved to friday",
                                                          "passport renewal": "the passport renewal is due in May"})
    again = synthex("sync", "--project", str(root), cwd=root)
    obs.note(f"a second sync exits {again.code}")
    obs.check(again.code == 0 and "set aside" in again.out, "a later sync no longer names the line set aside")
    return obs.outcome()


CASES: list[Case] = [
    Case("stream: half line from a dead writer, then remember",
         "the writer is killed mid-line; `remember` ends the half line first, says so and queues its own line; sync "
         "exits 0, sets the half line aside (named file:2 in the summary, the warnings and status) and both good "
         "lines are searchable", case_half_line_then_remember),
    Case("stream: undatable line",
         "a line dated 'yesterday' is set aside (file:2 in the sync summary, warnings, status text and --json); "
         "sync exits 0; the line after it is searchable", case_undatable_line),
    Case("stream: malformed line mid-file",
         "a line of invalid JSON mid-file is set aside (file:3 in the summary, warnings, status); the lines after it "
         "are searchable; later syncs exit 0 and still name it", case_malformed_mid_file),
]
