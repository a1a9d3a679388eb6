"""An embedder whose ingest workers wait at a gate the test holds (tests/test_run_workers.py): a run killed
while its workers wait is killed before the commit, whatever the machine's load."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synthex_resources.embedder import MiniLMOnnxEmbedder


class GatedEmbedder(MiniLMOnnxEmbedder):
    """MiniLM in the run's own process; in a worker process, MiniLM behind the gate in ``gate``."""

    def __init__(self, gate: Path) -> None:
        super().__init__()
        self.gate = str(gate)

    def for_worker(self) -> GatedWorker:
        return GatedWorker(self.gate, self.max_tokens, self.batch_size)


@dataclass(frozen=True)
class GatedWorker:
    gate: str
    max_tokens: int
    batch_size: int

    def create(self) -> WaitingEmbedder:
        return WaitingEmbedder(Path(self.gate), self.max_tokens, self.batch_size)


class WaitingEmbedder(MiniLMOnnxEmbedder):
    """Says it is embedding (``waiting-<pid>``), then waits while ``hold`` exists."""

    def __init__(self, gate: Path, max_tokens: int, batch_size: int) -> None:
        super().__init__(max_tokens, batch_size, threads=1)
        self.gate_dir = gate

    def embed(self, texts: list[str]) -> np.ndarray:
        (self.gate_dir / f"waiting-{os.getpid()}").write_text(str(len(texts)))
        while (self.gate_dir / "hold").exists():
            time.sleep(0.05)
        return super().embed(texts)
