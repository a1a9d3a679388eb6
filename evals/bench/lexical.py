"""The lexical leg at scale: LanceDB's FTS index against the in-memory BM25 (search/indexes/memory_lexical.py).

    python -m evals.bench.lexical --store /tmp/bench/1000000     # a store left by bench_search --store

Both score BM25 alike (k1 1.2, b 0.75, the same tokenizer); prints the in-memory index's build time and
peak RSS, the two engines' top-10 agreement, and p50/p95 of each over the same queries, interleaved
pass by pass. Queries are 3 of the bench corpus's words (evals/bench/search.py), filtered by step and
branch as the product does.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from evals.bench.search import percentiles
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search import SearchEngine
from synthex_resources.search.indexes.memory_lexical import memory_bm25
from synthex_resources.search.tokenize import tokenize


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True, help="a store directory written by evals.bench.search --store")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--pool", type=int, default=50)
    args = parser.parse_args()
    store = RecordStore(args.store)
    engine = SearchEngine(store)
    where = engine.where(["turns"], BranchScope.own())
    rng = np.random.default_rng(99)
    queries = [" ".join(f"w{int(r)}" for r in rng.integers(5, 400, size=3)) for _ in range(args.queries)]
    memory = memory_bm25(store)
    t0 = time.perf_counter()
    memory.search(tokenize(queries[0]), where, args.pool)
    print(f"in-memory BM25: build + first query {time.perf_counter() - t0:.1f} s, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")
    agree = [len({i for i, _ in engine.lexical(q, where, 10)} & {i for i, _ in memory.search(tokenize(q), where, 10)})
             / 10 for q in queries]
    print(f"top-10 agreement {float(np.mean(agree)):.3f}")
    for _ in range(2):
        for name, run in (("LanceDB FTS", lambda q: engine.lexical(q, where, args.pool)),
                          ("in-memory BM25", lambda q: memory.search(tokenize(q), where, args.pool))):
            times = []
            for q in queries:
                t0 = time.perf_counter()
                run(q)
                times.append(time.perf_counter() - t0)
            p = percentiles(times)
            print(f"{name:<15} pool {args.pool}: p50 {p['p50_ms']} p95 {p['p95_ms']} ms")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
