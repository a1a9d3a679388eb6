"""An embedder that writes down, in a file the test owns, each time a process loads its model and each
call that embeds (tests/test_run_workers.py): which process loaded how many models, and how many shards
each one embedded with them. MiniLM's vectors, unchanged."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synthex_resources.embedder import MiniLMOnnxEmbedder


class CountedEmbedder(MiniLMOnnxEmbedder):
    """MiniLM that appends ``load <pid>`` to ``log`` when it loads its model and ``embed <pid>`` at each
    call; rebuilt in a worker process (``for_worker``) with the same log."""

    def __init__(self, log: Path, max_tokens: int = 256, batch_size: int = 16, threads: int | None = None) -> None:
        super().__init__(max_tokens, batch_size, threads)
        self.log = str(log)

    def _note(self, event: str) -> None:
        with open(self.log, "a") as out:  # one short line, appended: lines of two processes do not mix
            out.write(f"{event} {os.getpid()}\n")

    def _load(self) -> None:
        self._note("load")
        super()._load()

    def embed(self, texts: list[str]) -> np.ndarray:
        self._note("embed")
        return super().embed(texts)

    def for_worker(self) -> CountedWorker:
        return CountedWorker(self.log, self.max_tokens, self.batch_size)


@dataclass(frozen=True)
class CountedWorker:
    log: str
    max_tokens: int
    batch_size: int

    def create(self) -> CountedEmbedder:
        return CountedEmbedder(Path(self.log), self.max_tokens, self.batch_size, threads=1)


def events(log: Path, kind: str) -> Counter[int]:
    """How many ``kind`` events (load, embed) each process wrote to ``log``, by pid."""
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(int(pid) for event, pid in (line.split() for line in lines) if event == kind)
