"""Ablation of the second stage (issue 35) on LoCoMo: the offline cross-encoder reorders the top N of the
best first-stage ranking (``hierarchical-expanded``), for N, the blend with the first-stage order, and what
the model reads of a turn.

The first stage is searched once per question (its top ``max(N)``, through the real engine on the
``hierarchical-conversational`` workspaces, ingested if missing); each variant then reranks those hits,
so the rows differ only in the second stage. One model serves every row (a pair is scored once). Tables
as the other ablations print them, plus each N's rerank latency (p50 / p95 per query, this machine).
The chosen setting is then checked end to end by ``synthex eval locomo --compare hierarchical-reranked``.

    python -m evals.ablate_rerank --data ../shared/data/locomo/locomo10_dev7.json \\
        --work-dir <project>/.synthex/evals/work/locomo [--limit 4 | --offset 4] --json rr.json --markdown rr.md
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from evals.ablate_conversational import ablation_row
from evals.ablate_conversational import main as ablation_main
from evals.ablate_hierarchical import ALTITUDES, ARCHITECTURE, TURNS
from evals.architectures import ranked_leaf_keys, resolve
from evals.locomo import load_locomo
from evals.locomo_eval import add_question, ingest_conversation
from evals.scoring import Tally
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.search import SearchEngine
from synthex_resources.search.builtin_strategies import HIERARCHICAL_EXPANDED
from synthex_resources.search.cross_encoder import CrossEncoderModel, CrossEncoderReranker, RerankText

TOP_NS = (10, 20, 30, 50)
BLENDS = (0.0, 2.0, 5.0)


def variants(model: CrossEncoderModel) -> dict[str, CrossEncoderReranker | None]:
    rows: dict[str, CrossEncoderReranker | None] = {"first stage alone (hierarchical-expanded)": None}
    for text in RerankText:
        for n in TOP_NS:
            for blend in BLENDS:
                rows[f"cross-encoder, top {n}, blend {blend:g}, {text}"] = CrossEncoderReranker(
                    model, top_n=n, blend=blend, text=text)
    return rows


def percentile(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else 0.0


def run(data: Path, work_dir: Path, limit: int | None = None, k: int = 10, offset: int = 0,
        only: list[str] | None = None, log=print) -> list[dict]:
    model = CrossEncoderModel()
    chosen = {name: r for name, r in variants(model).items()
              if not only or r is None or any(o.lower() in name.lower() for o in only)}
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = load_locomo(data)[offset:][: limit or None]
    embedder = EmbedderConfig().create()
    arch = resolve([ARCHITECTURE], None)[0]
    pool = max(TOP_NS)
    started = time.perf_counter()
    first: list[tuple[Any, str, int, Any, list]] = []  # (conversation, question id, index, question, hits)
    for conv in conversations:
        pipe = ingest_conversation(arch, conv.sample_id, raw, work_dir, embedder)
        try:
            engine = SearchEngine(pipe.app.store)
            for index, question in enumerate(conv.questions):
                if question.evidence:
                    hits = engine.search(question.question, steps=TURNS + ALTITUDES, k=pool,
                                         strategy=HIERARCHICAL_EXPANDED)
                    first.append((conv, f"{conv.sample_id}/q{index}", index, question, list(hits)))
        finally:
            pipe.close()
    searched = time.perf_counter() - started
    print(f"# first stage: {len(first)} questions, top {pool}, in {searched:.1f} s", file=sys.stderr, flush=True)
    rows = []
    for name, reranker in chosen.items():
        tally = Tally()
        began = time.perf_counter()
        for conv, qid, _index, question, hits in first:
            ranked = hits if reranker is None else reranker(question.question, hits)
            session_of = {t.dia_id: t.session_id for t in conv.turns}
            turns = ranked_leaf_keys(ranked[:k], question.question, lambda r: r.meta("chat.message_id"), k)
            add_question(tally, question, turns, session_of, question_id=qid)
        latencies = list(reranker.latencies) if reranker is not None else []
        row = ablation_row(tally, {"variant": name, "architecture": ARCHITECTURE, "steps": TURNS + ALTITUDES},
                           searching=time.perf_counter() - began, index_s=0.0, cold_s=0.0, disk={}, memory={})
        row["rerank_ms_p50"] = round(1000 * percentile(latencies, 50), 1)
        row["rerank_ms_p95"] = round(1000 * percentile(latencies, 95), 1)
        rows.append(row)
        log(json.dumps({key: value for key, value in row.items() if key != "questions"}))
        if reranker is not None:
            reranker.latencies.clear()
    print(f"# model: {model.pairs_scored} pairs scored, {model.pairs_cached} from the cache", file=sys.stderr)
    return rows


def main() -> None:
    ablation_main(run, "the eval's work dir: holds the hierarchical-conversational workspaces",
                  description=__doc__.splitlines()[0])


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
