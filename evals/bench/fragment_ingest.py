"""Ingest spread over worker processes (synthex_resources/store/fragment_append.py): records per second
with 1 and 2 workers, and the tables they leave compared row for row with a one-process write.

    python -m evals.bench.fragment_ingest [--texts 480] [--shards 8]

The records: the first user and assistant turns of the LongMemEval dev haystacks
(/work/shared/data/longmemeval/longmemeval_s_dev.json.gz), each a record with the id Synthex gives a
source record (``record_id(materialization_key(...))``), its content and its MiniLM vector (1 ONNX thread
per worker: the embedding is the work that spreads). The one-process write builds every shard here and
writes one ``lance.write_dataset``; the worker runs write fragments and commit once. Prints each run's wall
seconds and records/s, whether the three tables are equal, the load average, and a JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file
from synthex_resources.embedder import MINILM_DIM, MiniLMWorker
from synthex_resources.store.fragment_append import ShardWorker

DATA = shared_data_file(LONGMEMEVAL_S_DEV)
SCHEMA = pa.schema([("id", pa.string()), ("content", pa.string()), ("vector", pa.list_(pa.float32(), MINILM_DIM))])
STEP, STEP_VERSION = "turns", "bench-1"


def turns(limit: int) -> list[tuple[str, str]]:
    """(key, text) of the first ``limit`` turns of the dev haystacks, in file order."""
    out: list[tuple[str, str]] = []
    for question in json.load(gzip.open(DATA)):
        for sid, session in zip(question["haystack_session_ids"], question["haystack_sessions"], strict=True):
            for n, turn in enumerate(session):
                out.append((f"{sid}:{n}", turn["content"]))
                if len(out) == limit:
                    return out
    return out


# MiniLM with one ONNX thread (``MiniLMOnnxEmbedder(threads=1)``), as each worker rebuilds it.
MINILM_ONE_THREAD = MiniLMWorker(max_tokens=256, batch_size=16)


def build(shard: list[tuple[str, str]], worker: ShardWorker) -> pa.Table:
    """A shard's records (module level: a worker process imports it), embedded by ``worker``'s model: a
    worker loads it on its first shard and embeds all its shards with it."""
    from synthex.core.hashing import fingerprint, materialization_key, record_id

    texts = [text for _, text in shard]
    vectors = worker.embedder(MINILM_ONE_THREAD).embed(texts)
    ids = [record_id(materialization_key(STEP, STEP_VERSION, [fingerprint(text)], key)) for key, text in shard]
    return pa.table({"id": ids, "content": texts, "vector": [v.tolist() for v in vectors]}, schema=SCHEMA)


def main() -> None:
    import lance

    from synthex_resources.store.fragment_append import append_in_workers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=480)
    parser.add_argument("--shards", type=int, default=8)
    args = parser.parse_args()
    items = turns(args.texts)
    size = -(-len(items) // args.shards)
    shards = [items[i:i + size] for i in range(0, len(items), size)]
    work = Path(tempfile.mkdtemp(prefix="synthex-fragments-"))
    results: dict[str, dict] = {}
    tables: dict[str, pa.Table] = {}
    try:
        start = time.perf_counter()
        here = ShardWorker()  # this process's model for the one-process write (each worker run loads its own)
        one = pa.concat_tables([build(s, here) for s in shards])
        lance.write_dataset(one, str(work / "one-process.lance"), schema=SCHEMA)
        wall = time.perf_counter() - start
        results["one process, write_dataset"] = {"wall_s": round(wall, 1), "records_per_s": round(len(items) / wall, 1)}
        tables["one process, write_dataset"] = lance.dataset(str(work / "one-process.lance")).to_table()
        for workers in (1, 2):
            uri = str(work / f"workers-{workers}.lance")
            start = time.perf_counter()
            version = append_in_workers(uri, SCHEMA, build, shards, workers=workers)
            wall = time.perf_counter() - start
            name = f"{workers} worker(s), fragments + one Append"
            results[name] = {"wall_s": round(wall, 1), "records_per_s": round(len(items) / wall, 1),
                             "version": version}
            tables[name] = lance.dataset(uri).to_table()
        for name, row in results.items():
            print(f"{name}: {len(items)} records in {row['wall_s']} s = {row['records_per_s']} records/s", flush=True)
        reference = tables["one process, write_dataset"]
        same = {name: t.equals(reference) for name, t in tables.items()}
        print(f"tables equal to the one-process write (ids, contents, vectors, row order): {same}")
        print(f"load average: {os.getloadavg()}")
        print(json.dumps({"texts": len(items), "shards": len(shards), "results": results, "equal": same}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
