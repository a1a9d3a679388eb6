"""Search latency at 10k / 100k / 1M records (synthetic corpus) on this machine.

    python -m evals.bench.search --sizes 10000,100000          # default (bm25, dense, hybrid, conversational)
    python -m evals.bench.search --sizes 1000000               # ~1.5 GB of vectors
    python -m evals.bench.search --sizes 100000 --dense-index float32,binary   # dense modes side by side

The corpus has Zipf-distributed words. Its vectors (``--vectors``) are either ``anchored`` (the default:
each is a real MiniLM embedding of a LoCoMo turn plus Gaussian noise, cosine ~0.8 to it, so the corpus
has the cluster structure of real embeddings at any size) or ``random`` unit vectors (no structure: the
worst case for any approximate index). Queries are 3 corpus words followed by a LoCoMo question,
embedded by the real offline embedder, so dense and hybrid latency include embedding the query. Every
query filters by step and branch, as the product does. ``--store DIR`` keeps the built store in DIR and
reuses it on the next run (a 1M store takes minutes to write).
Prints build/update times, p50/p95 per mode, and peak RSS. Each size runs in its own process.

The first query of each mode on a freshly opened store (``cold_first_query_s``) is timed in a new
process per mode, after the run above (so with whatever the store persisted beside its table,
search/indexes/sidecar.py): from opening the store to the first hits, the lazy imports (lancedb, faiss) included;
``process_wall_s`` is the whole process (its imports and exit too). ``--cold MODE --store DIR`` runs one of them alone.

``--dense-index`` lists the dense index modes to measure on the same store (search/indexes/dense_index.py):
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
from pathlib import Path

import numpy as np
import pyarrow as pa

from evals.shared_data import LOCOMO_DEV7, shared_data_file
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search import SearchEngine, load_search_strategies
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.postings import postings_bm25
from synthex_resources.search.indexes.sidecar import sidecar
from synthex_resources.search.state import SearchSettings
from synthex_resources.store.schemas import records_schema

MAIN_SCOPE = BranchScope.own()

DIM = 384
VOCAB = 30_000


DEFAULT_DATA = shared_data_file(LOCOMO_DEV7)


def locomo_texts(data: Path) -> tuple[list[str], list[str]]:
    """(turn texts, question texts) of a LoCoMo file, in file order."""
    turns, questions = [], []
    for conv in json.loads(data.read_text()):
        for key, session in conv["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [t["text"] for t in session if t.get("text")]
        questions += [str(qa["question"]) for qa in conv.get("qa", []) if qa.get("question")]
    return turns, questions


class Vectors:
    """The corpus's vectors: ``anchored`` on real embeddings, or ``random``."""

    def __init__(self, kind: str, anchors: np.ndarray | None = None, noise: float = 0.75) -> None:
        self.kind, self.anchors, self.noise = kind, anchors, noise

    def make(self, n: int, rng: np.random.Generator) -> np.ndarray:
        out = rng.standard_normal((n, DIM)).astype(np.float32)
        if self.kind == "anchored":
            # noise of norm ~0.75 around a unit anchor: cosine to it ~0.8
            out *= self.noise / np.sqrt(DIM)
            out += self.anchors[rng.integers(0, len(self.anchors), size=n)]
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def corpus(n: int, seed: int, offset: int = 0, vectors: Vectors | None = None) -> list[Record]:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.2, size=(n, 24)), VOCAB) - 1
    vectors = (vectors or Vectors("random")).make(n, rng)
    out = []
    for i in range(n):
        rid = f"{offset + i:012d}"
        out.append(Record(id=rid, content=" ".join(f"w{r}" for r in ranks[i]), step="turns", branch="main",
                          period=f"2024-{(i % 12) + 1:02d}", materialization_key=rid,
                          metadata={"time": {"created_at": "2024-01-01T00:00:00Z"}}, embedding=vectors[i].tolist()))
    return out


def anchor_vectors(turns: list[str], cache: Path | None) -> np.ndarray:
    """The LoCoMo turns' embeddings (minutes of CPU on a busy machine), kept in ``cache`` when given: the
    embedder is deterministic, so a later run reads the same vectors."""
    if cache is not None and cache.exists():
        found = np.load(cache)
        if len(found) == len(turns):
            return found
    vectors = RecordStore(tempfile.mkdtemp(prefix="synthex-embed-")).embedder.embed(turns)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, vectors)
    return vectors


