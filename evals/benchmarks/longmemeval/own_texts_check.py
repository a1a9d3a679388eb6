"""The texts an architecture embeds itself on one LongMemEval dev haystack, beyond its turns: each call the store
makes to the model (size, CPU), against the same texts in one length-sorted call, the turns' and question's
vectors given ahead in the memo as ``evaluate`` gives them (docs/benchmarks.md, issue 34).

    python -m evals.benchmarks.longmemeval.own_texts_check [HAYSTACK] [ARCHITECTURE] [DATA]
"""

from __future__ import annotations

import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

from evals.architectures import resolve
from evals.benchmarks.longmemeval.benchmark import LongMemEval
from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file
from evals.shared_embedder import MemoEmbedder
from synthex_resources.embedder import MiniLMOnnxEmbedder

DEV = shared_data_file(LONGMEMEVAL_S_DEV)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CallLog:
    """The model, with each call's texts and CPU seconds kept."""

    def __init__(self, inner: MiniLMOnnxEmbedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.calls: list[tuple[list[str], float]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        started = cpu_s()
        out = self.inner.embed(texts)
        self.calls.append((list(texts), cpu_s() - started))
        return out


def main(index: int, name: str, data: Path, work: Path) -> None:
    benchmark = LongMemEval()
    question = benchmark.load(data)[index]
    model = MiniLMOnnxEmbedder()
    model.embed(["warm up"])  # the model's load is not timed
    log = CallLog(model)
    memo = MemoEmbedder(log)
    memo.embed(sorted(set(benchmark.texts(question)), key=len))  # what the embed-ahead thread gives
    log.calls.clear()
    [arch] = resolve([name], None)
    source = benchmark.ingest(question)
    pipe = arch.ingest(work / arch.work_key, source.filename, source.payload, source.source_format, memo)
    pipe.search(question.question, step=arch.steps, k=benchmark.ranking_depth, mode=arch.mode, branch=arch.branch,
                as_of=question.question_date or None)  # the first search embeds what is embedded at search time
    pipe.close()
    texts = [t for call, _ in log.calls for t in call]
    model_s = sum(s for _, s in log.calls)
    for call, seconds in log.calls:
        print(f"call of {len(call)} texts ({min(map(len, call))}-{max(map(len, call))} characters): {seconds:.1f} cpu-s")
    if texts:
        started = cpu_s()
        model.embed(sorted(texts, key=len))
        one = cpu_s() - started
        print(f"{len(texts)} texts: {model_s:.1f} cpu-s in those calls, {one:.1f} cpu-s in one sorted call")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "hierarchical-expanded",
             Path(sys.argv[3]) if len(sys.argv) > 3 else DEV, Path(tmp))
