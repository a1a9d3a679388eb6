"""Search latency at 10k / 100k / 1M records (synthetic corpus) on this machine.

    python -m evals.bench_search --sizes 10000,100000          # default (bm25, dense, hybrid, conversational)
    python -m evals.bench_search --sizes 1000000               # ~1.5 GB of vectors
    python -m evals.bench_search --sizes 100000 --dense-index float32,binary   # dense modes side by side

The corpus has Zipf-distributed words and random unit vectors (latency does not depend on what the
vectors mean); queries are 3-word phrases embedded by the real offline embedder, so dense and hybrid
latency include embedding the query. Every query filters by step and branch, as the product does.
Prints build/update times, p50/p95 per mode, and peak RSS. Each size runs in its own process.

``--dense-index`` lists the dense index modes to measure on the same store (search/dense_index.py):
each is timed on dense and hybrid, with its recall against the exact float32 scan (the share of the
exact dense top 10 it returns; for hybrid, the share of the float32 hybrid top 10).
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
from synthex_resources.search.dense_index import DenseIndex, dense_index

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


def measure(engine: SearchEngine, queries: list[str], mode: str, hits: list | None = None) -> dict[str, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        found = engine.search(q, steps=["turns"], branch="main", k=10, config=RECIPES[mode])
        times.append(time.perf_counter() - t0)
        if hits is not None:
            hits.append([h.id for h in found])
    return percentiles(times)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return round(int(f.read().split()[1]) * resource.getpagesize() / 2**20, 1)


def overlap(got: list[list[str]], want: list[list[str]]) -> float:
    """Mean share of each wanted top list found in the matching got list."""
    shares = [len(set(g) & set(w)) / len(w) for g, w in zip(got, want, strict=True) if w]
    return round(float(np.mean(shares)), 4) if shares else 1.0


def dense_modes(engine: SearchEngine, queries: list[str], modes: list[str]) -> dict:
    """Dense and hybrid latency per dense index mode, with recall against the exact scan. The modes take
    turns query by query (a shared machine's load hits them alike); ``leg`` times the index search alone
    (query already embedded)."""
    index = dense_index(engine.store)
    vectors = engine.store.embedder.embed(queries)
    exact = [[rid for rid, _, _ in index.search(v, ["turns"], "main", None, 10, exact=True)] for v in vectors]
    setup: dict[str, float] = {}
    for mode in modes:
        index.mode = mode
        t0 = time.perf_counter()
        index.search(vectors[0], ["turns"], "main", None, 10)  # builds the sign bits if needed
        setup[mode] = round(time.perf_counter() - t0, 2)
    times: dict[str, dict[str, list[float]]] = {m: {"leg": [], "dense": [], "hybrid": []} for m in modes}
    hits: dict[str, dict[str, list[list[str]]]] = {m: {"leg": [], "dense": [], "hybrid": []} for m in modes}
    for query, vector in zip(queries, vectors, strict=True):
        for mode in modes:
            index.mode = mode
            t0 = time.perf_counter()
            found = [rid for rid, _, _ in index.search(vector, ["turns"], "main", None, 50)]
            times[mode]["leg"].append(time.perf_counter() - t0)
            hits[mode]["leg"].append(found[:10])
            for recipe in ("dense", "hybrid"):
                t0 = time.perf_counter()
                result = engine.search(query, steps=["turns"], branch="main", k=10, config=RECIPES[recipe])
                times[mode][recipe].append(time.perf_counter() - t0)
                hits[mode][recipe].append([h.id for h in result])
    index.mode = "float32"
    m = index._current()
    out: dict = {}
    for mode in modes:
        row: dict = {name: percentiles(t) for name, t in times[mode].items()}
        row["leg"]["recall@10_vs_exact"] = overlap(hits[mode]["leg"], exact)
        row["dense"]["recall@10_vs_exact"] = overlap(hits[mode]["dense"], exact)
        row["hybrid"]["overlap@10_vs_float32"] = overlap(hits[mode]["hybrid"], hits["float32"]["hybrid"]) \
            if "float32" in hits else None
        row["matrix_mb"] = round((m.vectors.nbytes + (m.bits.nbytes if m.bits is not None and mode == "binary" else 0))
                                 / 2**20, 1)
        row["setup_s"] = setup[mode]
        out[mode] = row
    out["rss_mb"] = rss_mb()
    return out


def one_size(n: int, queries_n: int = 100, modes: list[str] | None = None) -> dict:
    root = tempfile.mkdtemp(prefix=f"synthex-search-{n}-")
    store = RecordStore(root)
    engine = SearchEngine(store)
    store.derived("dense_index", lambda: DenseIndex(store, mode="float32"))
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
    result["dense_modes"] = dense_modes(engine, queries, modes or ["float32"])
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
    t0 = time.perf_counter()
    dense_index(store)._current()
    result["dense_update_after_write_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    engine.search("warm", steps=["turns"], config=RECIPES["dense"])
    result["dense_first_query_after_write_s"] = round(time.perf_counter() - t0, 3)
    result["dense_update_kind"] = dense_index(store).last_update
    result["latency_with_1000_unindexed"] = {"hybrid": measure(engine, queries[:50], "hybrid")}
    t0 = time.perf_counter()
    engine.ensure_index()
    result["fts_incremental_update_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    dense_index(store)._current()
    engine.search("warm", steps=["turns"], config=RECIPES["dense"])
    result["dense_matrix_reload_s"] = round(time.perf_counter() - t0, 2)
    result["dense_reload_kind"] = dense_index(store).last_update
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--dense-index", default="float32",
                        help="dense index modes to compare, comma-separated (float32, binary)")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = args.dense_index.split(",")
    if args.one is not None:
        print(json.dumps(one_size(args.one, modes=modes)))
        return
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        out = subprocess.run([sys.executable, "-m", "evals.bench_search", "--one", str(n),
                              "--dense-index", args.dense_index],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(r)
        lat = r["latency"]
        print(f"\n== {n:,} records ==  write {r['write_s']} s, FTS build {r['fts_build_s']} s, "
              f"dense matrix load {r['dense_matrix_load_s']} s, peak RSS {r['peak_rss_mb']} MB")
        for mode, v in lat.items():
            print(f"  {mode:<7} p50 {v['p50_ms']:>8} ms   p95 {v['p95_ms']:>8} ms")
        for mode, row in r["dense_modes"].items():
            if mode == "rss_mb":
                continue
            print(f"  dense index {mode:<8} leg alone p50 {row['leg']['p50_ms']} / p95 {row['leg']['p95_ms']} ms "
                  f"(recall@10 vs exact {row['leg']['recall@10_vs_exact']}); dense p50 {row['dense']['p50_ms']} / p95 {row['dense']['p95_ms']} ms "
                  f"(recall@10 vs exact {row['dense']['recall@10_vs_exact']}); hybrid p50 {row['hybrid']['p50_ms']} / "
                  f"p95 {row['hybrid']['p95_ms']} ms (top-10 overlap vs float32 {row['hybrid']['overlap@10_vs_float32']}); "
                  f"matrix {row['matrix_mb']} MB, setup {row['setup_s']} s")
        print(f"  RSS after the dense modes {r['dense_modes']['rss_mb']} MB")
        print(f"  dense: matrix update after adding 1,000 records {r['dense_update_after_write_s']} s, first query "
              f"{r['dense_first_query_after_write_s']} s "
              f"({r['dense_update_kind']}); after the FTS update {r['dense_matrix_reload_s']} s ({r['dense_reload_kind']})")
        print(f"  conversational scope build (first query after a write) {r['conversational_scope_build_s']} s")
        print(f"  add 1,000 records {r['add_1000_s']} s; hybrid with them unindexed "
              f"p95 {r['latency_with_1000_unindexed']['hybrid']['p95_ms']} ms; FTS update {r['fts_incremental_update_s']} s")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