def corpus_arrow(store: RecordStore, n: int, seed: int, offset: int = 0, vectors: Vectors | None = None) -> pa.Table:
    """``corpus(n, seed, offset, vectors)`` as the records table's rows, built column-wise: the rows
    ``store.records.upsert`` would write for those records (same ids, contents, fingerprints, metadata
    and vectors; checked by tests/test_million.py), without a Record and a dict per row."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.2, size=(n, 24)), VOCAB) - 1
    vecs = (vectors or Vectors("random")).make(n, rng)
    words = np.char.add("w", np.arange(VOCAB).astype(str)).tolist()
    contents = [" ".join([words[r] for r in row]) for row in ranks.tolist()]
    ids = [f"{offset + i:012d}" for i in range(n)]
    periods = [f"2024-{(i % 12) + 1:02d}" for i in range(n)]
    fingerprint = store.records._tables.content_fingerprint
    schema = records_schema(DIM)
    columns = {
        "id": ids, "content": contents, "step": ["turns"] * n, "branch": ["main"] * n, "period": periods,
        "sources": pa.array([[]] * n, pa.list_(pa.string())), "materialization_key": ids, "run_id": [""] * n,
        "created_at": [""] * n, "fingerprint": [fingerprint(c) for c in contents],
        "metadata": [json.dumps({"time": {"created_at": "2024-01-01T00:00:00Z"}}, sort_keys=True)] * n,
        "audit": ["{}"] * n,
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), pa.float32()), DIM),
    }
    return pa.table([pa.array(columns[f.name], f.type) if not isinstance(columns[f.name], pa.Array)
                     else columns[f.name] for f in schema], schema=schema)


def append_rows(store: RecordStore, rows: pa.Table) -> None:
    """Append new rows in one commit (a fresh bench store: no row key is there yet, so this is what
    ``merge_insert`` would do, without its join against the table)."""
    tbl = store.records.table(create=True)
    store.records._tables.commit(lambda: tbl.add(rows))


def percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_ms": round(1000 * s[len(s) // 2], 2), "p95_ms": round(1000 * s[int(len(s) * 0.95)], 2)}


def measure(engine: SearchEngine, queries: list[str], mode: str, hits: list | None = None) -> dict[str, float]:
    """p50 / p95 wall ms of ``mode`` over ``queries``, and the process's CPU ms per query (every thread's:
    on a shared machine the wall figures carry the other work's load, the CPU figure much less)."""
    times = []
    strategy = load_search_strategies().get(mode)
    cpu0 = time.process_time()
    for q in queries:
        t0 = time.perf_counter()
        found = engine.search(q, steps=["turns"], k=10, strategy=strategy)
        times.append(time.perf_counter() - t0)
        if hits is not None:
            hits.append([h.id for h in found])
    cpu_ms = 1000 * (time.process_time() - cpu0) / max(1, len(queries))
    return percentiles(times) | {"cpu_ms_per_query": round(cpu_ms, 2)}


def lexical_agreement(store: RecordStore, engine: SearchEngine, queries: list[str]) -> dict:
    """Which index the lexical leg searched, and (when it is the persisted postings, search/indexes/postings.py)
    its top-10 agreement with LanceDB's FTS index on the same queries, and the FTS latency beside it."""
    postings = postings_bm25(store)
    ds = store.dataset("records")
    if not postings.usable(ds):
        return {"index": "lancedb-fts"}
    where = engine.where(["turns"], MAIN_SCOPE)
    fts_store = RecordStore(str(store.uri), search=SearchSettings(postings_enabled=False))
    fts_engine = SearchEngine(fts_store)
    got, want, times = [], [], []
    for q in queries:
        got.append([i for i, _ in engine.lexical(q, where, 10)])
        t0 = time.perf_counter()
        want.append([i for i, _ in fts_engine.lexical(q, where, 10)])
        times.append(time.perf_counter() - t0)
    return {"index": "postings", "last_update": postings.last_update, "agreement@10_vs_fts": overlap(got, want),
            "fts_leg": percentiles(times)}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return round(int(f.read().split()[1]) * resource.getpagesize() / 2**20, 1)


