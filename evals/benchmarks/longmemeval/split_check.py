"""A LongMemEval eval run's figures on the first N scored questions and on the rest (a held-out check: the
techniques were tuned on early dev questions, so the later ones show whether the figures depend on that),
read back from the project's ``eval_results`` rows, with fresh@5 recomputed from each row's hits. ``--by-type``:
the same figures per question type of each part instead.

``python -m evals.benchmarks.longmemeval.split_check PROJECT DATA EVAL_RUN_ID [N] [PROTOCOL] [--by-type]``
(docs/benchmarks.md, issue 34).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evals.benchmarks.longmemeval.benchmark import FRESHNESS_K, LongMemEval, evidence_by_time
from evals.metrics import dedupe, freshness
from evals.report import Part, ResultRow, part_means, run_rows

COLUMNS = {"session all@5": "session_recall_all_at_5", "session any@5": "session_recall_any_at_5",
           "session all@10": "session_recall_all_at_10", "session nDCG@10": "session_ndcg_any_at_10",
           "turn all@10": "recall_all_at_10", "turn any@10": "recall_any_at_10", "turn nDCG@10": "ndcg_any_at_10"}


def split_figures(project: Path, data: Path, eval_run_id: str, first: int = 100,
                  protocol: str = "official", by_type: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
    """architecture -> part ("first N", "rest", "all") -> mean of each ``COLUMNS`` figure, fresh@5 and counts.
    The parts follow the questions' order in ``data`` under ``protocol``. ``by_type``: each part split by the
    questions' type too ("rest / multi-session")."""
    benchmark = LongMemEval(protocol)
    scored = benchmark.load(data)
    position = {q.question_id: i for i, q in enumerate(scored)}
    by_id = {q.question_id: q for q in scored}

    def parts_of(row: ResultRow) -> list[Part]:
        inside = position[row.question_id] < first
        parts = [Part(0, f"first {first}") if inside else Part(1, "rest"), Part(2, "all")]
        return [Part(p.place, p.name, by_id[row.question_id].question_type) for p in parts] if by_type else parts

    out = part_means(run_rows(project, eval_run_id, ["hits", "gold_sessions", *COLUMNS.values()]), parts_of, COLUMNS)
    for by_part in out.values():
        for figures in by_part.values():
            part_rows: list[ResultRow] = figures.pop("rows")
            fresh = []
            for r in part_rows:
                question = by_id[r.question_id]
                if question.question_type in benchmark.knowledge_update_categories:
                    sessions = dedupe(benchmark.session_of(question, t) for t in r.values["hits"])
                    evidence = evidence_by_time(question, set(r.values["gold_sessions"]))
                    fresh.append(freshness(sessions, evidence, FRESHNESS_K)[f"fresh@{FRESHNESS_K}"])
            figures["fresh@5"] = round(sum(fresh) / len(fresh), 4) if fresh else None
            figures["fresh n"] = len(fresh)
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.benchmarks.longmemeval.split_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("eval_run_id")
    parser.add_argument("first", type=int, nargs="?", default=100)
    parser.add_argument("protocol", nargs="?", default="official")
    parser.add_argument("--by-type", action="store_true", help="each part's figures per question type")
    args = parser.parse_args(argv)
    first = args.first
    figures = split_figures(args.project, args.data, args.eval_run_id, first, args.protocol, args.by_type)
    names = ["n", *COLUMNS, "fresh@5", "fresh n"]
    print("| architecture | part | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for arch, by_part in figures.items():  # parts in the split's order (``part_means``)
        for part, part_figures in by_part.items():
            print(f"| {arch} | {part} | " + " | ".join(str(part_figures[n]) for n in names) + " |")

if __name__ == "__main__":
    main(sys.argv[1:])
