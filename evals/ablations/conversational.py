"""Ablation of the ``conversational`` recipe on LoCoMo: each part switched off (or added) in turn.

Every variant searches already-ingested records through the real search engine: the ``conversational``
architecture's workspace (shared with ``synthex eval locomo --compare conversational``), or for the
write-time enrichment row the ``conversational-enriched`` one. Only the recipe (and, for stemming, the
BM25 index) changes. A workspace that exists is re-opened by the architecture's incremental run (a no-op
when nothing changed, a few seconds per conversation); only a missing one is ingested. Its FTS index is
then rebuilt afresh (``rebuild_fts``: same results, comparable sizes), and left as its architecture
defines it at the end.

Per variant: turn- and session-level metrics (sessions ranked by their turns, as ``synthex eval locomo``
scores them: ``evals.benchmarks.locomo.benchmark.add_question``), both per category; wall time; and what the index
costs. The caches of every store are dropped before each variant, so each variant builds, and is timed
and measured with, only the structures it uses.

    python -m evals.ablations.conversational --data ../shared/data/locomo/locomo10_dev7.json \\
        --work-dir <project>/.synthex/evals/work/locomo --json ablation.json --markdown ablation.md
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from evals.architectures import ranked_leaf_keys, resolve
from evals.benchmarks.locomo.benchmark import add_question, ingest_conversation
from evals.benchmarks.locomo.data import load_locomo
from evals.metrics import mean
from evals.scoring import Tally
from synthex_resources.commits import with_commit_retry
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.search import SearchEngine
from synthex_resources.search.engine import FTS_COLUMN
from synthex_resources.search.strategies.base import SearchStrategy
from synthex_resources.search.strategies.builtin import CONVERSATIONAL, HYBRID

STEPS = ["turns-in-context"]  # the context-window records both architectures search
METRICS = ("recall_any@5", "recall_any@10", "recall_all@10", "ndcg_any@10")
_NOT_STRUCTURES = (Executor, type(threading.Lock()), type(threading.RLock()))  # deep_bytes stops there


class Variant(NamedTuple):
    config: SearchStrategy  # the search strategy (a variant: ``CONVERSATIONAL.with_(...)``)
    stem: bool = True  # the BM25 index stemmed (both architectures' own choice) or not
    architecture: str = "conversational"  # whose ingested workspace is searched (evals/architectures.py)


BEFORE_13 = CONVERSATIONAL.with_(entity_weight=0.0)
VARIANTS: dict[str, Variant] = {
    "conversational (all parts)": Variant(CONVERSATIONAL),
    # Issue 13, item 1: the same recipe over records indexed with their entities, dates and topics.
    "+ write-time enrichment": Variant(CONVERSATIONAL, architecture="conversational-enriched"),
    "without the date prior": Variant(CONVERSATIONAL.with_(date_weight=0.0)),
    "without neighbour credit": Variant(CONVERSATIONAL.with_(neighbour_weight=0.0)),
    "speakers' names kept in the query": Variant(CONVERSATIONAL.with_(drop_participants=False)),
    "without the turns' own dense score": Variant(CONVERSATIONAL.with_(leaf_dense_weight=0.0)),
    "without stemming": Variant(CONVERSATIONAL, stem=False),
    "RRF hybrid (k=10) instead of leaf-sum": Variant(HYBRID),
    # Issue 13: the multi-hop strategies (search/strategies/conversational_multihop.py) and the temporal change, each on top of the
    # recipe as it was before issue 13 (BEFORE_13: so each row says what that strategy alone adds).
    "before issue 13 (no entity expansion)": Variant(BEFORE_13),
    "without relative/span dates (issue 3 before)": Variant(CONVERSATIONAL.with_(relative_dates=False)),
    "+ (a) decomposition, sum": Variant(BEFORE_13.with_(decompose="sum")),
    "+ (a) decomposition, max": Variant(BEFORE_13.with_(decompose="max")),
    "+ (b) shared-entity expansion 0.3": Variant(BEFORE_13.with_(entity_weight=0.3)),
    "+ (b) shared-entity expansion 0.15": Variant(BEFORE_13.with_(entity_weight=0.15)),
    "+ (b) shared-entity expansion 0.1": Variant(BEFORE_13.with_(entity_weight=0.1)),
    "+ (b) shared-entity expansion 0.15, 10 seeds": Variant(BEFORE_13.with_(entity_weight=0.15, expand_seeds=10)),
    "+ (b) 0.15 and (c) PageRank 0.15": Variant(BEFORE_13.with_(entity_weight=0.15, ppr_weight=0.15)),
    "+ (c) personalized PageRank 0.3": Variant(BEFORE_13.with_(ppr_weight=0.3)),
    "+ (c) personalized PageRank 0.15": Variant(BEFORE_13.with_(ppr_weight=0.15)),
    "+ (d) MMR lambda 0.7": Variant(BEFORE_13.with_(diversify="mmr", mmr_lambda=0.7)),
    "+ (d) MMR lambda 0.85": Variant(BEFORE_13.with_(diversify="mmr", mmr_lambda=0.85)),
    "+ (d) session diversification 0.3": Variant(BEFORE_13.with_(diversify="session", session_penalty=0.3)),
    "+ (d) session diversification 0.15": Variant(BEFORE_13.with_(diversify="session", session_penalty=0.15)),
}


# -- what an index costs ----------------------------------------------------------------------------
def disk_bytes(store: Any) -> dict[str, int]:
    """The records table as its current version holds it on disk, in LanceDB's own figures: data files,
    the FTS index, other indices (older versions and dropped indices left in the directory excluded).
    LanceDB's ``total_bytes`` counts the data files and every index: the data is what the indices leave."""
    tbl = store.records_table()
    if tbl is None:
        return {"table": 0, "fts": 0, "other_indices": 0}
    fts = other = 0
    for index in tbl.list_indices():
        size = int(getattr(index, "size_bytes", 0) or 0)
        if index.name == f"{FTS_COLUMN}_idx":
            fts += size
        else:
            other += size
    return {"table": int(tbl.stats()["total_bytes"]) - fts - other, "fts": fts, "other_indices": other}


