"""Branch benchmark: create, a branch run that changes `summaries`, diff, promote, then main's run.

    python -m evals.bench.branch                # scales 1 and 10 (200 and 2,000 demo conversations)
    python -m evals.bench.branch --scales 1

Per scale, in its own process: a full main run, then a branch whose only override is the summary
prompt. Prints records computed and model calls (LLM-backed records) per step for the full main run
and for the branch run, wall times and ratios, the bytes the branch's creation wrote, and diff /
promote times; then checks that main's next run computes nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthex.core.project import branch_path

SUMMARIZE = '''
def summarize(record):
    return "Summarize this conversation in 2-3 sentences.\\n\\n## Conversation\\n" + record.content + "\\n\\n## Summary\\n"
'''
OVERRIDE = '''

def bullet_summary(record):
    return "Summarize the conversation as bullet points of decisions.\\n\\n" + record.content + "\\n\\n## Summary\\n"


def overrides(pipeline):
    pipeline.transform("summaries", from_="transcripts", prompt=bullet_summary)
'''
MODEL_STEPS = ("summaries", "monthly", "world-model")  # the template's LLM-backed steps


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def one_scale(scale: int) -> dict:
    from synthex.core.demo.generate import generate
    from synthex.core.project import load_pipeline, render_template

    root = Path(tempfile.mkdtemp(prefix=f"synthex-branch-{scale}x-"))
    export = root / "conversations.json"
    export.write_text(json.dumps(generate(conversations=200 * scale, months=14, seed=7)))
    (root / "pipeline.py").write_text(render_template("bench", [("chatgpt", str(export), "chatgpt-export")],
                                                      summarize="summarize", prelude=SUMMARIZE))
    main = load_pipeline(root)
    t0 = time.perf_counter()
    full = main.run()
    full_s = time.perf_counter() - t0

    store_dir = main.data_dir / "lancedb"
    before = folder_bytes(store_dir)
    t0 = time.perf_counter()
    main.app.branches.create("bullets")  # the file, and the branch's key in the UI's partition dimension
    create_s = time.perf_counter() - t0
    path = branch_path(root, "bullets")
    created_bytes = folder_bytes(store_dir) - before
    text = path.read_text()
    path.write_text(text[:text.index("def overrides")] + OVERRIDE.lstrip("\n"))

    t0 = time.perf_counter()
    branch_run = main.run(branch="bullets")
    branch_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    noop = main.run(branch="bullets")
    branch_noop_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    diff = main.app.branches.diff("bullets")
    diff_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    copied = main.app.branches.promote("bullets")
    promote_s = time.perf_counter() - t0
    after = load_pipeline(root)
    t0 = time.perf_counter()
    main_after = after.run()
    main_after_s = time.perf_counter() - t0
    steps = list(main.steps)

    def computed(run) -> dict:
        return {s: run.step_stats[s].output if s in run.step_stats else 0 for s in steps}

    return {
        "scale": scale, "conversations": 200 * scale, "records": full.stats.output,
        "full_main_run_s": round(full_s, 2), "full_main_computed": computed(full),
        "branch_create_s": round(create_s, 4), "branch_create_bytes_written": created_bytes,
        "branch_run_s": round(branch_s, 2), "branch_run_computed": computed(branch_run),
        "branch_run_reused": branch_run.stats.reused,
        "model_calls_full": sum(computed(full)[s] for s in MODEL_STEPS),
        "model_calls_branch": sum(computed(branch_run)[s] for s in MODEL_STEPS),
        "branch_no_change_run_s": round(branch_noop_s, 3), "branch_no_change_steps": noop.steps,
        "diff_s": round(diff_s, 3), "diff_changed_steps": diff.changed_steps,
        "diff_changed_summaries": diff.steps[0].changed if diff.steps else 0,
        "promote_s": round(promote_s, 3), "promote_copied": copied,
        "main_after_promote_s": round(main_after_s, 3), "main_after_promote_steps": main_after.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_scale(args.one)))
        return
    results = []
    for scale in (int(s) for s in args.scales.split(",")):
        print(f"scale {scale}x ...", file=sys.stderr, flush=True)
        out = subprocess.run([sys.executable, "-m", "evals.bench.branch", "--one", str(scale)],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for r in results:
        print(f"\n== {r['conversations']} conversations ({r['scale']}x), {r['records']} records ==")
        print(f"branch create       {r['branch_create_s']:>8.4f} s   {r['branch_create_bytes_written']} bytes written "
              f"to the store")
        print(f"full main run       {r['full_main_run_s']:>8.2f} s   computed {r['full_main_computed']}")
        print(f"branch run          {r['branch_run_s']:>8.2f} s   computed {r['branch_run_computed']} "
              f"(reused {r['branch_run_reused']})")
        print(f"  ratio branch/full {r['branch_run_s'] / r['full_main_run_s']:>8.2f}x wall, model calls "
              f"{r['model_calls_branch']} / {r['model_calls_full']}")
        print(f"branch no-change    {r['branch_no_change_run_s']:>8.3f} s   steps run {r['branch_no_change_steps']}")
        print(f"diff                {r['diff_s']:>8.3f} s   changed {r['diff_changed_steps']}, "
              f"{r['diff_changed_summaries']} summaries differ")
        print(f"promote             {r['promote_s']:>8.3f} s   copied {r['promote_copied']}")
        print(f"main after promote  {r['main_after_promote_s']:>8.3f} s   steps run {r['main_after_promote_steps']}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
