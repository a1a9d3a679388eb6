"""Sweep of the newer-first reordering (search/strategies/hierarchical_fresh.py) over an eval's existing workspaces: each
variant wraps ``hierarchical-expanded`` with another ``same_cosine`` / ``margin`` / ``score_ratio``; each
question is searched once (as ``evaluate`` searches) and every variant reorders those same hits, so only the
reordering differs between rows.

    python -m evals.ablations.fresh longmemeval DATA WORK_DIR [--limit N] [--category knowledge-update] --grid 0.6:0:0,0.4:0.1:0
    python -m evals.ablations.fresh locomo ../shared/data/locomo/locomo10_dev7.json WORK_DIR --limit 2 --grid ...

WORK_DIR is the eval's ``work/<benchmark>`` folder (``<project>/.synthex/evals/work/longmemeval``); a
missing workspace is ingested as ``synthex eval`` would (its vectors through that project's cache).
Prints one JSON line per variant: metrics at turn and session level, by category, and freshness.
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from pathlib import Path
from typing import Any

from evals.architectures import LeafCache, ranked_leaf_keys, resolve, unambiguous_records
from evals.benchmarks import EMBEDDING_CACHE, benchmark_registry, workspace_root
from evals.scoring import Tally
from evals.shared_embedder import MemoEmbedder
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.strategies.builtin import HIERARCHICAL_EXPANDED
from synthex_resources.search.strategies.hierarchical_fresh import FreshFirst

ARCHITECTURE = "hierarchical-expanded"  # its workspace ("hierarchical") holds the records every variant searches


# The gate a grid item's fourth field names: none, the cue words, or the cue words and the asker's own present
GATES = {0: ("", {}), 1: ("-present", {"present_only": True}),
         2: ("-asker", {"present_only": True, "own_present": True})}


def variants(grid: list[tuple[float, ...]], window: int = 10) -> dict[str, FreshFirst]:
    """One ``FreshFirst`` over ``hierarchical-expanded`` per (same_cosine, margin, score_ratio[, gate 0/1/2])."""
    out = {}
    for c, m, r, *gate in grid:
        suffix, gated = GATES[int(gate[0]) if gate else 0]
        name = f"fresh-c{c:g}-m{m:g}-r{r:g}{suffix}"
        out[name] = FreshFirst(name=name, inner=HIERARCHICAL_EXPANDED, window=window, same_cosine=c, margin=m,
                               score_ratio=r, **gated)
    return out


def run(benchmark_name: str, data: Path, work_dir: Path, tried: dict[str, FreshFirst], limit: int | None,
        category: str | None, k: int = 10) -> dict[str, dict[str, Any]]:
    """Each question searched once with ``hierarchical-expanded`` (as ``evaluate`` searches), then each variant's
    reordering of those hits (``FreshFirst.reordered``: what its ``search`` returns) scored by the benchmark."""
    benchmark = benchmark_registry().get(benchmark_name)()
    [arch] = resolve([ARCHITECTURE], None)
    embedder = MemoEmbedder.with_disk_cache(work_dir.parents[1] / EMBEDDING_CACHE)
    depth = max(k, benchmark.ranking_depth)
    names = [ARCHITECTURE, *tried]
    tallies = {name: Tally(category_level=benchmark.category_level) for name in names}
    fresh: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for conversation in list(benchmark.load(data))[: limit or None]:
        questions = [q for q in benchmark.questions(conversation) if category in (None, q.category)]
        if not questions:
            continue
        source = benchmark.ingest(conversation)
        pipe = arch.ingest(workspace_root(benchmark, work_dir, arch, source), source.filename, source.payload,
                           source.source_format, embedder)
        engine = SearchEngine(pipe.store())
        leaf_cache = LeafCache(partial(unambiguous_records, pipe))
        for question in questions:
            hits = pipe.search(question.text, step=arch.steps, k=depth, mode=arch.mode, branch=arch.branch,
                               as_of=question.as_of)
            for name in names:
                ranked = hits if name == ARCHITECTURE else tried[name].reordered(engine, list(hits), question.text)
                turns = ranked_leaf_keys(ranked, question.text, lambda r: r.meta(benchmark.turn_id_field), depth,
                                         leaf_cache)
                scored = benchmark.score(question, turns, conversation)
                tallies[name].record(scored, question.gold_turns, question.gold_sessions, question.category,
                                     question_id=question.question_id, question=question.text)
                if scored.extra is not None:
                    fresh[name].append(scored.extra)
        pipe.close()
        embedder.save()
    out = {}
    for name, tally in tallies.items():
        result = tally.result(benchmark=benchmark.result_name, architecture=name)
        rows = fresh[name]
        result["freshness"] = ({key: sum(r[key] for r in rows) / len(rows) for key in rows[0]} | {"n": len(rows)}
                               if rows else {"n": 0})
        result.pop("questions", None)
        out[name] = result
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark")
    parser.add_argument("data", type=Path)
    parser.add_argument("work_dir", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--category", default=None, help="only the questions of this category")
    parser.add_argument("--grid", default="0.6:0:0", help="same_cosine:margin:score_ratio[:gate],... (one variant each; gate 0 none, 1 "
                                                       "the present cues, 2 also the asker's own present)")
    parser.add_argument("--window", type=int, default=10)
    args = parser.parse_args()
    grid = [tuple(float(x) for x in item.split(":")) for item in args.grid.split(",")]
    if any(len(item) == 4 and item[3] not in GATES for item in grid):
        parser.error(f"--grid: a gate is one of {', '.join(map(str, GATES))}")
    tried = variants(grid, args.window)  # type: ignore[arg-type]
    for name, result in run(args.benchmark, args.data, args.work_dir, tried, args.limit, args.category).items():
        print(json.dumps({"variant": name, "n": result.get("n_questions"), "metrics": result.get("metrics"),
                          "freshness": result["freshness"], "by_category": result.get("by_category")}), flush=True)


if __name__ == "__main__":
    main()
