"""The idle cost of a daemon: CPU seconds of Synthex's daemon (2 s backfill loop) against Dagster's own (30 s).

    python -m evals.bench.daemon_idle PROJECT [--seconds 180] [--warmup 60]

PROJECT is a project `synthex ui` has run on (its `.synthex/dagster` home and workspace). Each daemon runs
alone on that instance with nothing to do: after ``--warmup`` seconds (its start-up and code server), the CPU
time (user + system, from /proc) the daemon and its code server use in the next ``--seconds``; one after the
other.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evals.bench.processes import cpu_s

DAEMONS = {"synthex": "synthex_assets.daemon", "dagster": "dagster._daemon"}


def idle_cpu(module: str, home: Path, project: Path, seconds: float, warmup: float) -> float:
    env = dict(os.environ, DAGSTER_HOME=str(home), SYNTHEX_PROJECT=str(project))
    proc = subprocess.Popen([sys.executable, "-m", module, "run", "-w", str(home / "workspace.yaml")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(warmup)
        started = cpu_s(proc.pid)
        time.sleep(seconds)
        return cpu_s(proc.pid) - started
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--warmup", type=float, default=60.0)
    args = parser.parse_args(argv)
    project = args.project.resolve()
    home = project / ".synthex" / "dagster"
    if not (home / "workspace.yaml").exists():
        print(f"{home / 'workspace.yaml'}: missing; run `synthex ui` on {project} once first", file=sys.stderr)
        return 2
    figures = {}
    for name, module in DAEMONS.items():
        figures[name] = idle_cpu(module, home, project, args.seconds, args.warmup)
        print(f"{name} daemon ({module}): {figures[name]:.1f} CPU-s in {args.seconds:.0f} s idle "
              f"({100 * figures[name] / args.seconds:.1f} % of a core)", flush=True)
    print(f"ratio synthex / dagster: {figures['synthex'] / max(figures['dagster'], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
