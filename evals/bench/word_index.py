"""Cost of the word-neighbour expansion (search/strategies/hierarchical_expanded.py) as the leaves grow: building the word
index (tokenizing, the leaves x words matrix; embedding its vocabulary) and scoring a query, on LoCoMo
turns repeated to N leaves. The vocabulary is dev7's (about 5,000 words at any N): embedding cost is printed
per 1,000 words, so a larger vocabulary's first search can be read off (at most ``MAX_WORDS``). Each size
scores the questions once untimed, then timed.

    python -m evals.bench.word_index --data ../shared/data/locomo/locomo10_dev7.json --sizes 10000,100000,1000000

Prints, per size: build s without embedding, matrix MB, and per query (the dev7 questions' words,
embedded once beforehand) p50 / p95 ms of ``expansion_scores``; then the embedder's words per second.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from evals.benchmarks.locomo.data import load_locomo
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.search.indexes.word_index import build_word_index, content_words
from synthex_resources.search.strategies.hierarchical_expanded import expansion_scores, query_words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    conversations = load_locomo(args.data)
    turns = [f"{t.speaker}: {t.text}" for c in conversations for t in c.turns]
    speakers = {w for c in conversations for t in c.turns for w in content_words(t.speaker)}
    questions = [q.question for c in conversations for q in c.questions][: args.queries]
    embedder = EmbedderConfig().create()
    vocabulary = sorted({w for t in turns for w in content_words(t)})
    started = time.perf_counter()
    vectors = embedder.embed(vocabulary)
    embed_s = time.perf_counter() - started
    known = dict(zip(vocabulary, vectors, strict=True))

    def vectors_of(words: list[str]) -> np.ndarray:
        return np.stack([known[w] for w in words]) if words else np.zeros((0, embedder.dim), np.float32)
    asked = [query_words(q, speakers) for q in questions]
    asked_vectors = [embedder.embed(words) if words else np.zeros((0, embedder.dim), np.float32) for words in asked]
    print(f"vocabulary {len(vocabulary):,} words embedded in {embed_s:.1f} s "
          f"({len(vocabulary) / embed_s:,.0f} words/s; {1000 * embed_s / len(vocabulary):.2f} s per 1,000 words)")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        texts = [turns[i % len(turns)] for i in range(n)]
        started = time.perf_counter()
        index = build_word_index(texts, vectors_of)
        build_s = time.perf_counter() - started
        matrix_mb = sum(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
                        for m in (index.leaf_words, index.columns)) / 1e6 + index.vectors.nbytes / 1e6
        for vecs in asked_vectors:  # one untimed pass: the first size must not pay for warming up
            expansion_scores(index, vecs, 0.4)
        times = []
        for vecs in asked_vectors:
            started = time.perf_counter()
            expansion_scores(index, vecs, 0.4)
            times.append(1000 * (time.perf_counter() - started))
        row = {"leaves": n, "build_s_without_embedding": round(build_s, 2), "index_mb": round(matrix_mb, 1),
               "query_p50_ms": round(float(np.percentile(times, 50)), 2),
               "query_p95_ms": round(float(np.percentile(times, 95)), 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
