"""Peak memory of refusing hostile input (issue 20 item 2): a 1 GB note and a 50 MB ``remember``.

Each scenario runs in a fresh child process (offline, a fresh project in a temp dir); its peak RSS is the
kernel's count for that child (``os.wait4``'s ``ru_maxrss``, children it waited for included). Printed:
one markdown table row per scenario with what happened and the peak, against the 300 MB bound.

    python -m evals.bench.hostile_memory [--keep]

(a) ``synthex sync`` over a notes folder holding only a 1 GB sparse note (``truncate``: no disk): refused
    (skipped with a warning), nothing to run. For scale: the same sync over two small notes with and
    without the 1 GB note beside them (both run the pipeline through Dagster, whose own footprint is
    most of the peak; the note must add nothing).
(b) a 50 MB ``remember`` through the Python API in a subprocess (there is no ``synthex remember``
    command), refused before anything is written; and through ``synthex mcp`` over stdio (JSON-RPC
    lines written to the server's stdin), where the server process is measured alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from synthex.core.limits import Limits
from synthex.core.project import render_template

BOUND_MB = 300
GB = 1024**3
REMEMBER_BYTES = 50 * 1024 * 1024
MCP_REQUEST_BYTES = Limits().mcp_request_bytes


@dataclass
class Measured:
    scenario: str
    outcome: str
    peak_mb: float
    seconds: float
    bounded: bool  # whether the 300 MB bound applies (the scale and door rows are there to compare)


def offline_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and not k.startswith("SYNTHEX_")}


def peak_of(args: list[str], cwd: Path, stdin: bytes | None = None) -> tuple[int, str, str, float, float]:
    """Run ``args``; (exit code, stdout, stderr, peak RSS in MB, seconds)."""
    out_path, err_path = cwd / ".bench.out", cwd / ".bench.err"
    started = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=err, env=offline_env(),
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
        if stdin is not None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass  # the command stopped reading at its bound and exited: what a bound should do
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    return (proc.returncode, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
            usage.ru_maxrss / 1024, seconds)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "synthex.surfaces.cli", *args]


def notes_project(root: Path, notes: dict[str, str], huge: bool) -> Path:
    folder = root / "notes"
    folder.mkdir(parents=True)
    for name, text in notes.items():
        (folder / name).write_text(text)
    if huge:
        with (folder / "huge.md").open("wb") as handle:
            handle.truncate(GB)
    (root / "pipeline.py").write_text(render_template("bench", [("notes", "notes", "folder")], agent="bench"))
    return root


SMALL_NOTES = {"ada.md": "---\ndate: 2024-03-05\n---\nMet Ada about the compiler.\n",
               "bike.md": "---\ndate: 2024-04-01\n---\nBought a second-hand bike.\n"}


def sync_scenario(tmp: Path, name: str, notes: dict[str, str], huge: bool, bounded: bool) -> Measured:
    root = notes_project(tmp / name, notes, huge)
    code, out, err, peak, seconds = peak_of(cli("sync", "--project", str(root)), root)
    plan = subprocess.run(cli("plan", "--project", str(root)), cwd=root, capture_output=True, text=True,
                          env=offline_env())
    skipped = [line for line in plan.stderr.splitlines() if "huge.md: skipped" in line]
    last = (out.strip().splitlines() or err.strip().splitlines() or [""])[-1]
    outcome = f"exit {code}; {'huge.md skipped (warning)' if skipped else 'no warning on huge.md'}; {last[:70]}"
    held = code == 0 and (bool(skipped) == huge)
    return Measured(name, outcome + ("" if held else " — NOT AS EXPECTED"), peak, seconds, bounded)


INBOX = '''
from synthex import Pipeline

pipeline = Pipeline("bench-inbox", agent="bench")
pipeline.source("agent", stream="agent.jsonl")
pipeline.output("search", from_=["agent"], surface="search")
'''

REMEMBER_DRIVER = '''
import sys
from synthex.core.errors import SynthexError
from synthex.core.project import load_pipeline

pipe = load_pipeline(sys.argv[1])
text = "x" * int(sys.argv[2])
try:
    pipe.remember(text, created_at="2024-05-01T12:00:00Z")
    print("accepted")
except SynthexError as exc:
    print(f"refused: {exc}")
finally:
    pipe.close()
'''


def inbox_project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(textwrap.dedent(INBOX))
    return root


def remember_api_scenario(tmp: Path, name: str, size: int) -> Measured:
    root = inbox_project(tmp / name)
    code, out, err, peak, seconds = peak_of([sys.executable, "-c", REMEMBER_DRIVER, str(root), str(size)], root)
    stream = root / "agent.jsonl"
    written = stream.stat().st_size if stream.exists() else 0
    said = (out.strip().splitlines() or err.strip().splitlines() or [""])[-1]
    refused = said.startswith("refused:") and "remember_bytes" in said
    outcome = f"{said[:90]}; stream {written} bytes"
    held = (refused and written == 0) if size > 256 * 1024 else said == "accepted"
    return Measured(name, outcome + ("" if held else " — NOT AS EXPECTED"), peak, seconds, True)


def remember_cli_scenario(tmp: Path, name: str, size: int) -> Measured:
    """``synthex remember -`` reading ``size`` bytes from stdin (it reads at most ``remember_bytes`` + 1)."""
    root = inbox_project(tmp / name)
    code, out, err, peak, seconds = peak_of(cli("remember", "-", "--project", str(root)), root,
                                            stdin=b"x" * size)
    stream = root / "agent.jsonl"
    written = stream.stat().st_size if stream.exists() else 0
    said = (err.strip().splitlines() or out.strip().splitlines() or [""])[-1]
    held = code == 2 and "remember_bytes" in said and written == 0
    outcome = f"exit {code}: {said[:90]}; stream {written} bytes"
    return Measured(name, outcome + ("" if held else " — NOT AS EXPECTED"), peak, seconds, True)


def remember_mcp_scenario(tmp: Path, name: str, size: int) -> Measured:
    """The MCP server over stdio, sent initialize then one ``remember`` call of ``size`` bytes, then EOF (it
    exits). A request over ``Limits.mcp_request_bytes`` (1 MB) is drained, never held, and answered with a
    JSON-RPC error naming the bound (``BoundedStdin``); a smaller one reaches the tool, which refuses it.
    Held to the 300 MB bound: the server's own baseline (the blank remember) is measured beside it."""
    root = inbox_project(tmp / name)
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "remember", "arguments": {"text": "x" * size if size else " ",
                                                      "created_at": "2024-05-01T12:00:00Z"}}},
    ]
    started = time.monotonic()
    proc = subprocess.Popen(cli("mcp", "--project", str(root)), cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=(root / ".bench.err").open("wb"), env=offline_env())
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[str] = []
    for message in messages:  # one at a time: stdin stays open until the call's reply arrived
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        while "id" in message:
            line = proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            lines.append(line)
            if line.startswith("{") and json.loads(line).get("id") == message["id"]:
                break
    proc.stdin.close()  # EOF: the server exits
    lines += proc.stdout.read().decode(errors="replace").splitlines()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak, seconds, out = usage.ru_maxrss / 1024, time.monotonic() - started, "\n".join(lines)
    replies = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    call = next((r for r in replies if r.get("id") == 2), {})
    result = call.get("result", {})
    text = (result.get("content") or [{}])[0].get("text", "") if result else json.dumps(call.get("error"))
    stream = root / "agent.jsonl"
    written = stream.stat().st_size if stream.exists() else 0
    if size > MCP_REQUEST_BYTES:  # refused by the transport's bound, before any tool sees it
        held = "mcp_request_bytes" in text and "error" in call and written == 0
        outcome = f"JSON-RPC error: {' '.join(text.split())[:110]}; stream {written} bytes"
    else:
        held = bool(result.get("isError")) and ("remember_bytes" if size else "empty") in text and written == 0
        outcome = f"isError={result.get('isError')}: {' '.join(text.split())[:80]}; stream {written} bytes"
    return Measured(name, outcome + ("" if held else " — NOT AS EXPECTED"), peak, seconds, True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (printed).")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="synthex-hostile-memory-"))
    try:
        rows = [
            sync_scenario(tmp, "(a) sync: notes folder holding only a 1 GB sparse note", {}, True, True),
            sync_scenario(tmp, "(a, scale) sync: 2 small notes", SMALL_NOTES, False, False),
            sync_scenario(tmp, "(a, scale) sync: 2 small notes + the 1 GB sparse note", SMALL_NOTES, True, False),
            remember_api_scenario(tmp, "(b) 50 MB remember, Python API in a subprocess", REMEMBER_BYTES),
            remember_api_scenario(tmp, "(b, scale) 1 KB remember, Python API in a subprocess", 1024),
            remember_cli_scenario(tmp, "(b, door) 50 MB `synthex remember -` from stdin", REMEMBER_BYTES),
            remember_mcp_scenario(tmp, "(b, door) 50 MB remember, synthex mcp over stdio (the server)",
                                  REMEMBER_BYTES),
            remember_mcp_scenario(tmp, "(b, door) a blank remember (refused: empty), the same server's baseline", 0),
        ]
    finally:
        if args.keep:
            print(f"kept: {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"| scenario | outcome | peak RSS | < {BOUND_MB} MB | time |")
    print("|---|---|---|---|---|")
    failed = False
    for row in rows:
        verdict = ("yes" if row.peak_mb < BOUND_MB else "NO") if row.bounded else "(compare)"
        failed |= (row.bounded and row.peak_mb >= BOUND_MB) or "NOT AS EXPECTED" in row.outcome
        print(f"| {row.scenario} | {row.outcome.replace('|', '/')} | {row.peak_mb:.0f} MB | {verdict} | "
              f"{row.seconds:.1f} s |")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
