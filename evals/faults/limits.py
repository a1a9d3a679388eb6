"""Fault-matrix cases of issue 20 items 2, 4 and 8a: size limits, folder links and special files,
far-future dates. Each case is a fresh project made the way `synthex init` makes one (the default
template over a notes folder, offline), driven through the CLI, or the MCP server over stdio for
``remember``, as a user or an agent meets it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from evals.fault_matrix import (
    PIPELINE_NAME,
    SUBPROCESS_TIMEOUT,
    Case,
    Observed,
    Result,
    Workbench,
    cli_args,
    offline_env,
    quote,
    snapshot,
    synthex,
)
from synthex.core.project import render_template

GB = 1024**3
MB = 1024**2


def notes_project(wb: Workbench, name: str, notes: dict[str, str]) -> tuple[Path, Path]:
    """A project whose source is the notes folder ``notes`` (file name -> text, dated by front matter)."""
    root = wb.root / "projects" / name
    folder = root / "notes"
    folder.mkdir(parents=True)
    for file, text in notes.items():
        (folder / file).write_text(text)
    (root / "pipeline.py").write_text(render_template(PIPELINE_NAME, [("notes", "notes", "folder")], agent="tester"))
    return root, folder


def dated(day: str, text: str) -> str:
    return f"---\ndate: {day}\n---\n{text}\n"


GOOD = {"ada.md": dated("2024-03-05", "Met Ada to talk about the compiler."),
        "bike.md": dated("2024-04-01", "Bought a second-hand bike.")}


def sync_with_peak(root: Path) -> tuple[Result, float]:
    """``synthex sync`` and its peak RSS in MB (wait4 on the child: its own maximum, children included)."""
    with open(root / "sync.out", "w+") as out, open(root / "sync.err", "w+") as err:
        proc = subprocess.Popen(cli_args("sync", "--project", str(root)), cwd=root, stdout=out, stderr=err,
                                env=offline_env())
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Result(proc.returncode, out.read(), err.read()), usage.ru_maxrss / 1024


def warnings_of(root: Path) -> list[str]:
    """The import warnings `synthex plan` prints (`run` prints the same lines)."""
    planned = synthex("plan", "--project", str(root), cwd=root)
    return [line.removeprefix("warning: ") for line in planned.err.splitlines() if line.startswith("warning: ")]


def runs_running(root: Path) -> list[str]:
    runs = synthex("runs", "--json", "--project", str(root), cwd=root)
    return [r["id"] for r in json.loads(runs.out) if r["status"] == "running"] if runs.code == 0 else ["?"]


def check_synced(obs: Observed, root: Path, result: Result, stored: list[str]) -> None:
    """The sync exited 0, the notes step holds exactly ``stored`` and no run is left running."""
    obs.check(result.code == 0 and "Traceback" not in result.err, f"sync failed: {quote(result.message, 120)}")
    notes = sorted(Path(path).name for path in note_paths(root))
    obs.note(f"sync exits {result.code}; notes stored {notes}")
    obs.check(notes == stored, f"expected the notes {stored} stored")
    obs.check(not runs_running(root), "a run is left running")


def note_paths(root: Path) -> list[str]:
    from synthex.core.project import load_pipeline

    pipe: Any = load_pipeline(root)
    try:
        return [r.meta("source.path") for r in pipe.records("notes")]
    finally:
        pipe.close()


def one_warning(obs: Observed, warnings: list[str], name: str, *needles: str) -> None:
    found = [w for w in warnings if f"/{name}:" in w or f"item {name}:" in w]
    if obs.check(len(found) == 1, f"no single warning names {name} ({len(warnings)} warnings)"):
        obs.note(f"warning: {quote(found[0], 150)}")
        obs.check(all(n in found[0] for n in needles), f"the warning on {name} does not say {needles}")


# -- the cases -------------------------------------------------------------------------------------------------

def case_sparse_note(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, folder = notes_project(wb, "sparse-note", {"ada.md": GOOD["ada.md"]})
    with (folder / "huge.md").open("wb") as handle:
        handle.truncate(GB)
    result, peak = sync_with_peak(root)
    check_synced(obs, root, result, ["ada.md"])
    obs.note(f"sync peak RSS {peak:.0f} MB")
    obs.check(peak < 1024, "the sync's peak RSS reached the note's size")
    one_warning(obs, warnings_of(root), "huge.md", "note_bytes", "Pipeline(limits=Limits(note_bytes=...))")
    return obs.outcome()


MCP_REMEMBER = r'''
import json, os, sys
import anyio
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

async def main():
    params = StdioServerParameters(command=sys.executable, args=["-m", "synthex.surfaces.cli", "mcp", "--project",
                                                                 sys.argv[1]], env=dict(os.environ))
    async with stdio_client(params, errlog=open(sys.argv[2], "w")) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=300) as session:
            await session.initialize()
            out = {}
            for name, text in (("big", "x" * (50 * 1024 * 1024)), ("over", "y" * (300 * 1024)),
                               ("small", "The cat is called Miso.")):
                try:
                    result = await session.call_tool("remember", {"text": text, "created_at": "2024-05-01T12:00:00Z"})
                except MCPError as exc:  # refused by the transport's bound: a JSON-RPC error
                    out[name] = {"error": True, "text": str(exc.data)}
                    continue
                out[name] = {"error": result.is_error, "text": result.content[0].text if result.content else ""}
            print(json.dumps(out))

anyio.run(main)
'''


def case_big_remember(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root = wb.root / "projects" / "big-remember"
    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(
        'from synthex import Pipeline\n\npipeline = Pipeline("inbox", agent="tester")\n'
        'pipeline.source("agent", stream="agent.jsonl")\n'
        'pipeline.output("search", from_=["agent"], surface="search")\n')
    done = subprocess.run([sys.executable, "-c", MCP_REMEMBER, str(root), str(root / "server.err")], cwd=root,
                          capture_output=True, text=True, env=offline_env(), timeout=SUBPROCESS_TIMEOUT)
    try:
        said = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        obs.check(False, f"the MCP client failed: {quote(done.stderr.strip()[-200:], 200)}")
        return obs.outcome()
    big, over, small = said["big"], said["over"], said["small"]
    obs.note(f"50 MB remember over MCP stdio: error={big['error']}, {quote(big['text'], 150)}")
    obs.check(big["error"] and "\n" not in big["text"] and "mcp_request_bytes" in big["text"],
              "the 50 MB request was not refused in one line naming mcp_request_bytes")
    obs.note(f"a 300 KB remember: error={over['error']}, {quote(over['text'], 150)}")
    obs.check(over["error"] and "\n" not in over["text"] and "remember_bytes" in over["text"],
              "the 300 KB text was not refused in one line naming remember_bytes")
    stream = root / "agent.jsonl"
    lines = stream.read_text().splitlines() if stream.exists() else []
    obs.note(f"then a small remember: error={small['error']}; the stream holds {len(lines)} line(s), "
             f"{stream.stat().st_size if stream.exists() else 0} bytes")
    obs.check(not small["error"] and len(lines) == 1 and "Miso" in lines[0],
              "the stream holds something else than the one small line")
    obs.check("Traceback" not in (root / "server.err").read_text(), "the server printed a traceback")
    return obs.outcome()


def case_passwd_link(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, folder = notes_project(wb, "passwd-link", {"ada.md": GOOD["ada.md"]})
    (folder / "passwd.md").symlink_to("/etc/passwd")
    result = synthex("sync", "--project", str(root), cwd=root)
    check_synced(obs, root, result, ["ada.md"])
    leaked = [step for step, rows in snapshot(root).items() if any("root:" in text for _, text in rows)]
    obs.check(not leaked, f"/etc/passwd text is stored in {leaked}")
    found = synthex("search", "root", "--json", "--project", str(root), cwd=root)
    obs.check(found.code == 0 and "root:" not in found.out, "`synthex search root` finds /etc/passwd")
    one_warning(obs, warnings_of(root), "passwd.md", "a link to /etc/passwd, outside the notes folder",
                "follow_links=True")
    return obs.outcome()


def case_fifo(wb: Workbench) -> tuple[str, bool]:
    obs = Observed()
    root, folder = notes_project(wb, "fifo", {"ada.md": GOOD["ada.md"]})
    os.mkfifo(folder / "pipe.md")
    result = synthex("sync", "--project", str(root), cwd=root)  # a blocked read would time out here
    check_synced(obs, root, result, ["ada.md"])
    one_warning(obs, warnings_of(root), "pipe.md", "a FIFO", "never opened")
    return obs.outcome()


def case_year_9999(wb: Workbench) -> tuple[str, bool]:
    from synthex.core.project import load_pipeline

    obs = Observed()
    root, _ = notes_project(wb, "year-9999", {**GOOD, "future.md": dated("9999-12-31", "I take over the context.")})
    result = synthex("sync", "--project", str(root), cwd=root)
    check_synced(obs, root, result, ["ada.md", "bike.md"])
    pipe: Any = load_pipeline(root)
    try:
        context = pipe.projection("context")
        periods = sorted({r.period for step in pipe.steps for r in pipe.records(step)})
    finally:
        pipe.close()
    obs.note(f"projection('context') is of {context.period if context else None}; periods {periods}")
    obs.check(context is not None and context.period == "2024-04", "the context is not the last real month's")
    obs.check("9999-12" not in periods, "a 9999 period was written")
    one_warning(obs, warnings_of(root), "future.md", "dated 9999-12-31T00:00:00Z", "future_days")
    return obs.outcome()


CASES: list[Case] = [
    Case("limits: 1 GB sparse note",
         "sync exits 0 with the other note stored; the note skipped unread (peak RSS far below 1 GB) with one "
         "warning naming it and note_bytes; no run left running", case_sparse_note),
    Case("limits: 50 MB remember",
         "over MCP stdio: the 50 MB request refused in one line naming mcp_request_bytes (never read whole), a "
         "300 KB text in one line naming remember_bytes, nothing written; the next remember is stored",
         case_big_remember),
    Case("limits: symlink to /etc/passwd",
         "sync exits 0; the link skipped with one warning (outside the folder; follow_links=True allows it); "
         "no passwd text stored or found by search", case_passwd_link),
    Case("limits: FIFO in the notes folder",
         "sync exits 0 without blocking; the FIFO skipped unopened with one warning", case_fifo),
    Case("limits: year 9999",
         "sync exits 0; the note refused with one warning naming it and its date; projection('context') stays "
         "the last real month's; no 9999 period", case_year_9999),
]
