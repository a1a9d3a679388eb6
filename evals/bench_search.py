"""Search latency at 10k / 100k / 1M records (synthetic corpus) on this machine.

    python -m evals.bench_search --sizes 10000,100000          # default (bm25, dense, hybrid, conversational)
    python -m evals.bench_search --sizes 1000000               # ~1.5 GB of vectors; builds an ANN index

The corpus has Zipf-distributed words and random unit vectors (latency does not depend on what the
vectors mean); queries are 3-word phrases embedded by the real offline embedder, so dense and hybrid
latency include embedding the query. Every query filters by step and branch, as the product does.
Prints build/update times, p50/p95 per mode, and peak RSS. Each size runs in its own process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from synthex.record import Record
from synthex_resources.record_store import RecordStore
from synthex_resources.search import RECIPES, SearchEngine

DIM = 384
VOCAB = 30_000


def corpus(n: int, seed: int, offset: int = 0) -> list[Record]:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.2, size=(n, 24)), VOCAB) - 1
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for i in range(n):
        rid = f"{offset + i:012d}"
        out.append(Record(id=rid, content=" ".join(f"w{r}" for r in ranks[i]), step="turns", branch="main",
                          period=f"2024-{(i % 12) + 1:02d}", materialization_key=rid,
                          metadata={"time": {"created_at": "2024-01-01T00:00:00Z"}}, embedding=vectors[i].tolist()))
    return out


def percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_ms": round(1000 * s[len(s) // 2], 2), "p95_ms": round(1000 * s[int(len(s) * 0.95)], 2)}


def measure(engine: SearchEngine, queries: list[str], mode: str) -> dict[str, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        engine.search(q, steps=["turns"], branch="main", k=10, config=RECIPES[mode])
        times.append(time.perf_counter() - t0)
    return percentiles(times)


def one_size(n: int, queries_n: int = 100) -> dict:
    root = tempfile.mkdtemp(prefix=f"synthex-search-{n}-")
    store = RecordStore(root)
    engine = SearchEngine(store)
    t0 = time.perf_counter()
    batch = 50_000
    for start in range(0, n, batch):
        store.upsert(corpus(min(batch, n - start), seed=start, offset=start))
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine.ensure_index()
    fts_build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine.search("warm", steps=["turns"], config=RECIPES["dense"])  # loads the in-memory vector matrix
    matrix_load_s = time.perf_counter() - t0
    rng = np.random.default_rng(99)
    queries = [" ".join(f"w{int(r)}" for r in rng.integers(5, 400, size=3)) for _ in range(queries_n)]
    store.embedder.embed(["warm up"])
    engine.search(queries[0], steps=["turns"])
    result = {"records": n, "write_s": round(write_s, 1), "fts_build_s": round(fts_build_s, 2),
              "dense_matrix_load_s": round(matrix_load_s, 2), "latency": {}}
    for mode in ("bm25", "dense", "hybrid"):
        result["latency"][mode] = measure(engine, queries, mode)
    # conversational: the first query builds the per-scope bookkeeping (cached per table version). The
    # synthetic records are their own leaves with no turn order or speakers, so this measures the
    # fusion's cost, not its quality.
    t0 = time.perf_counter()
    engine.search(queries[0], steps=["turns"], config=RECIPES["conversational"])
    result["conversational_scope_build_s"] = round(time.perf_counter() - t0, 2)
    result["latency"]["conversational"] = measure(engine, queries, "conversational")
    # Incremental update: 1,000 new records, searchable at once; then fold them into the index.
    t0 = time.perf_counter()
    store.upsert(corpus(1000, seed=10**6 + n, offset=n))
    result["add_1000_s"] = round(time.perf_counter() - t0, 2)
    result["latency_with_1000_unindexed"] = {"hybrid": measure(engine, queries[:50], "hybrid")}
    t0 = time.perf_counter()
    engine.ensure_index()
    result["fts_incremental_update_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    engine.search("warm", steps=["turns"], config=RECIPES["dense"])
    result["dense_matrix_reload_s"] = round(time.perf_counter() - t0, 2)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_size(args.one)))
        return
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        out = subprocess.run([sys.executable, "-m", "evals.bench_search", "--one", str(n)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(r)
        lat = r["latency"]
        print(f"\n== {n:,} records ==  write {r['write_s']} s, FTS build {r['fts_build_s']} s, "
              f"dense matrix load {r['dense_matrix_load_s']} s, peak RSS {r['peak_rss_mb']} MB")
        for mode, v in lat.items():
            print(f"  {mode:<7} p50 {v['p50_ms']:>8} ms   p95 {v['p95_ms']:>8} ms")
        print(f"  conversational scope build (first query after a write) {r['conversational_scope_build_s']} s")
        print(f"  add 1,000 records {r['add_1000_s']} s; hybrid with them unindexed "
              f"p95 {r['latency_with_1000_unindexed']['hybrid']['p95_ms']} ms; FTS update {r['fts_incremental_update_s']} s")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
