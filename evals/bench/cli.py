"""CLI start-up and command latency on the demo project: what a user waits for at the terminal.

    python -m evals.bench.cli                 # fresh demo projects: 5 full runs, then 5 repeats of each command
    python -m evals.bench.cli --full-repeats 0 --project DIR   # only the commands, on an already-run project

Each command runs as its own process (`synthex ...`), so the figures include interpreter start-up
and imports. A full run is `synthex init --demo` then `synthex run` in a fresh directory (the first
includes loading the embedding model from disk, as every full run does), timed alone. Prints p50 / p95 /
max wall seconds per command, the load average at the start and end (label figures with it), and a
JSON line. Issue 24's goals: full run <= 8 s, no-change run / stats / get <= 1.0 s, search bm25 <= 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def synthex(args: list[str], cwd: Path, cpu: list[float] | None = None) -> tuple[float, str]:
    """Wall seconds and stdout of ``synthex ARGS``; its user+sys CPU seconds appended to ``cpu`` (a figure
    that a busy machine inflates far less than wall time: compare trees measured under different loads)."""
    exe = shutil.which("synthex") or sys.executable
    cmd = [exe, *args] if exe != sys.executable else [exe, "-m", "synthex.surfaces.cli", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, out.stdout


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(times: list[float], cpu: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(times), 3), "p95": round(percentile(times, 0.95), 3),
            "max": round(max(times), 3), "cpu_p50": round(statistics.median(cpu), 3)}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def full_run(workdir: Path, index: int, cpu: list[float]) -> tuple[float, Path]:
    """A fresh demo project and its first ``synthex run`` (the run alone is timed)."""
    project = workdir / f"demo-{index}"
    subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "init", str(project), "--demo"], check=True,
                   capture_output=True)
    seconds, _ = synthex(["run"], project, cpu)
    return seconds, project


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--full-repeats", type=int, default=5, help="full demo runs, each in a fresh project")
    args = parser.parse_args()
    started_load = load_average()
    print(f"load average at start: {started_load}", flush=True)
    rows = {}
    project = args.project
    if args.full_repeats > 0:
        workdir = Path(tempfile.mkdtemp(prefix="synthex-bench-cli-"))
        full_times: list[float] = []
        full_cpu: list[float] = []
        for i in range(args.full_repeats):
            seconds, ran = full_run(workdir, i, full_cpu)
            full_times.append(seconds)
            project = project or ran
        rows["run (full, demo)"] = summary(full_times, full_cpu)
    if project is None:
        parser.error("--project is required with --full-repeats 0")
    _, hits = synthex(["search", "rust", "--json"], project)
    record = json.loads(hits)["hits"][0]["id"]
    commands = {
        "run (no change)": ["run"],
        "plan": ["plan"],
        "stats": ["stats"],
        "get": ["get", record],
        "runs": ["runs", "--limit", "5"],
        "search (bm25)": ["search", "rust", "--mode", "bm25"],
        "search (default mode)": ["search", "rust"],
        "--help": ["--help"],
    }
    for name, cmd in commands.items():
        cpu: list[float] = []
        rows[name] = summary([synthex(cmd, project, cpu)[0] for _ in range(args.repeats)], cpu)
    for name, row in rows.items():
        print(f"{name:<18} p50 {row['p50']:6.3f} s   p95 {row['p95']:6.3f} s   max {row['max']:6.3f} s   "
              f"CPU p50 {row['cpu_p50']:6.3f} s", flush=True)
    ended_load = load_average()
    print(f"load average at end: {ended_load}", flush=True)
    print(json.dumps({"project": str(project), "repeats": args.repeats, "full_repeats": args.full_repeats,
                      "load_average": [started_load, ended_load], "commands": rows}))


if __name__ == "__main__":
    main()
