"""Where an architecture's session recall_all@5 misses come from, under the official protocol, read back from a run's
``eval_results`` rows (issue 34's diagnosis): per question type, the misses (in the first N scored questions and in
the rest), how many gold sessions those questions have, where the gold turn of each gold session left out of the top 5
ranks in the turn ranking (or that it is not in it), and what fills the top 5 session keys instead.

The official protocol (``paper_session_metrics``) finds a gold session only through a gold turn: a non-evidence turn
of an evidence session stands for that session's relabelled "noans" twin, a key of its own. So the top 5 keys of a
missed question hold gold keys, twins, and other sessions.

``python -m evals.benchmarks.longmemeval.miss_check PROJECT DATA EVAL_RUN_ID ARCHITECTURE [N]`` (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from evals.benchmarks.longmemeval.benchmark import LongMemEval
from evals.report import run_rows
from synthex.core.errors import SynthexError

RANK_BUCKETS = ((1, 10), (11, 20), (21, 50))  # 20: the registered reranker's top N


def session_keys(hits: list[str], gold_turns: set[str]) -> list[tuple[str, bool]]:
    """The ranking's distinct (session, is a gold turn) keys in order: the official protocol's sessions."""
    keys: dict[tuple[str, bool], None] = {}
    for turn in hits:
        keys.setdefault((turn.rsplit("_", 1)[0], turn in gold_turns))
    return list(keys)


def misses(project: Path, data: Path, eval_run_id: str, architecture: str, first: int = 100,
           k: int = 5) -> dict[str, dict[str, Any]]:
    """question type -> the figures of the module docstring for ``architecture``'s session recall_all@``k`` misses."""
    scored = LongMemEval("official").load(data)
    position = {q.question_id: i for i, q in enumerate(scored)}
    out: dict[str, dict[str, Any]] = {}
    for row in run_rows(project, eval_run_id, ["hits", "gold_turns", f"session_recall_all_at_{k}"]):
        if row.architecture != architecture:
            continue
        if row.question_id not in position:  # the run scored another file than ``data``
            raise SynthexError(f"{data}: question {row.question_id!r} of eval run {eval_run_id!r} is not among its "
                               f"scored questions: pass the data file the run scored")
        recall = row.values[f"session_recall_all_at_{k}"]
        if recall is None or recall >= 1:
            continue
        hits, gold = list(row.values["hits"]), set(row.values["gold_turns"])
        keys = session_keys(hits, gold)
        gold_sessions = {turn.rsplit("_", 1)[0] for turn in gold}
        left_out = [s for s in sorted(gold_sessions) if (s, True) not in keys[:k]]
        ranks = [next((i for i, t in enumerate(hits, start=1) if t in gold and t.startswith(f"{s}_")), None)
                 for s in left_out]
        figures = out.setdefault(row.category, {"misses": 0, f"in first {first}": 0, "gold sessions": Counter(),
                                          "left out": 0, "not ranked": 0, "gold keys": 0, "twins": 0, "others": 0}
                                 | {f"rank {lo}-{hi}": 0 for lo, hi in RANK_BUCKETS})
        figures["misses"] += 1
        figures[f"in first {first}"] += position[row.question_id] < first
        figures["gold sessions"][len(gold_sessions)] += 1
        figures["left out"] += len(left_out)
        figures["not ranked"] += sum(r is None for r in ranks)
        for lo, hi in RANK_BUCKETS:
            figures[f"rank {lo}-{hi}"] += sum(r is not None and lo <= r <= hi for r in ranks)
        for session, is_gold in keys[:k]:
            figures["gold keys" if is_gold else "twins" if session in gold_sessions else "others"] += 1
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.benchmarks.longmemeval.miss_check",
                                     description=__doc__.split("\n\n")[0])
    for name, kind in (("project", Path), ("data", Path), ("eval_run_id", str), ("architecture", str)):
        parser.add_argument(name, type=kind)
    parser.add_argument("first", type=int, nargs="?", default=100, help="the first N scored questions (default 100)")
    args = parser.parse_args(argv)
    try:
        figures = misses(args.project, args.data, args.eval_run_id, args.architecture, args.first)
    except SynthexError as exc:  # a missing data file, a run of another file: one line
        sys.exit(f"miss_check: {exc}")
    names = ["misses", f"in first {args.first}", "gold sessions", "left out",
             *(f"rank {lo}-{hi}" for lo, hi in RANK_BUCKETS), "not ranked", "gold keys", "twins", "others"]
    print("| question type | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for kind, row in sorted(figures.items()):
        row["gold sessions"] = ", ".join(f"{n}: {c}" for n, c in sorted(row["gold sessions"].items()))
        print(f"| {kind} | " + " | ".join(str(row[n]) for n in names) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
