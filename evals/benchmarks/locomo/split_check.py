"""A LoCoMo eval run's figures on conversations FIRST..LAST and on the others (the held-out check: choices are
made on dev7 conversations 1-4 and checked on 5-7), read back from the project's ``eval_results`` rows.

``python -m evals.benchmarks.locomo.split_check PROJECT DATA EVAL_RUN_ID [FIRST-LAST] [--by-category]``
(docs/benchmarks.md, issues 34 and 35).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evals.benchmarks.locomo.data import load_locomo
from evals.report import Part, ResultRow, part_means, run_rows

COLUMNS = {"session any@5": "session_recall_any_at_5", "session all@5": "session_recall_all_at_5",
           "session all@10": "session_recall_all_at_10", "turn any@5": "recall_any_at_5",
           "turn any@10": "recall_any_at_10", "turn all@10": "recall_all_at_10", "turn nDCG@10": "ndcg_any_at_10"}


def split_figures(project: Path, data: Path, eval_run_id: str, first: int = 1, last: int = 4,
                  by_category: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
    """architecture -> part ("conversations F-L", "others", "all"; with ``by_category`` each split by category
    too) -> the question count and the mean of each ``COLUMNS`` figure. Conversations are numbered 1.. in
    ``data``'s order; a question id is ``<sample_id>/q<n>``."""
    number = {conv.sample_id: i for i, conv in enumerate(load_locomo(data), start=1)}
    inside = f"conversations {first}-{last}"

    def parts_of(row: ResultRow) -> list[Part]:
        conv = number[row.question_id.split("/", 1)[0]]
        parts = [Part(0, inside) if first <= conv <= last else Part(1, "others"), Part(2, "all")]
        return [Part(p.place, p.name, row.category) for p in parts] if by_category else parts

    out = part_means(run_rows(project, eval_run_id, list(COLUMNS.values())), parts_of, COLUMNS)
    for by_part in out.values():
        for figures in by_part.values():
            del figures["rows"]
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m evals.benchmarks.locomo.split_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("eval_run_id")
    parser.add_argument("conversations", nargs="?", default="1-4", help="1-based range, e.g. 1-4")
    parser.add_argument("--by-category", action="store_true", help="each part's figures per category")
    args = parser.parse_args(argv)
    first, _, last = args.conversations.partition("-")
    lo, hi = int(first), int(last or first)
    figures = split_figures(args.project, args.data, args.eval_run_id, lo, hi, args.by_category)
    names = ["n", *COLUMNS]
    print("| architecture | part | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for arch, by_part in figures.items():  # parts in the split's order (``part_means``)
        for part, part_figures in by_part.items():
            print(f"| {arch} | {part} | " + " | ".join(str(part_figures[n]) for n in names) + " |")

if __name__ == "__main__":
    main(sys.argv[1:])
