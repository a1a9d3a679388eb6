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
from pathlib import Path

from evals.architectures import ranked_leaf_keys, resolve
from evals.locomo import load_locomo
from evals.locomo_eval import add_question, ingest_conversation
from evals.scoring import Tally
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.search import SearchEngine
from synthex_resources.search.recipes import CONVERSATIONAL, HYBRID_RRF, SearchConfig

VARIANTS: dict[str, tuple[SearchConfig, bool]] = {  # name -> (recipe, stemmed index)
    "conversational (all parts)": (CONVERSATIONAL, True),
    "without the date prior": (CONVERSATIONAL.with_(date_weight=0.0), True),
    "without neighbour credit": (CONVERSATIONAL.with_(neighbour_weight=0.0), True),
    "speakers' names kept in the query": (CONVERSATIONAL.with_(drop_participants=False), True),
    "without the turns' own dense score": (CONVERSATIONAL.with_(leaf_dense_weight=0.0), True),
    "without stemming": (CONVERSATIONAL, False),
    "RRF hybrid (k=10) instead of leaf-sum": (HYBRID_RRF, True),
}


def run(data: Path, work_dir: Path, limit: int | None = None, k: int = 10) -> list[dict]:
    [arch] = resolve(["conversational"], None)
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = load_locomo(data)[: limit or None]
    embedder = EmbedderConfig().create()
    pipes = {c.sample_id: ingest_conversation(arch, c.sample_id, raw, work_dir, embedder) for c in conversations}
    rows = []
    for name, (config, stem) in VARIANTS.items():
        tally = Tally()
        for conv in conversations:
            engine = SearchEngine(pipes[conv.sample_id].app.store)
            engine.ensure_index(stem=stem)
            session_of = {t.dia_id: t.session_id for t in conv.turns}
            for question in (q for q in conv.questions if q.evidence):
                hits = engine.search(question.question, steps=["turns-in-context"], k=k, config=config)
                turns = ranked_leaf_keys(hits, question.question, lambda r: r.meta("chat.message_id"), k)
                add_question(tally, question, turns, session_of)
        m = tally.result()
        turn = m["metrics"]["turn"]
        rows.append({"variant": name, "n": m["n_questions"], "recall_any@5": turn["recall_any@5"],
                     "recall_any@10": turn["recall_any@10"], "recall_all@10": turn["recall_all@10"],
                     "ndcg_any@10": turn["ndcg_any@10"], "query_s": m["wall_s"]})
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
    args = parser.parse_args()
    rows = run(args.data, args.work_dir, args.limit)
    print("\n| variant | recall_any@5 | recall_any@10 | recall_all@10 | ndcg_any@10 |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['recall_any@5']:.4f} | {r['recall_any@10']:.4f} | {r['recall_all@10']:.4f} "
              f"| {r['ndcg_any@10']:.4f} |")


if __name__ == "__main__":
    main()
