"""Engine benchmark: full offline run, no-change re-run, and a prompt change, at 1x and 10x the demo.

    python -m evals.bench.engine                # scales 1 and 10 (200 and 2,000 conversations)
    python -m evals.bench.engine --scales 1     # just the demo size

Each scale runs in its own process so peak RSS is that scale's alone. Prints a table and JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUMMARIZE = '''
def summarize(record):
    return {instruction!r} + "\\n\\n## Conversation\\n" + record.content + "\\n\\n## Summary\\n"
'''


def one_scale(scale: int) -> dict:
    from synthex.core.demo.generate import generate
    from synthex.core.project import load_pipeline, render_template

    root = Path(tempfile.mkdtemp(prefix=f"synthex-bench-{scale}x-"))
    export = root / "conversations.json"
    export.write_text(json.dumps(generate(conversations=200 * scale, months=14, seed=7)))

    def write(instruction: str):
        prelude = SUMMARIZE.format(instruction=instruction)
        (root / "pipeline.py").write_text(render_template("bench", [("chatgpt", str(export), "chatgpt-export")],
                                                          summarize="summarize", prelude=prelude))
        return load_pipeline(root)

    pipe = write("Summarize this conversation in 2-3 sentences.")
    t0 = time.perf_counter()
    full = pipe.run()
    full_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    noop = pipe.run()
    noop_s = time.perf_counter() - t0
    pipe = write("Summarize the conversation as bullet points of decisions.")
    t0 = time.perf_counter()
    changed = pipe.run()
    changed_s = time.perf_counter() - t0
    steps = list(pipe.steps)
    from synthex_assets.instance import open_instance

    instance = open_instance(pipe)
    try:  # what the full run wrote to Dagster's event log (tests/test_cli_light_imports.py bounds it)
        full_events = len(instance.all_logs(full.dagster_run_ids[0])) if full.dagster_run_ids else 0
    finally:
        instance.dispose()
    return {
        "scale": scale,
        "conversations": 200 * scale,
        "records": full.stats.output,
        "full_run_s": round(full_s, 2),
        "per_step_records_per_s": {s: round(full.step_stats[s].output / max(full.step_stats[s].duration, 1e-9), 1)
                                   for s in steps},
        "no_change_run_s": round(noop_s, 3),
        "no_change_ratio": round(noop_s / full_s, 4),
        "no_change_dagster_runs": len(noop.dagster_run_ids),
        "full_run_dagster_runs": len(full.dagster_run_ids),
        "full_run_dagster_events": full_events,
        "prompt_change_run_s": round(changed_s, 2),
        "prompt_change_recomputed": {s: changed.step_stats.get(s).output if s in changed.step_stats else 0
                                     for s in steps},
        "prompt_change_expected_all": {s: full.step_stats[s].output for s in steps},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_scale(args.one)))
        return
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    results = []
    for scale in (int(s) for s in args.scales.split(",")):
        out = subprocess.run([sys.executable, "-m", "evals.bench.engine", "--one", str(scale)],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for r in results:
        print(f"\n== {r['conversations']} conversations ({r['scale']}x), {r['records']} records ==")
        print(f"full run           {r['full_run_s']:>8.2f} s   peak RSS {r['peak_rss_mb']} MB   "
              f"{r['full_run_dagster_events']} Dagster events")
        print(f"records/s by step  {r['per_step_records_per_s']}")
        print(f"no-change re-run   {r['no_change_run_s']:>8.3f} s   ratio {r['no_change_ratio']:.4f}x "
              f"({r['no_change_dagster_runs']} Dagster runs)")
        print(f"prompt change      {r['prompt_change_run_s']:>8.2f} s   recomputed {r['prompt_change_recomputed']}")
        print(f"                   (full run made {r['prompt_change_expected_all']})")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
