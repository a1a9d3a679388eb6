"""What one LongMemEval haystack costs besides the model: the first N scored dev questions' workspaces ingested
and searched with every text's vector already in the eval's memo (a warm-up pass embeds them), fresh work dirs,
per run engine; wall and CPU (user + sys) of the timed pass, the texts the model embedded during it (0: the
figures are set-up and search only), and whether the engines' per-question rows are equal.
``python -m evals.benchmarks.longmemeval.overhead_check N [ARCH] [ENGINES] [CACHE_DIR]`` (docs/benchmarks.md, "LongMemEval ...")."""

from __future__ import annotations

import inspect
import resource
import sys
import tempfile
import time
from pathlib import Path

from evals.architectures import resolve
from evals.benchmarks import evaluate
from evals.benchmarks.longmemeval.benchmark import LongMemEval
from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file
from evals.shared_embedder import MemoEmbedder

DEV = shared_data_file(LONGMEMEVAL_S_DEV)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(limit: int, arch: str, engines: list[str], cache: Path | None) -> None:
    embedder = MemoEmbedder.with_disk_cache(cache)
    options = {}
    rows = {}
    for engine in engines:
        if "engine" in inspect.signature(evaluate).parameters:
            options = {"engine": engine}
        log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        # Warm-up: imports, the model, every text's vector (the timed pass then embeds nothing).
        evaluate(LongMemEval(), DEV, resolve([arch], None), Path(tempfile.mkdtemp(prefix="lme-warm-")), limit=limit,
                 embedder=embedder, log=log, **options)
        embedder.save()
        computed = embedder.computed
        cpu, wall = cpu_s(), time.perf_counter()
        result = evaluate(LongMemEval(), DEV, resolve([arch], None), Path(tempfile.mkdtemp(prefix="lme-timed-")),
                          limit=limit, embedder=embedder, log=log, **options)[0]
        cpu, wall = cpu_s() - cpu, time.perf_counter() - wall
        rows[engine] = result["questions"]
        print(f"{arch} engine={engine}: {limit} haystacks, wall {wall:.1f} s, cpu {cpu:.1f} s "
              f"({cpu / limit:.2f} cpu-s per haystack), texts embedded in the timed pass: "
              f"{embedder.computed - computed}", flush=True)
    if len(rows) > 1:
        first = next(iter(rows.values()))
        print(f"same per-question rows across {', '.join(rows)}: {all(r == first for r in rows.values())}")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    args = sys.argv[1:]
    main(int(args[0]), args[1] if len(args) > 1 else "raw-bm25",
         (args[2] if len(args) > 2 else "dagster").split(","), Path(args[3]) if len(args) > 3 else None)
