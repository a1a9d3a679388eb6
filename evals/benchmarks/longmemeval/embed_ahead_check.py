"""A/B of ``evaluate(embed_ahead=0)`` against ``embed_ahead=2`` on the first N scored LongMemEval dev questions
(raw-bm25, fresh work dirs, no disk cache): wall and CPU of each, and whether every per-question row is equal.
``python -m evals.benchmarks.longmemeval.embed_ahead_check N [DATA]`` (docs/benchmarks.md, "LongMemEval on the real files")."""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from evals.architectures import resolve
from evals.benchmarks import evaluate
from evals.benchmarks.longmemeval.benchmark import LongMemEval
from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file

DEV = shared_data_file(LONGMEMEVAL_S_DEV)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(limit: int, data: Path) -> None:
    results = {}
    for ahead in (0, 2):
        work = Path(tempfile.mkdtemp(prefix=f"lme-ahead{ahead}-"))
        cpu, wall = cpu_s(), time.perf_counter()
        results[ahead] = evaluate(LongMemEval(), data, resolve(["raw-bm25"], None), work, limit=limit,
                                  embed_ahead=ahead, log=lambda line: print(line, file=sys.stderr, flush=True))[0]
        print(f"embed_ahead={ahead}: wall {time.perf_counter() - wall:.1f} s, cpu {cpu_s() - cpu:.1f} s", flush=True)
    same_rows = results[0]["questions"] == results[2]["questions"]
    print(f"same per-question rows: {same_rows}; same metrics: {results[0]['metrics'] == results[2]['metrics']}")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main(int(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else DEV)
