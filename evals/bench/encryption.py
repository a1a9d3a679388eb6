"""The cost of encryption at rest (SYNTHEX_ENCRYPTION_KEY): a full run, search latency, storage.

    python -m evals.bench.encryption                    # demo project + a 10k synthetic store (~2.5 min)
    python -m evals.bench.encryption --synthetic 0      # the demo only

1. Full run: two fresh demo projects (``synthex init --demo``, 200 conversations, offline LLM stand-in,
   so no LLM cache), ``synthex run`` in a fresh process each, plaintext then encrypted (``--repeat``
   alternates the order). Wall time as the user sees it, and the ratio.
2. Search latency on those two stores in one process: the same queries (3 words drawn from the demo's
   transcripts) at the pipeline's search steps, k = 10, lexical (bm25) / dense / hybrid / exact, p50 and
   p95, and the ratio encrypted / plaintext. First search (cold: the encrypted store builds its in-memory
   BM25 index by decrypting every text) is reported apart.
3. The same at 10k synthetic records (evals/bench/search.py's corpus: Zipf words, random vectors), where
   the lexical legs differ most (FTS index vs in-memory BM25 over decrypted text).
4. Storage: bytes of the LanceDB folder, records data vs indexes; the in-memory BM25 index's size.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from synthex.core.scope import BranchScope
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.encryption import KEY_ENV, generate_key
from synthex_resources.record_store import RecordStore
from synthex_resources.search import BM25, SearchEngine, SearchStrategy, load_search_strategies
from synthex_resources.search.indexes.memory_lexical import memory_bm25

MODES = ("bm25", "dense", "hybrid", "exact")  # strategy names (the registry's), and exact search


def env(key: str | None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != KEY_ENV}
    if key:
        out[KEY_ENV] = key
    return out


def synthex(*args: str, cwd: Path, key: str | None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of ``synthex ARGS`` in a fresh process. CPU time is the steadier
    figure on a shared machine: wall time also counts waiting for the cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], cwd=cwd, env=env(key),
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"synthex {' '.join(args)} failed in {cwd}:\n{proc.stdout}\n{proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def folder_bytes(path: Path, part: str | None = None) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and (part is None or part in p.parts))


def percentiles(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return 1000 * s[len(s) // 2], 1000 * s[min(len(s) - 1, int(len(s) * 0.95))]


def search_once(engine: SearchEngine, query: str, strategy: SearchStrategy | None, steps: list[str],
                exact_steps: list[str]) -> None:
    if strategy is None:  # exact search
        engine.search(query.split()[0], steps=exact_steps, k=10, exact=True)
    else:
        engine.search(query, steps=steps, k=10, strategy=strategy)


def latency(stores: dict[str, RecordStore], queries: list[str], steps: list[str],
            exact_steps: list[str]) -> dict[str, dict[str, tuple[float, float]]]:
    """p50/p95 ms per store and mode; stores are interleaved query by query (same load for both)."""
    engines = {name: SearchEngine(store) for name, store in stores.items()}
    out: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in stores}
    registry = load_search_strategies()
    for mode in MODES:
        strategy = None if mode == "exact" else registry.get(mode)
        times: dict[str, list[float]] = {name: [] for name in stores}
        for query in queries:
            for name, engine in engines.items():
                started = time.perf_counter()
                search_once(engine, query, strategy, steps, exact_steps)
                times[name].append(time.perf_counter() - started)
        for name in stores:
            out[name][mode] = percentiles(times[name])
    return out


def cold_first_search(stores: dict[str, RecordStore], query: str, steps: list[str],
                      exact_steps: list[str]) -> dict[str, tuple[float, float]]:
    """Seconds of the first lexical and the first exact search of each store (the encrypted store decrypts
    every text for its BM25 index, then the exact scope's texts once)."""
    for store in stores.values():
        store.records_table()  # lancedb imported and the tables opened outside the timing
    out = {}
    for name, store in stores.items():
        started = time.perf_counter()
        SearchEngine(store).search(query, steps=steps, k=10, strategy=BM25)
        lexical = time.perf_counter() - started
        started = time.perf_counter()
        SearchEngine(store).search(query.split()[0], steps=exact_steps, k=10, exact=True)
        out[name] = (lexical, time.perf_counter() - started)
    return out


def index_bytes(store: RecordStore) -> int:
    index = memory_bm25(store)
    corpus = index.corpus()
    if corpus is None:
        return 0
    arrays = [corpus.rowids, corpus.norms, corpus.offsets, corpus.post_rows, corpus.post_counts]
    per_text = sum(t.terms.nbytes + t.counts.nbytes + 100 for t in index.texts.values())
    return sum(a.nbytes for a in arrays) + 8 * len(corpus.ids) + per_text + 80 * len(index.vocab)


def print_latency(title: str, lat: dict[str, dict[str, tuple[float, float]]],
                  cold: dict[str, tuple[float, float]]) -> None:
    print(f"\n{title}")
    print(f"  {'mode':<7} {'plain p50':>10} {'enc p50':>9} {'x':>6}   {'plain p95':>10} {'enc p95':>9} {'x':>6}")
    for mode in MODES:
        (p50, p95), (e50, e95) = lat["plain"][mode], lat["encrypted"][mode]
        print(f"  {mode:<7} {p50:>8.1f}ms {e50:>7.1f}ms {e50 / p50:>6.2f}   {p95:>8.1f}ms {e95:>7.1f}ms {e95 / p95:>6.2f}")
    print(f"  first search, before the table above (encrypted: decrypt + build in-memory BM25; decrypt the exact "
          f"scope): lexical plain {cold['plain'][0] * 1000:.0f} ms, encrypted {cold['encrypted'][0] * 1000:.0f} ms; "
          f"exact plain {cold['plain'][1] * 1000:.0f} ms, encrypted {cold['encrypted'][1] * 1000:.0f} ms")


def storage_line(name: str, root: Path) -> str:
    records = root / "records.lance"
    idx = folder_bytes(records, "_indices")
    return (f"  {name:<9} lancedb {folder_bytes(root) / 1e6:7.2f} MB   records data {folder_bytes(records, 'data') / 1e6:6.2f} MB"
            f"   records indexes {idx / 1e6:5.2f} MB   llm_cache {folder_bytes(root / 'llm_cache.lance') / 1e6:5.2f} MB")


def demo(base: Path, key: str, repeat: int, queries_n: int) -> None:
    roots = {name: base / f"demo-{name}" for name in ("plain", "encrypted")}
    keys = {"plain": None, "encrypted": key}
    walls: dict[str, list[float]] = {name: [] for name in roots}
    cpus: dict[str, list[float]] = {name: [] for name in roots}
    for i in range(repeat):
        order = ("plain", "encrypted") if i % 2 == 0 else ("encrypted", "plain")
        for name in order:
            shutil.rmtree(roots[name], ignore_errors=True)
            synthex("init", str(roots[name]), "--demo", cwd=base, key=None)
            wall, cpu = synthex("run", cwd=roots[name], key=keys[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    print(f"\n== full run: demo project (`synthex init --demo`, 200 conversations, 628 records), {repeat} run(s) "
          f"each, `synthex run` in a fresh process, median ==")
    for label, figures in (("wall", walls), ("CPU ", cpus)):
        plain, enc = (float(np.median(figures[n])) for n in ("plain", "encrypted"))
        print(f"  {label} plain {plain:5.1f} s   encrypted {enc:5.1f} s   ratio {enc / plain:.2f}   (each: plain "
              f"{[round(w, 1) for w in figures['plain']]}, encrypted {[round(w, 1) for w in figures['encrypted']]})")

    from synthex.core.project import load_pipeline

    pipeline = load_pipeline(roots["plain"])
    embedder = EmbedderConfig().create()  # one embedder for every store: it loads once, outside every timing
    stores = {name: RecordStore(load_pipeline(root).store_uri, embedder=embedder, encryption_key=keys[name])
              for name, root in roots.items()}
    transcripts = [r.content for r in stores["plain"].records.list(BranchScope.own(), step="transcripts")]
    rng = np.random.default_rng(5)
    words = [w for text in transcripts for w in text.split() if w.isalpha() and len(w) > 3]
    queries = [" ".join(rng.choice(words, size=3)) for _ in range(queries_n)]
    steps, leaf = pipeline.search_steps(), pipeline.leaf_steps()
    embedder.embed(["warm up"])
    cold = cold_first_search(stores, queries[0], steps, leaf)
    counts = stores["encrypted"].records.counts(BranchScope.own())
    lat = latency(stores, queries, steps, leaf)
    print_latency(f"== search on the demo stores ({sum(counts.values())} records; steps {', '.join(steps)}; "
                  f"exact on {', '.join(leaf)}; {queries_n} queries, k=10) ==", lat, cold)
    print("  storage:")
    for name, store in stores.items():
        print(storage_line(name, Path(store.uri)))
    print(f"  in-memory BM25 index of the encrypted store: ~{index_bytes(stores['encrypted']) / 1e6:.2f} MB RAM")
    for store in stores.values():
        store.close()


def synthetic(base: Path, key: str, n: int, queries_n: int) -> None:
    from evals.bench.search import corpus

    stores = {"plain": RecordStore(str(base / "syn-plain")),
              "encrypted": RecordStore(str(base / "syn-encrypted"), encryption_key=key)}
    writes = {}
    for name, store in stores.items():
        started = time.perf_counter()
        for start in range(0, n, 5000):
            store.records.upsert(corpus(min(5000, n - start), seed=start, offset=start))
        SearchEngine(store).ensure_index()
        writes[name] = time.perf_counter() - started
    stores["encrypted"]._embedder = stores["plain"].embedder
    stores["plain"].embedder.embed(["warm up"])
    rng = np.random.default_rng(99)
    queries = [" ".join(f"w{int(r)}" for r in rng.integers(5, 400, size=3)) for _ in range(queries_n)]
    cold = cold_first_search(stores, queries[0], ["turns"], ["turns"])
    lat = latency(stores, queries, ["turns"], ["turns"])
    print(f"\n== synthetic store, {n:,} records (Zipf words, random vectors) ==")
    print(f"  write + index: plain {writes['plain']:.1f} s (FTS build included), encrypted {writes['encrypted']:.1f} s "
          f"(no FTS index), ratio {writes['encrypted'] / writes['plain']:.2f}")
    print_latency(f"  search, step filter, {queries_n} queries, k=10:", lat, cold)
    print("  storage:")
    for name, store in stores.items():
        print(storage_line(name, Path(store.uri)))
    print(f"  in-memory BM25 index of the encrypted store: ~{index_bytes(stores['encrypted']) / 1e6:.2f} MB RAM")
    started = time.perf_counter()
    stores["encrypted"].upsert(corpus(100, seed=10**6, offset=n))
    SearchEngine(stores["encrypted"]).search(queries[1], steps=["turns"], k=10, strategy=BM25)
    print(f"  100 new records then a lexical search (incremental upkeep: 100 texts decrypted, postings rebuilt): "
          f"{(time.perf_counter() - started) * 1000:.0f} ms")
    for store in stores.values():
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="full runs per variant (order alternates)")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--synthetic", type=int, default=10_000, help="records of the synthetic store (0: skip)")
    args = parser.parse_args()
    print("$ python -m evals.bench.encryption " + " ".join(sys.argv[1:]))
    print(f"cipher AES-256-SIV (cryptography), {os.cpu_count()} cores")
    key = generate_key()
    base = Path(tempfile.mkdtemp(prefix="synthex-bench-encryption-"))
    started = time.perf_counter()
    try:
        demo(base, key, args.repeat, args.queries)
        if args.synthetic:
            synthetic(base, key, args.synthetic, args.queries)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