def overlap(got: list[list[str]], want: list[list[str]]) -> float:
    """Mean share of each wanted top list found in the matching got list."""
    shares = [len(set(g) & set(w)) / len(w) for g, w in zip(got, want, strict=True) if w]
    return round(float(np.mean(shares)), 4) if shares else 1.0


def dense_modes(engine: SearchEngine, queries: list[str], modes: list[str]) -> dict:
    """Latency per dense index mode for the dense leg alone (``leg``: query already embedded) and the
    dense, hybrid and conversational recipes, with recall against the exact float32 scan (for the dense
    leg and recipe: the share of the exact dense top 10 returned; for hybrid and conversational: the
    share of the same recipe's top 10 under the float32 mode). The modes take turns query by query (a
    shared machine's load hits them alike)."""
    index = dense_index(engine.store)
    vectors = engine.store.embedder.embed(queries)
    exact = [[rid for rid, _, _ in index.search(v, ["turns"], MAIN_SCOPE, None, 10, exact=True)] for v in vectors]
    setup: dict[str, float] = {}
    for mode in modes:
        index.mode = mode
        t0 = time.perf_counter()
        index.search(vectors[0], ["turns"], MAIN_SCOPE, None, 10)  # binary: builds the sign bits; auto: starts the IVF
        index.wait_for_ann()
        setup[mode] = round(time.perf_counter() - t0, 2)
    recipes = ("dense", "hybrid", "conversational")
    registry = load_search_strategies()
    strategies = {recipe: registry.get(recipe) for recipe in recipes}
    times: dict[str, dict[str, list[float]]] = {m: {r: [] for r in ("leg", *recipes)} for m in modes}
    hits: dict[str, dict[str, list[list[str]]]] = {m: {r: [] for r in ("leg", *recipes)} for m in modes}
    for query, vector in zip(queries, vectors, strict=True):
        for mode in modes:
            index.mode = mode
            t0 = time.perf_counter()
            found = [rid for rid, _, _ in index.search(vector, ["turns"], MAIN_SCOPE, None, 50)]
            times[mode]["leg"].append(time.perf_counter() - t0)
            hits[mode]["leg"].append(found[:10])
            for recipe in recipes:
                t0 = time.perf_counter()
                result = engine.search(query, steps=["turns"], k=10, strategy=strategies[recipe])
                times[mode][recipe].append(time.perf_counter() - t0)
                hits[mode][recipe].append([h.id for h in result])
    index.mode = modes[0]
    m = index._current()
    out: dict = {}
    for mode in modes:
        row: dict = {name: percentiles(t) for name, t in times[mode].items()}
        row["leg"]["recall@10_vs_exact"] = overlap(hits[mode]["leg"], exact)
        row["dense"]["recall@10_vs_exact"] = overlap(hits[mode]["dense"], exact)
        for recipe in ("hybrid", "conversational"):
            row[recipe]["overlap@10_vs_float32"] = overlap(hits[mode][recipe], hits["float32"][recipe]) \
                if "float32" in hits else None
        row["matrix_mb"] = round((m.vectors.nbytes + (m.bits.nbytes if m.bits is not None and mode == "binary" else 0))
                                 / 2**20, 1)
        row["setup_s"] = setup[mode]
        out[mode] = row
    out["rss_mb"] = rss_mb()
    return out


