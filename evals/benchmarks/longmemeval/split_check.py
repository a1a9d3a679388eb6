"""A LongMemEval eval run's figures on the first N scored questions and on the rest (a held-out check: the
techniques were tuned on early dev questions, so the later ones show whether the figures depend on that),
read back from the project's ``eval_results`` rows, with fresh@5 recomputed from each row's hits.

``python -m evals.benchmarks.longmemeval.split_check PROJECT DATA EVAL_RUN_ID [N] [PROTOCOL]`` (docs/benchmarks.md, issue 34).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evals.benchmarks.longmemeval.benchmark import FRESHNESS_K, LongMemEval, evidence_by_time
from evals.metrics import dedupe, freshness
from evals.report import connect_eval_results
from synthex_resources.sql import eval_results_path

COLUMNS = {"session all@5": "session_recall_all_at_5", "session any@5": "session_recall_any_at_5",
           "session all@10": "session_recall_all_at_10", "session nDCG@10": "session_ndcg_any_at_10",
           "turn all@10": "recall_all_at_10", "turn any@10": "recall_any_at_10"}


def split_figures(project: Path, data: Path, eval_run_id: str, first: int = 100,
                  protocol: str = "official") -> dict[str, dict[str, dict[str, Any]]]:
    """architecture -> part ("first N", "rest", "all") -> mean of each ``COLUMNS`` figure, fresh@5 and counts.
    The parts follow the questions' order in ``data`` under ``protocol``."""
    benchmark = LongMemEval(protocol)
    scored = benchmark.load(data)
    position = {q.question_id: i for i, q in enumerate(scored)}
    by_id = {q.question_id: q for q in scored}
    con = connect_eval_results(eval_results_path(project / ".synthex"), read_only=True)
    try:
        rows = con.execute(f"select architecture, question_id, hits, gold_sessions, {', '.join(COLUMNS.values())} "
                           "from eval_results where eval_run_id = ? order by architecture", [eval_run_id]).fetchall()
    finally:
        con.close()
    parts: dict[str, dict[str, list[tuple]]] = {}
    for row in rows:
        index = position[row[1]]
        for part in (f"first {first}" if index < first else "rest", "all"):
            parts.setdefault(row[0], {}).setdefault(part, []).append(row)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for arch, by_part in parts.items():
        for part, part_rows in by_part.items():
            figures: dict[str, Any] = {"n": len(part_rows)}
            for i, name in enumerate(COLUMNS, start=4):
                values = [r[i] for r in part_rows if r[i] is not None]
                figures[name] = round(sum(values) / len(values), 4) if values else None
            fresh = []
            for r in part_rows:
                question = by_id[r[1]]
                if question.question_type in benchmark.knowledge_update_categories:
                    sessions = dedupe(benchmark.session_of(question, t) for t in r[2])
                    fresh.append(freshness(sessions, evidence_by_time(question, set(r[3])), FRESHNESS_K)
                                 [f"fresh@{FRESHNESS_K}"])
            figures["fresh@5"] = round(sum(fresh) / len(fresh), 4) if fresh else None
            figures["fresh n"] = len(fresh)
            out.setdefault(arch, {})[part] = figures
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.benchmarks.longmemeval.split_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("eval_run_id")
    parser.add_argument("first", type=int, nargs="?", default=100)
    parser.add_argument("protocol", nargs="?", default="official")
    args = parser.parse_args(argv)
    first = args.first
    figures = split_figures(args.project, args.data, args.eval_run_id, first, args.protocol)
    names = ["n", *COLUMNS, "fresh@5", "fresh n"]
    print("| architecture | part | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for arch, by_part in figures.items():
        for part in (f"first {first}", "rest", "all"):
            if part in by_part:
                print(f"| {arch} | {part} | " + " | ".join(str(by_part[part][n]) for n in names) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
