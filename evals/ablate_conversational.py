"""Ablation of the ``conversational`` recipe on LoCoMo: each part switched off in turn.

Every variant searches the same ingested records (the ``conversational`` architecture's workspace,
shared with ``synthex eval locomo --compare conversational``) through the real search engine; only the
recipe (and, for stemming, the BM25 index) changes. Prints a markdown table of turn-level metrics.

    python -m evals.ablate_conversational --data ../shared/data/locomo/locomo10_dev7.json \\
        --work-dir <project>/.synthex/evals/work/locomo
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from evals.architectures import ranked_leaf_keys, resolve
from evals.locomo import load_locomo
from evals.locomo_eval import add_question, ingest_conversation
from evals.scoring import Tally
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.search import SearchEngine
from synthex_resources.search.recipes import CONVERSATIONAL, HYBRID_RRF, SearchConfig

BEFORE_13 = CONVERSATIONAL.with_(entity_weight=0.0)
VARIANTS: dict[str, tuple[SearchConfig, bool]] = {  # name -> (recipe, stemmed index)
    "conversational (all parts)": (CONVERSATIONAL, True),
    "without the date prior": (CONVERSATIONAL.with_(date_weight=0.0), True),
    "without neighbour credit": (CONVERSATIONAL.with_(neighbour_weight=0.0), True),
    "speakers' names kept in the query": (CONVERSATIONAL.with_(drop_participants=False), True),
    "without the turns' own dense score": (CONVERSATIONAL.with_(leaf_dense_weight=0.0), True),
    "without stemming": (CONVERSATIONAL, False),
    "RRF hybrid (k=10) instead of leaf-sum": (HYBRID_RRF, True),
    # Issue 13: the multi-hop strategies (search/multihop.py) and the temporal change, each on top of the
    # recipe as it was before issue 13 (BEFORE_13: so each row says what that strategy alone adds).
    "before issue 13 (no entity expansion)": (BEFORE_13, True),
    "without relative/span dates (issue 3 before)": (CONVERSATIONAL.with_(relative_dates=False), True),
    "+ (a) decomposition, sum": (BEFORE_13.with_(decompose="sum"), True),
    "+ (a) decomposition, max": (BEFORE_13.with_(decompose="max"), True),
    "+ (b) shared-entity expansion 0.3": (BEFORE_13.with_(entity_weight=0.3), True),
    "+ (b) shared-entity expansion 0.15": (BEFORE_13.with_(entity_weight=0.15), True),
    "+ (b) shared-entity expansion 0.1": (BEFORE_13.with_(entity_weight=0.1), True),
    "+ (b) shared-entity expansion 0.15, 10 seeds": (BEFORE_13.with_(entity_weight=0.15, expand_seeds=10), True),
    "+ (b) 0.15 and (c) PageRank 0.15": (BEFORE_13.with_(entity_weight=0.15, ppr_weight=0.15), True),
    "+ (c) personalized PageRank 0.3": (BEFORE_13.with_(ppr_weight=0.3), True),
    "+ (c) personalized PageRank 0.15": (BEFORE_13.with_(ppr_weight=0.15), True),
    "+ (d) MMR lambda 0.7": (BEFORE_13.with_(diversify="mmr", mmr_lambda=0.7), True),
    "+ (d) MMR lambda 0.85": (BEFORE_13.with_(diversify="mmr", mmr_lambda=0.85), True),
    "+ (d) session diversification 0.3": (BEFORE_13.with_(diversify="session", session_penalty=0.3), True),
    "+ (d) session diversification 0.15": (BEFORE_13.with_(diversify="session", session_penalty=0.15), True),
}


def run(data: Path, work_dir: Path, limit: int | None = None, k: int = 10,
        only: list[str] | None = None) -> list[dict]:
    """``only``: substrings of the variant names to run (default: all)."""
    [arch] = resolve(["conversational"], None)
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = load_locomo(data)[: limit or None]
    embedder = EmbedderConfig().create()
    pipes = {c.sample_id: ingest_conversation(arch, c.sample_id, raw, work_dir, embedder) for c in conversations}
    rows = []
    for name, (config, stem) in VARIANTS.items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        tally = Tally()
        searching = 0.0
        for conv in conversations:
            engine = SearchEngine(pipes[conv.sample_id].app.store)
            engine.ensure_index(stem=stem)
            session_of = {t.dia_id: t.session_id for t in conv.turns}
            for question in (q for q in conv.questions if q.evidence):
                started = time.perf_counter()
                hits = engine.search(question.question, steps=["turns-in-context"], k=k, config=config)
                searching += time.perf_counter() - started
                turns = ranked_leaf_keys(hits, question.question, lambda r: r.meta("chat.message_id"), k)
                add_question(tally, question, turns, session_of)
        m = tally.result()
        turn = m["metrics"]["turn"]
        rows.append({"variant": name, "n": m["n_questions"], "recall_any@5": turn["recall_any@5"],
                     "recall_any@10": turn["recall_any@10"], "recall_all@10": turn["recall_all@10"],
                     "ndcg_any@10": turn["ndcg_any@10"], "query_s": m["wall_s"],
                     "ms_per_query": round(1000 * searching / max(m["n_questions"], 1), 1),
                     "by_category": {c: {"recall_any@10": round(v["recall_any@10"], 4),
                                         "recall_all@10": round(v["recall_all@10"], 4), "n": v["n"]}
                                     for c, v in m["by_category"].items()}})
        print(json.dumps(rows[-1]), flush=True)
    for pipe in pipes.values():  # leave the workspace as the architecture defines it
        SearchEngine(pipe.app.store).ensure_index(stem=True)
        pipe.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, default=Path(".synthex/evals/work/locomo"))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--only", action="append", default=None,
                        help="run only the variants whose name contains this (repeatable)")
    args = parser.parse_args()
    rows = run(args.data, args.work_dir, args.limit, only=args.only)
    print(table(rows))


def table(rows: list[dict]) -> str:
    """Markdown: whole set, then recall_any@10 / recall_all@10 per category, and ms per query."""
    cats = sorted({c for r in rows for c in r["by_category"]})
    head = ("| variant | recall_any@5 | recall_any@10 | recall_all@10 | ndcg_any@10 | "
            + " | ".join(f"{c} (n={rows[0]['by_category'][c]['n']}) any/all" for c in cats) + " | ms/query |")
    lines = [head, "|" + "---|" * (6 + len(cats))]
    for r in rows:
        per = " | ".join(f"{r['by_category'][c]['recall_any@10']:.3f} / {r['by_category'][c]['recall_all@10']:.3f}"
                         for c in cats)
        lines.append(f"| {r['variant']} | {r['recall_any@5']:.4f} | {r['recall_any@10']:.4f} | "
                     f"{r['recall_all@10']:.4f} | {r['ndcg_any@10']:.4f} | {per} | {r['ms_per_query']} |")
    return "\n" + "\n".join(lines)


if __name__ == "__main__":
    main()
