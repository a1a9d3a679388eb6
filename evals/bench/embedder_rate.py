"""Embedding rate of the offline embedder kinds on the same LoCoMo turns: texts per CPU-second, one thread.

    python -m evals.bench.embedder_rate --data ../shared/data/locomo/locomo10_dev7.json --turns 2000 \\
        --kinds minilm-onnx,bge-small-onnx --rounds 2

The turns are the first ``--turns`` of the file as the eval's leaf turns read (``turn_text``: "Speaker:
words", an image's caption after), in file order. Each kind's model is loaded (one warm-up text) before it is timed; the rounds alternate the kinds,
so a change of load on a shared machine falls on both. CPU time is the process's (the model's thread and
the tokenizer's); a vector's checksum per kind shows two rounds embedded the same bits. ``--threads`` is given to
each kind as its own ``threads``, which the kinds use differently (MiniLM: batches side by side on single-threaded
sessions; bge-small: intra-op threads of one session): each line says which (``threads_mean``), and at more than
one thread the kinds' rates compare two arrangements, not two models.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

from evals.benchmarks.locomo.data import load_locomo, turn_text
from synthex_resources.embedder import EmbedderConfig


def locomo_turns(data: Path, count: int) -> list[str]:
    turns = [turn_text(turn) for conv in load_locomo(data) for turn in conv.turns]
    return turns[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--kinds", default="minilm-onnx,bge-small-onnx")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    texts = locomo_turns(args.data, args.turns)
    models = {}
    for kind in args.kinds.split(","):
        model = EmbedderConfig(kind=kind).create()
        model.threads = args.threads  # read when the model loads, i.e. at the warm-up below
        model.embed(["warm up"])
        models[kind] = model
    for round_ in range(1, args.rounds + 1):
        for kind, model in models.items():
            load = os.getloadavg()[0]
            cpu, wall = time.process_time(), time.perf_counter()
            vectors = model.embed(texts)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(json.dumps({"round": round_, "kind": kind, "model": model.name, "texts": len(texts),
                              "threads": model.threads, "threads_mean": getattr(model, "threads_mean", None),
                              "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                              "texts_per_cpu_s": round(len(texts) / cpu, 1), "load_1m": round(load, 2),
                              "vectors_sha256": hashlib.sha256(vectors.tobytes()).hexdigest()[:16]}), flush=True)


if __name__ == "__main__":
    main()
