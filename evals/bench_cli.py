"""CLI start-up and command latency on the demo project: what a user waits for at the terminal.

    python -m evals.bench_cli                 # a fresh demo project, 5 repeats of each command
    python -m evals.bench_cli --project DIR   # an existing, already-run project

Each command runs as its own process (`synthex ...`), so the figures include interpreter start-up
and imports. Prints p50 / p95 / max wall seconds per command and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def synthex(args: list[str], cwd: Path) -> tuple[float, str]:
    exe = shutil.which("synthex") or sys.executable
    cmd = [exe, *args] if exe != sys.executable else [exe, "-m", "synthex.surfaces.cli", *args]
    started = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, out.stdout


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    project = args.project
    if project is None:
        project = Path(tempfile.mkdtemp(prefix="synthex-bench-cli-")) / "demo"
        subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "init", str(project), "--demo"], check=True,
                       capture_output=True)
        full_s, _ = synthex(["run"], project)
        print(f"full run (first, includes model load): {full_s:.2f} s", flush=True)
    _, hits = synthex(["search", "rust", "--json"], project)
    record = json.loads(hits)["hits"][0]["id"]
    commands = {
        "run (no change)": ["run"],
        "plan": ["plan"],
        "stats": ["stats"],
        "get": ["get", record],
        "runs": ["runs", "--limit", "5"],
        "search (hybrid)": ["search", "rust"],
        "--help": ["--help"],
    }
    rows = {}
    for name, cmd in commands.items():
        times = [synthex(cmd, project)[0] for _ in range(args.repeats)]
        rows[name] = {"p50": round(statistics.median(times), 3), "p95": round(percentile(times, 0.95), 3),
                      "max": round(max(times), 3)}
        print(f"{name:<18} p50 {rows[name]['p50']:6.3f} s   p95 {rows[name]['p95']:6.3f} s   "
              f"max {rows[name]['max']:6.3f} s", flush=True)
    print(json.dumps({"project": str(project), "repeats": args.repeats, "commands": rows}))


if __name__ == "__main__":
    main()