def rebuild_fts(store: Any, stem: bool) -> None:
    """Build the FTS index afresh. An index that had rows folded in later (``ensure_index``'s optimize)
    keeps them as another partition, larger on disk than one built over the same rows at once, with the
    same search results: rebuilding makes the sizes compare techniques, not the workspace's history."""
    tbl = store.records_table()
    if tbl is not None and any(i.name == f"{FTS_COLUMN}_idx" for i in tbl.list_indices()):
        with_commit_retry(lambda: tbl.drop_index(f"{FTS_COLUMN}_idx"))
    SearchEngine(store).ensure_index(stem=stem)


def deep_bytes(obj: Any, seen: set[int] | None = None, skip: tuple[type, ...] = ()) -> int:
    """Approximate memory of an object graph: ``nbytes`` of numpy arrays (a view counts its base once),
    ``sys.getsizeof`` of everything else, each object once. Stops at ``skip`` types, locks, executors."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (*skip, *_NOT_STRUCTURES)):
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        if isinstance(obj.base, np.ndarray):
            return deep_bytes(obj.base, seen, skip)
        elements = sum(deep_bytes(x, seen, skip) for x in obj.ravel()) if obj.dtype == object else 0
        return int(obj.nbytes) + elements
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        return size + sum(deep_bytes(k, seen, skip) + deep_bytes(v, seen, skip) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return size + sum(deep_bytes(x, seen, skip) for x in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return size + deep_bytes(vars(obj), seen, skip)
    return size


def memory_bytes(store: Any) -> dict[str, int]:
    """Per query-time structure the searches built on the store (dense matrix, leaf-sum bookkeeping,
    multi-hop lexicon...): its approximate size (``deep_bytes``). Thread pools are not structures."""
    built = store.search_state.built()
    return {name: deep_bytes(value, skip=(type(store),)) for name, value in sorted(built.items())
            if not isinstance(value, Executor)}


def _add(into: dict[str, int], part: dict[str, int]) -> None:
    for key, value in part.items():
        into[key] = into.get(key, 0) + value


# -- the run ----------------------------------------------------------------------------------------
def session_by_category(questions: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Session-level recall per category, from ``Tally.result``'s per-question rows."""
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for row in questions:
        groups[row["category"]].append(row["session"])
    return {c: {"recall_any@10": mean(rows)["recall_any@10"], "recall_all@10": mean(rows)["recall_all@10"],
                "n": len(rows)} for c, rows in sorted(groups.items())}


