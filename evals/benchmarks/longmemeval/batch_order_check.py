"""A/B of the order the embed-ahead thread sends a haystack's texts in: chunks of 64 in haystack order against
chunks of 64 shortest first (``EmbedAheadOfWorkspaces``), on LongMemEval dev haystacks, one model in one
process; CPU (user + sys) and wall of each, and whether the vectors are bit-identical.
``python -m evals.benchmarks.longmemeval.batch_order_check [FIRST_HAYSTACK] [COUNT]`` (docs/benchmarks.md, "The model's batches")."""

from __future__ import annotations

import resource
import sys
import time

import numpy as np

from evals.benchmarks.longmemeval.benchmark import LongMemEval
from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file
from synthex_resources.embedder import MiniLMOnnxEmbedder

DEV = shared_data_file(LONGMEMEVAL_S_DEV)
CHUNK = 64


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(first: int, count: int) -> None:
    benchmark = LongMemEval()
    questions = benchmark.load(DEV)
    model = MiniLMOnnxEmbedder()
    model.embed(["warm up"])  # the model's load is not timed
    for index in range(first, first + count):
        texts = list(dict.fromkeys(benchmark.texts(questions[index])))
        vectors = {}
        for name, order in (("haystack order", texts), ("shortest first", sorted(texts, key=len))):
            cpu, wall = cpu_s(), time.perf_counter()
            chunks = [model.embed(order[i:i + CHUNK]) for i in range(0, len(order), CHUNK)]
            cpu, wall = cpu_s() - cpu, time.perf_counter() - wall
            vectors[name] = dict(zip(order, np.concatenate(chunks), strict=True))
            print(f"haystack {index}, chunks of {CHUNK}, {name}: {len(texts)} texts, {cpu:.1f} cpu-s "
                  f"({len(texts) / cpu:.1f} per cpu-s), {wall:.1f} s wall", flush=True)
        same = all(np.array_equal(vectors["haystack order"][t], vectors["shortest first"][t]) for t in texts)
        print(f"haystack {index}: bit-identical vectors: {same}")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, int(sys.argv[2]) if len(sys.argv) > 2 else 2)