def build(n: int, root: str, vectors: Vectors) -> tuple[RecordStore, dict]:
    """The store of ``n`` records in ``root``: written unless a previous run left it complete there."""
    store = RecordStore(root, search=SearchSettings(dense_mode="auto"))
    marker = Path(root) / "bench_built.json"
    if marker.exists() and json.loads(marker.read_text()).get("records") == n:
        return store, {"write_s": "reused", "fts_build_s": "reused", "vectors": json.loads(marker.read_text())["vectors"]}
    t0 = time.perf_counter()
    batch = 50_000
    for start in range(0, n, batch):
        # the corpus in 50k pieces (its seeds, so the same records as ever), written in big appends
        append_rows(store, corpus_arrow(store, min(batch, n - start), seed=start, offset=start, vectors=vectors))
        print(f"  wrote {min(start + batch, n):,} / {n:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    SearchEngine(store).ensure_index()
    fts_build_s = time.perf_counter() - t0
    marker.write_text(json.dumps({"records": n, "vectors": vectors.kind}))
    return store, {"write_s": round(write_s, 1), "fts_build_s": round(fts_build_s, 2), "vectors": vectors.kind}


def one_size(n: int, queries_n: int = 100, modes: list[str] | None = None, vector_kind: str = "anchored",
             data: Path = DEFAULT_DATA, root: str | None = None) -> dict:
    given_root = root is not None
    root = root or tempfile.mkdtemp(prefix=f"synthex-search-{n}-")
    turns, questions = locomo_texts(data) if data.exists() else ([], [])
    if vector_kind == "anchored" and not turns:
        raise SystemExit(f"{data}: not found; anchored vectors need LoCoMo turns (or pass --vectors random)")
    cache = Path(root).parent / "bench_anchors.npy" if given_root else None
    anchors = anchor_vectors(turns, cache) if vector_kind == "anchored" else None
    store, result = build(n, root, Vectors(vector_kind, anchors))
    engine = SearchEngine(store)
    t0 = time.perf_counter()
    engine.ensure_index()  # a reused store gets the indexes this tree adds (bitmaps on step and branch)
    result["ensure_index_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    strategies = load_search_strategies()  # loaded once, outside the timed searches
    engine.search("warm", steps=["turns"], strategy=strategies.get("dense"))  # loads the in-memory vector matrix
    matrix_load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ann_ready = dense_index(store).wait_for_ann()  # auto mode: the IVF index, built in the background
    ann_wait_s = time.perf_counter() - t0
    rng = np.random.default_rng(99)
    questions = questions or ["what did they say about it"]
    queries = [" ".join(f"w{int(r)}" for r in rng.integers(5, 400, size=3)) + " " + questions[i % len(questions)]
               for i in range(queries_n)]
    store.embedder.embed(["warm up"])
    engine.search(queries[0], steps=["turns"])
    result |= {"records": n, "store": root, "dense_matrix_load_s": round(matrix_load_s, 2),
               "ann_ready": ann_ready, "ann_build_wait_s": round(ann_wait_s, 2), "latency": {}}
    # conversational: the first query builds the per-scope bookkeeping (cached per table version). The
    # synthetic records are their own leaves with no turn order or speakers, so this measures the
    # fusion's cost, not its quality.
    t0 = time.perf_counter()
    engine.search(queries[0], steps=["turns"], strategy=strategies.get("conversational"))
    result["conversational_scope_build_s"] = round(time.perf_counter() - t0, 2)
    for mode in ("bm25", "dense", "hybrid", "conversational"):
        result["latency"][mode] = measure(engine, queries, mode)
    result["lexical_index"] = lexical_agreement(store, engine, queries)
    result["dense_modes"] = dense_modes(engine, queries, modes or ["auto", "float32"])
    # A write, then the first query of each kind: how long until the new records are searchable fast.
    rows_now = store.records_table().count_rows()  # a reused store grew in earlier runs: new ids, new texts
    fresh = corpus(1000, seed=10**6 + rows_now, offset=rows_now, vectors=Vectors(vector_kind, anchors))
    t0 = time.perf_counter()
    store.records.upsert(fresh)
    result["add_1000_s"] = round(time.perf_counter() - t0, 2)
    probe = " ".join(fresh[0].content.split()[:3])
    first: dict[str, float] = {}
    for mode in ("bm25", "dense", "hybrid", "conversational"):
        t0 = time.perf_counter()
        engine.search(probe, steps=["turns"], strategy=strategies.get(mode))
        first[mode] = round(time.perf_counter() - t0, 3)
    result["first_query_after_write_s"] = first
    result["dense_update_kind"] = dense_index(store).last_update
    result["scope_update_kind"] = store.search_state.scopes.last
    result["latency_with_1000_unindexed"] = {m: measure(engine, queries[:50], m) for m in ("hybrid", "conversational")}
    t0 = time.perf_counter()
    engine.ensure_index()
    result["fts_incremental_update_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    engine.search(probe, steps=["turns"], strategy=strategies.get("conversational"))
    result["conversational_first_query_after_index_update_s"] = round(time.perf_counter() - t0, 3)
    result["dense_reload_kind"] = dense_index(store).last_update
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    sidecar(store).wait()  # what this process persisted, written before the cold processes read it
    result["cold_first_query_s"] = {}
    for mode in ("bm25", "dense", "hybrid", "conversational"):
        result["cold_first_query_s"][mode] = cold_first_query(root, mode, probe)
    return result


def quick(n: int, queries_n: int, root: str, data: Path = DEFAULT_DATA) -> dict:
    """The figures the issue asks for, on a store ``build`` left at ``root``, without the rest of ``one_size``:
    p50/p95 per mode as the product searches (``auto`` dense index, the lexical index it picks), each mode's
    top-10 agreement with the exact path (the float32 scan and LanceDB's FTS index), peak RSS, and the first
    query of each mode in a new process."""
    questions = locomo_texts(data)[1] if data.exists() else []
    questions = questions or ["what did they say about it"]
    rng = np.random.default_rng(99)
    queries = [" ".join(f"w{int(r)}" for r in rng.integers(5, 400, size=3)) + " " + questions[i % len(questions)]
               for i in range(queries_n)]
    store = RecordStore(root)
    engine = SearchEngine(store)
    result: dict = {"records": n, "store": root}
    t0 = time.perf_counter()
    engine.ensure_index()  # the postings of a large unstemmed store are built (or loaded, extended) here
    result["ensure_index_s"] = round(time.perf_counter() - t0, 2)
    result["lexical_index"] = postings_bm25(store).last_update or "lancedb-fts"
    strategies = load_search_strategies()
    t0 = time.perf_counter()
    engine.search(queries[0], steps=["turns"], strategy=strategies.get("dense"))
    result["dense_first_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    result["ann_ready"] = dense_index(store).wait_for_ann()
    result["ann_wait_s"] = round(time.perf_counter() - t0, 2)
    result["ivf"] = dense_index(store).ivf_source
    engine.search(queries[0], steps=["turns"], strategy=strategies.get("conversational"))
    # the exact path: the float32 scan and LanceDB's FTS index
    exact_store = RecordStore(root, search=SearchSettings(dense_mode="float32", postings_enabled=False))
    exact = SearchEngine(exact_store)
    result["latency"] = {}
    for mode in ("bm25", "dense", "hybrid", "conversational"):
        got: list = []
        row = measure(engine, queries, mode, got)
        want: list = []
        row["exact_path"] = measure(exact, queries, mode, want)
        row["agreement@10_vs_exact"] = overlap(got, want)
        result["latency"][mode] = row
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    sidecar(store).wait()
    probe = queries[-1]
    result["cold_first_query_s"] = {mode: cold_first_query(root, mode, probe)
                                    for mode in ("bm25", "dense", "hybrid", "conversational")}
    return result


def cold_first_query(root: str, mode: str, query: str) -> dict[str, float]:
    """The first ``mode`` query in a new process on the store at ``root`` (see the module doc)."""
    cmd = [sys.executable, "-m", "evals.bench.search", "--cold", mode, "--store", root, "--probe", query]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    wall = time.perf_counter() - t0
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = round(wall, 2)  # imports, the two queries, exit
    return result


def cold_one(root: str, mode: str, query: str) -> dict[str, float]:
    t0, cpu0 = time.perf_counter(), time.process_time()
    store = RecordStore(root)
    engine = SearchEngine(store)
    strategy = load_search_strategies().get(mode)
    engine.search(query, steps=["turns"], strategy=strategy)
    first = time.perf_counter() - t0
    first_cpu = time.process_time() - cpu0  # every thread's: on a shared machine, the load-free part
    t0 = time.perf_counter()
    engine.search(query + " again", steps=["turns"], strategy=strategy)
    second = time.perf_counter() - t0
    return {"first_s": round(first, 2), "first_cpu_s": round(first_cpu, 2), "second_s": round(second, 3),
            "dense": dense_index(store).last_update, "scope": store.search_state.scopes.last,
            "lexical": postings_bm25(store).last_update or "lancedb-fts",
            "ivf": dense_index(store).ivf_source, "rss_mb": rss_mb()}  # now, not the peak: a child's ru_maxrss starts from its parent's (fork)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--dense-index", default="auto,float32",
                        help="dense index modes to compare, comma-separated (auto, float32, binary); "
                             "the first is the one the main latency table uses")
    parser.add_argument("--vectors", choices=("anchored", "random"), default="anchored")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo file: anchors and questions")
    parser.add_argument("--store", default=None, help="keep the store here (one size) and reuse it next time")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--build-only", action="store_true", help="write the --store stores and stop")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true",
                        help="with --store and one size: per-mode latency, agreement with the exact path, cold")
    parser.add_argument("--cold", default=None, help="time the first query of this mode in this process (--store)")
    parser.add_argument("--probe", default="w3 w17 w250 What did they talk about?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold is not None:
        print(json.dumps(cold_one(args.store, args.cold, args.probe)))
        return
    if args.quick:
        n = int(args.sizes)
        print(json.dumps(quick(n, args.queries, f"{args.store}/{n}", args.data)))
        return
    modes = args.dense_index.split(",")
    if args.build_only:
        turns = locomo_texts(args.data)[0] if args.vectors == "anchored" else []
        cache = Path(args.store) / "bench_anchors.npy" if args.store else None
        vectors = Vectors(args.vectors, anchor_vectors(turns, cache) if turns else None)
        for n in (int(s) for s in args.sizes.split(",")):
            print(build(n, f"{args.store}/{n}", vectors)[1])
        return
    if args.one is not None:
        print(json.dumps(one_size(args.one, args.queries, modes, args.vectors, args.data, args.store)))
        return
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        cmd = [sys.executable, "-m", "evals.bench.search", "--one", str(n), "--dense-index", args.dense_index,
               "--vectors", args.vectors, "--data", str(args.data), "--queries", str(args.queries)]
        out = subprocess.run(cmd + (["--store", f"{args.store}/{n}"] if args.store else []),
                             stdout=subprocess.PIPE, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(r)
        lat = r["latency"]
        print(f"\n== {n:,} records ({r['vectors']} vectors) ==  write {r['write_s']} s, FTS build {r['fts_build_s']} s, "
              f"dense matrix load {r['dense_matrix_load_s']} s, peak RSS {r['peak_rss_mb']} MB")
        for mode, v in lat.items():
            print(f"  {mode:<7} p50 {v['p50_ms']:>8} ms   p95 {v['p95_ms']:>8} ms")
        for mode, row in r["dense_modes"].items():
            if mode == "rss_mb":
                continue
            print(f"  dense index {mode:<8} (matrix {row['matrix_mb']} MB, setup {row['setup_s']} s): leg alone "
                  f"p50/p95 {row['leg']['p50_ms']}/{row['leg']['p95_ms']} ms, recall@10 vs exact "
                  f"{row['leg']['recall@10_vs_exact']}")
            for recipe in ("dense", "hybrid", "conversational"):
                v = row[recipe]
                agree = v.get("recall@10_vs_exact", v.get("overlap@10_vs_float32"))
                print(f"      {recipe:<15} p50/p95 {v['p50_ms']}/{v['p95_ms']} ms, top-10 agreement with exact {agree}")
        print(f"  RSS after the dense modes {r['dense_modes']['rss_mb']} MB; IVF ready {r['ann_ready']} "
              f"(waited {r['ann_build_wait_s']} s after the matrix load)")
        print(f"  conversational scope build (first query on a fresh store object) {r['conversational_scope_build_s']} s")
        print(f"  add 1,000 records {r['add_1000_s']} s; first query after it (s): {r['first_query_after_write_s']} "
              f"(dense: {r['dense_update_kind']}, leaf-sum bookkeeping: {r['scope_update_kind']})")
        for mode, v in r["latency_with_1000_unindexed"].items():
            print(f"  {mode} with the 1,000 not yet in the FTS index: p50/p95 {v['p50_ms']}/{v['p95_ms']} ms")
        print(f"  FTS update {r['fts_incremental_update_s']} s; first conversational query after it "
              f"{r['conversational_first_query_after_index_update_s']} s (dense: {r['dense_reload_kind']})")
        lex = r.get("lexical_index", {})
        if lex.get("index") == "postings":
            print(f"  lexical leg: persisted postings ({lex['last_update']}), top-10 agreement with LanceDB FTS "
                  f"{lex['agreement@10_vs_fts']}; the FTS leg alone p50/p95 {lex['fts_leg']['p50_ms']}/"
                  f"{lex['fts_leg']['p95_ms']} ms")
        for mode, v in r.get("cold_first_query_s", {}).items():
            print(f"  first {mode} query in a new process: {v['first_s']} s (process wall {v['process_wall_s']} s) "
                  f"(second {v['second_s']} s; dense {v['dense'] or '-'}, bookkeeping {v['scope'] or '-'}, "
                  f"RSS {v['rss_mb']} MB)")
    print(json.dumps(results))


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
