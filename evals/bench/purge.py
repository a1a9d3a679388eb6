"""Purge cost at scale: one source record with 1,000 descendants in a store of 100,000 records.

    python -m evals.bench.purge                              # 100,000 records, 1,000 descendants
    python -m evals.bench.purge --records 20000 --descendants 200

The store is written the way runs write it (records with provenance, several commits, an FTS index,
an LLM cache table), with random 384-dimension vectors in place of MiniLM's (the bytes a compaction
rewrites are the same; 100,000 real embeddings would take minutes without changing what is measured). Timed: the cascade (provenance closure), the delete,
the LLM cache cleanup, the physical compaction (deletions materialized, FTS index rebuilt, old
versions removed) and the raw-byte residue scan of the data directory. The re-run that recomputes the
aggregates depends on the pipeline and is timed by `synthex purge` end to end (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path

TOKEN = "QPLANTED9041"


def build_store(root: Path, records: int, descendants: int):  # -> (RecordStore, root id)
    import numpy as np

    from synthex.core.record import Record
    from synthex_resources.record_store import open_store
    from synthex_resources.search.engine import SearchEngine

    store = open_store(str(root / "lancedb"))  # the embedder only sizes the vector column here
    root_id = str(uuid.uuid5(uuid.NAMESPACE_URL, "root"))

    rng = np.random.default_rng(7)
    dim = store.embedder.dim

    def rec(i: int, step: str, content: str, sources: list[str], rid: str | None = None) -> Record:
        month = f"2024-{1 + i % 12:02d}"
        return Record(embedding=rng.standard_normal(dim, dtype=np.float32).tolist(), id=rid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"r{i}")), content=content, step=step,
                      branch="main", source_ids=sources, materialization_key=f"k{i}", run_id="bench",
                      created_at=f"{month}-15T00:00:00Z", metadata={"time": {"created_at": f"{month}-15T00:00:00Z"}},
                      audit={"model": "bench"}, period=month)

    batch = [rec(0, "chatgpt", f"user: my locker code is {TOKEN}, keep it safe", [], root_id)]
    # The descendants: 10 transforms of the root, each with 99 records made from it (facts, chunks).
    children = []
    for c in range(10):
        child = rec(1 + c, "transcripts", f"transcript part {c}: the locker code {TOKEN}", [root_id])
        children.append(child.id)
        batch.append(child)
    n = len(batch)
    while n < descendants + 1:
        batch.append(rec(n, "facts", f"fact {n} about the locker code {TOKEN}", [children[n % 10]]))
        n += 1
    while n < records:
        batch.append(rec(n, "chatgpt", f"user: conversation {n} about topic {n % 97} and project {n % 13}", []))
        n += 1
        if len(batch) >= 10_000:
            store.records.upsert(batch)
            batch = []
    if batch:
        store.records.upsert(batch)
    store.llm_cache.put_many([
        {"key": f"c{i}", "model": "m", "response": f"fact {i} about the locker code {TOKEN}" if 11 <= i < 61 else f"other {i}",
         "raw": "", "tokens_in": 1, "tokens_out": 1} for i in range(2000)])
    SearchEngine(store).ensure_index()
    return store, root_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--descendants", type=int, default=1_000)
    args = parser.parse_args()
    from synthex_resources.purge import compact_physically, delete_rows, drop_cached_responses, find_cascade
    from synthex_resources.residue import Needles, needles_of, scan

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        store, root_id = build_store(root, args.records, args.descendants)
        print(f"built {args.records} records in {time.perf_counter() - t0:.1f} s", flush=True)
        size_before = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        timings: dict[str, float] = {}

        def timed(name, fn):
            start = time.perf_counter()
            out = fn()
            timings[name] = time.perf_counter() - start
            print(f"  {name:<12} {timings[name]:7.2f} s", flush=True)
            return out

        # Positive control: the same scan before the purge (it decodes Lance's compressed pages).
        before = scan(root, Needles.of_texts([TOKEN]))
        cascade = timed("cascade", lambda: find_cascade(store, [root_id]))
        affected = cascade.affected_records
        records = store.records.get_many(affected)
        texts = {r.content for r in records}
        needles = needles_of([r.content for r in records if r.id == root_id])
        timed("delete", lambda: delete_rows(store, affected))
        dropped = timed("llm_cache", lambda: drop_cached_responses(store, texts, set(),
                                                                       Needles.of_texts(needles)))
        compaction = timed("compaction", lambda: compact_physically(store))
        residue = timed("residue_scan", lambda: scan(root, Needles.of_texts([*needles, TOKEN])))
        size_after = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        remaining = store.records.scan(["id"])
        total = sum(timings.values())
        print(f"purged {len(affected)} records ({cascade.steps}) of {args.records}; cache entries {dropped}; "
              f"{compaction.fragments_rewritten} fragments rewritten, {compaction.versions_removed} versions removed")
        holding = [r for r in store.records.scan(["content"]) if TOKEN in r["content"]]
        print(f"before: the scan found the token in {len(before)} file(s), {sum(before.values())} time(s); "
              f"after: {len(holding)} row(s) hold it")
        print(f"total {total:.2f} s; residue {residue or 'none'}; rows left {len(remaining)}; "
              f"data dir {size_before / 1e6:.1f} MB -> {size_after / 1e6:.1f} MB")
        print(json.dumps({"records": args.records, "affected": len(affected), "seconds": {k: round(v, 3) for k, v in
                          timings.items()}, "total_s": round(total, 3), "residue": residue,
                          "found_before": sum(before.values()), "rows_holding_after": len(holding)}))


if __name__ == "__main__":
    main()
