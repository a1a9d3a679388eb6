"""A cold first architecture against the embedding floor (issue 34 item 4): the first N scored LongMemEval dev
questions through ``evaluate`` with a fresh work dir and a fresh embedding cache, then the floor measured back to
back in the same process: the distinct texts the eval's model embedded, in one length-sorted call, with 1 thread
and with the eval's threads. Prints texts, the eval's wall and CPU (user + sys, every thread), its CPU by thread,
the floor and both ratios, and the load before and after. ``--rows FILE`` writes the per-question rows (JSON) to compare two versions;
``--replay`` also replays the eval's model calls (the model's CPU in the eval's batches, tokenizing apart).

    python -m evals.benchmarks.longmemeval.floor_check N [ARCH] [--rows FILE] [--replay] [--data FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from evals.architectures import resolve
from evals.benchmarks import evaluate
from evals.benchmarks.longmemeval.benchmark import LongMemEval
from evals.shared_data import LONGMEMEVAL_S_DEV, shared_data_file
from evals.shared_embedder import MemoEmbedder
from synthex_resources.embedder import TOKENIZE_WINDOW, MiniLMOnnxEmbedder

DEV = shared_data_file(LONGMEMEVAL_S_DEV)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class CallLog:
    """The eval's model, each call's texts kept (to replay them as the eval made them)."""

    def __init__(self, inner: MiniLMOnnxEmbedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


class ThreadCpu:
    """CPU seconds of each thread of this process, sampled every ``every`` s from /proc (a thread's last sample
    is kept after it ends), grouped by Python thread name (digits dropped) or, for native threads (the ONNX
    intra-op pool, the tokenizer's and Lance's), by their kernel name."""

    def __init__(self, every: float = 1.0) -> None:
        self.every, self.seen = every, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="floor-check-sampler", daemon=True)

    def _sample(self) -> None:
        names = {t.native_id: t.name for t in threading.enumerate()}
        tick = os.sysconf("SC_CLK_TCK")
        for tid in os.listdir("/proc/self/task"):
            try:
                stat = Path(f"/proc/self/task/{tid}/stat").read_text()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            cpu = (int(fields[11]) + int(fields[12])) / tick
            name = names.get(int(tid)) or self.seen.get(tid, ("native " + comm, 0))[0]
            self.seen[tid] = (re.sub(r"[-_]?\d+(_\d+)?$", "", name) if name != "native " + comm else name, cpu)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def __enter__(self) -> ThreadCpu:
        self._sample()
        self.start = {tid: cpu for tid, (_, cpu) in self.seen.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def by_name(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for tid, (name, cpu) in self.seen.items():
            out[name] = out.get(name, 0.0) + cpu - self.start.get(tid, 0.0)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def timed(fn, *args):  # noqa: ANN001, ANN201 - a script's helper
    cpu, wall = cpu_s(), time.perf_counter()
    out = fn(*args)
    return out, cpu_s() - cpu, time.perf_counter() - wall


def tokenize_cpu(model: MiniLMOnnxEmbedder, calls: list[list[str]]) -> float:
    """CPU of tokenizing the calls as the model does: each call once, a window of texts at a time."""
    tokenizer = model._tokenizer  # noqa: SLF001 - a measurement of the model's own step
    started = cpu_s()
    for texts in calls:
        for first in range(0, len(texts), TOKENIZE_WINDOW):
            tokenizer.encode_batch([t or " " for t in texts[first:first + TOKENIZE_WINDOW]])
    return cpu_s() - started


def main(limit: int, arch: str, data: Path, rows_out: Path | None, replay: bool = False) -> None:
    model = MiniLMOnnxEmbedder()
    log = CallLog(model)
    work = Path(tempfile.mkdtemp(prefix="lme-floor-"))
    memo = MemoEmbedder.with_disk_cache(work / "embedding-cache", inner=log)  # type: ignore[arg-type]
    print(f"load before: {load()}; {os.cpu_count()} cores; eval model threads {model.threads}", flush=True)
    with ThreadCpu() as threads_cpu:
        result, eval_cpu, eval_wall = timed(
            lambda: evaluate(LongMemEval(), data, resolve([arch], None), work / "work", limit=limit, embedder=memo,
                             embedding_cache=work / "embedding-cache",
                             log=lambda line: print(line, file=sys.stderr, flush=True))[0])
    print("cpu-s by thread: " + ", ".join(f"{name} {cpu:.1f}" for name, cpu in threads_cpu.by_name().items()
                                        if cpu >= 0.05), flush=True)
    print(f"load after the eval: {load()}", flush=True)
    texts = [t for call in log.calls for t in call]
    distinct = list(dict.fromkeys(texts))
    print(f"{arch}, {limit} haystacks, cold: wall {eval_wall:.1f} s, cpu {eval_cpu:.1f} s; the model embedded "
          f"{len(texts)} texts ({len(distinct)} distinct) in {len(log.calls)} calls", flush=True)
    if replay:  # the eval's calls one by one on its model (loaded, warm): its model CPU in the eval's batch shapes
        _, replay_cpu, replay_wall = timed(lambda: [model.embed(c) for c in log.calls])
        token_cpu = tokenize_cpu(model, log.calls)
        print(f"the eval's calls replayed: {replay_cpu:.1f} cpu-s ({replay_wall:.1f} s wall), of which tokenizing "
              f"{token_cpu:.1f} cpu-s; the rest of the eval (ingest, Lance, search, scoring, model load, threads' "
              f"contention): ~{eval_cpu - replay_cpu:.1f} cpu-s", flush=True)
    ordered = sorted(distinct, key=len)
    floors = {}
    for threads in sorted({1, model.threads}):
        floor_model = MiniLMOnnxEmbedder(threads=threads)
        floor_model.embed(["warm up"])  # the model's load is not the floor
        vectors, cpu, wall = timed(floor_model.embed, ordered)
        floors[threads] = (cpu, wall)
        print(f"floor, one length-sorted call, {threads} thread(s): {len(ordered)} texts, {cpu:.1f} cpu-s "
              f"({len(ordered) / cpu:.1f} per cpu-s), {wall:.1f} s wall", flush=True)
    same = all(np.array_equal(memo.embed([t])[0], v) for t, v in zip(ordered, vectors, strict=True))
    print(f"the eval's vectors equal the one call's: {same}")
    for threads, (cpu, wall) in floors.items():
        print(f"ratio against the {threads}-thread floor: cpu {eval_cpu / cpu:.2f} x, wall {eval_wall / wall:.2f} x "
              f"(wall against that floor's cpu: {eval_wall / cpu:.2f} x)")
    print(f"load at the end: {load()}")
    if rows_out is not None:
        rows_out.write_text(json.dumps(result["questions"], indent=1, sort_keys=True, default=str))


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    parser = argparse.ArgumentParser(prog="floor_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("limit", type=int)
    parser.add_argument("arch", nargs="?", default="raw-bm25")
    parser.add_argument("--data", type=Path, default=DEV)
    parser.add_argument("--rows", type=Path, default=None)
    parser.add_argument("--replay", action="store_true", help="also replay the eval's model calls (model CPU "
                                                               "in the eval's batches, tokenizing apart)")
    args = parser.parse_args()
    from synthex.core.errors import SynthexError

    try:
        main(args.limit, args.arch, args.data, args.rows, args.replay)
    except SynthexError as exc:  # a missing or malformed data file: one line, not a traceback
        sys.exit(f"floor_check: {exc}")