def run(data: Path, work_dir: Path, limit: int | None = None, k: int = 10, offset: int = 0,
        only: list[str] | None = None, log=print) -> list[dict]:
    """``only``: substrings of the variant names to run (default: all). Each row carries its questions'
    hits under ``questions`` (``main`` prints the rows without them)."""
    chosen = {name: v for name, v in VARIANTS.items() if not only or any(o.lower() in name.lower() for o in only)}
    raw = json.loads(data.read_text(encoding="utf-8"))
    conversations = load_locomo(data)[offset:][: limit or None]
    embedder = EmbedderConfig().create()
    pipes: dict[str, dict[str, Any]] = {}
    for arch in resolve(list(dict.fromkeys(v.architecture for v in chosen.values())), None):
        started = time.perf_counter()
        pipes[arch.name] = {c.sample_id: ingest_conversation(arch, c.sample_id, raw, work_dir, embedder)
                            for c in conversations}
        for pipe in pipes[arch.name].values():
            rebuild_fts(pipe.app.store, pipe.lexical_stem)
        print(f"# {arch.name}: {len(conversations)} workspaces under {work_dir / arch.work_key} opened, "
              f"FTS indices rebuilt, in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    rows = []
    try:
        for name, variant in chosen.items():
            rows.append(_run_variant(name, variant, conversations, pipes[variant.architecture], k))
            log(json.dumps({key: value for key, value in rows[-1].items() if key != "questions"}))
    finally:
        for arch_pipes in pipes.values():  # leave the workspaces as their architectures define them
            for pipe in arch_pipes.values():
                SearchEngine(pipe.app.store).ensure_index(stem=pipe.lexical_stem)
                pipe.close()
    return rows


def _run_variant(name: str, variant: Variant, conversations: list, pipes: dict[str, Any], k: int) -> dict:
    tally = Tally()  # its wall_s: the variant's whole time (index check, caches, searches, scoring)
    searching = index_s = cold_s = 0.0
    disk: dict[str, int] = {}
    memory: dict[str, int] = {}
    for conv in conversations:
        store = pipes[conv.sample_id].app.store
        store.close()  # drop the caches an earlier variant built: this one builds (and is measured with) its own
        engine = SearchEngine(store)
        started = time.perf_counter()
        engine.ensure_index(stem=variant.stem)  # a stemming change rebuilds the FTS index
        index_s += time.perf_counter() - started
        session_of = {t.dia_id: t.session_id for t in conv.turns}
        questions = [(i, q) for i, q in enumerate(conv.questions) if q.evidence]
        if questions:  # first search on a cold store: loads the matrix, builds the per-scope bookkeeping
            started = time.perf_counter()
            engine.search(questions[0][1].question, steps=STEPS, k=k, strategy=variant.config)
            cold_s += time.perf_counter() - started
        for index, question in questions:
            started = time.perf_counter()
            hits = engine.search(question.question, steps=STEPS, k=k, strategy=variant.config)
            searching += time.perf_counter() - started
            turns = ranked_leaf_keys(hits, question.question, lambda r: r.meta("chat.message_id"), k)
            add_question(tally, question, turns, session_of, question_id=f"{conv.sample_id}/q{index}")
        _add(disk, disk_bytes(store))  # after the searches: the first dense search writes missing vectors
        _add(memory, memory_bytes(store))
    return ablation_row(tally, {"variant": name, "architecture": variant.architecture, "stemmed": variant.stem},
                        searching=searching, index_s=index_s, cold_s=cold_s, disk=disk, memory=memory)


def ablation_row(tally: Tally, identity: dict[str, Any], *, searching: float, index_s: float, cold_s: float,
                 disk: dict[str, int], memory: dict[str, int]) -> dict[str, Any]:
    """One variant's row of an ablation table (``table``): its identity, then turn and session metrics by
    category, its times (search, index, cold first query) and sizes, and each question's hits."""
    m = tally.result()
    turn, session = m["metrics"]["turn"], m["metrics"]["session"]
    n = m["n_questions"]
    return {
        **identity, "n": n,
        **{key: turn[key] for key in METRICS},
        "by_category": {c: {"recall_any@10": round(v["recall_any@10"], 4),
                            "recall_all@10": round(v["recall_all@10"], 4), "n": v["n"]}
                        for c, v in m["by_category"].items()},
        "session": {**{key: session[key] for key in METRICS}, "by_category": session_by_category(m["questions"])},
        "wall_s": m["wall_s"], "search_s": round(searching, 2), "index_s": round(index_s, 2),
        "cold_s": round(cold_s, 2), "ms_per_query": round(1000 * searching / max(n, 1), 1),
        "disk_bytes": disk, "memory_bytes": memory,
        "questions": [{"id": q["question_id"], "hits": q["hits"]} for q in m["questions"]],
    }


# -- output -----------------------------------------------------------------------------------------
def main(run_ablation: Any = None, work_dir_help: str = "the eval's work dir: holds the conversational "
         "(and conversational-enriched) workspaces", description: str | None = None) -> None:
    """The command line of an ablation script: ``run_ablation(data, work_dir, limit, only=, offset=)`` gives the rows
    (this module's ``run`` by default), printed as tables and optionally written as JSON / markdown."""
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, default=Path(".synthex/evals/work/locomo"), help=work_dir_help)
    parser.add_argument("--limit", type=int, default=None, help="at most this many conversations")
    parser.add_argument("--offset", type=int, default=0,
                        help="skip this many conversations first (held-out checks: choose on --limit 4, "
                             "score on --offset 4)")
    parser.add_argument("--only", action="append", default=None,
                        help="run only the variants whose name contains this (repeatable)")
    parser.add_argument("--json", type=Path, default=None, help="write the rows (with each question's hits) here")
    parser.add_argument("--markdown", type=Path, default=None, help="write the tables here")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = (run_ablation or run)(args.data, args.work_dir, args.limit, only=args.only, offset=args.offset)
    text = table(rows)
    print(text)
    print(f"\n# total {time.perf_counter() - started:.0f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(text.lstrip() + "\n", encoding="utf-8")


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


SHORT = {"scopes": "leaf-sum scope", "lexicons": "multi-hop lexicon", "memory_bm25": "in-memory BM25"}


def _metric_table(rows: list[dict], level: str) -> list[str]:
    pick = (lambda r: r) if level == "turn" else (lambda r: r["session"])
    cats = sorted({c for r in rows for c in pick(r)["by_category"]})
    ns = {c: next(pick(r)["by_category"][c]["n"] for r in rows if c in pick(r)["by_category"]) for c in cats}
    lines = [f"| variant | {level} recall_any@5 | recall_any@10 | recall_all@10 | ndcg_any@10 | "
             + " | ".join(f"{c} (n={ns[c]}) any/all" for c in cats) + " |",
             "|" + "---|" * (5 + len(cats))]
    for r in rows:
        p = pick(r)
        per = " | ".join(f"{p['by_category'][c]['recall_any@10']:.3f} / {p['by_category'][c]['recall_all@10']:.3f}"
                         if c in p["by_category"] else "-" for c in cats)
        lines.append(f"| {r['variant']} | {p['recall_any@5']:.4f} | {p['recall_any@10']:.4f} | "
                     f"{p['recall_all@10']:.4f} | {p['ndcg_any@10']:.4f} | {per} |")
    return lines


def table(rows: list[dict]) -> str:
    """Markdown: turn level, session level (both with recall_any@10 / recall_all@10 per category), then
    cost: wall time, latency, and the index on disk and in memory."""
    if not rows:
        return "\n(no variants)"
    base_disk = rows[0]["disk_bytes"]
    cost = ["| variant | wall s | ms/query | index check s | cold first query s | on disk: records table + FTS "
            "index, MB | in memory: query-time structures, MB |", "|" + "---|" * 7]
    for r in rows:
        d = r["disk_bytes"]
        on_disk = "same index" if d == base_disk and r is not rows[0] else \
            f"{_mb(d['table'] + d['fts'])} ({_mb(d['table'])} + FTS {_mb(d['fts'])})"
        in_memory = " + ".join(f"{SHORT.get(name, name)} {_mb(b)}" for name, b in r["memory_bytes"].items()) or "-"
        cost.append(f"| {r['variant']} | {r['wall_s']:.1f} | {r['ms_per_query']} | {r['index_s']:.1f} | "
                    f"{r['cold_s']:.1f} | {on_disk} | {in_memory} |")
    return "\n".join([
        "", "Turn level (k = 10; per category recall_any@10 / recall_all@10):", "", *_metric_table(rows, "turn"),
        "", "Session level (sessions ranked by their turns' order; per category recall_any@10 / recall_all@10):", "",
        *_metric_table(rows, "session"),
        "", "Cost. wall s: the variant's whole time (index check, cold caches, searches, drill-down, scoring). "
        "ms/query: warm engine.search only. On disk: the records table's current version (data files) and its "
        "FTS index (each built afresh), summed over the workspaces, as LanceDB reports them ('same index': as the "
        "first row). "
        "In memory: approximate deep size of what the searches built on the store, summed over the workspaces.",
        "", *cost])


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
