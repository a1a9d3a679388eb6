"""One loop for every peer on LongMemEval: each question's haystack is the peer's own memory, holding the
protocol's turns as Synthex ingests them (``documents``: official, user turns only), each with its turn id;
the question is searched ``benchmark.ranking_depth`` deep (the paper's session metrics walk the turn
ranking) and scored by ``benchmark.score`` exactly as Synthex's rankings are. With ``granularity="session"``
the memory holds the protocol's session documents instead (MemPalace's own benchmark), and its ranking of
session ids is scored by ``benchmark.score_sessions``.

A peer gives ``open_memory(root)``: a ``PeerMemory`` in the empty folder ``root``, embedding through the
loopback endpoint over the eval's embedder (``LocalEmbeddingServer``, which the peer opens: the same vectors,
from the eval's memo and disk cache).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from evals.metrics import dedupe
from evals.scoring import Tally
from synthex.core.naming import path_segment


class PeerMemory(Protocol):
    def add(self, texts: Sequence[str], turn_ids: Sequence[str]) -> None: ...

    def search(self, query: str, depth: int) -> list[str]:
        """Document ids (turn ids; session ids for session documents), best first."""

    def close(self) -> None: ...


def evaluate_peer_haystacks(benchmark: Any, data: Path, work_dir: Path, peer: str,
                            open_memory: Callable[[Path], PeerMemory], *, limit: int | None, k: int,
                            log: Callable[[str], None], embedder: Any, pipeline: str, mode: str,
                            granularity: str = "turn") -> dict[str, Any]:
    """``peer``'s result on ``benchmark`` (a ``LongMemEval``), like ``evaluate``'s for an architecture."""
    from evals.benchmarks.longmemeval.data import documents

    conversations = list(benchmark.load(data))[: limit or None]
    for line in benchmark.load_notes():
        log(line)
    depth = max(k, benchmark.ranking_depth)
    tally = Tally(category_level=benchmark.category_level)
    scores = []
    for index, conv in enumerate(conversations, start=1):
        root = work_dir / benchmark.work_subdir / peer / path_segment(conv.question_id)
        shutil.rmtree(root, ignore_errors=True)  # a peer's add is not idempotent: start clean
        root.mkdir(parents=True)
        memory = open_memory(root)
        try:
            docs = documents(conv, granularity, benchmark.protocol)[0]
            memory.add([d.text for d in docs], [d.doc_id for d in docs])
            for question in benchmark.questions(conv):
                ranked = [d for d in dedupe(memory.search(question.text, depth)) if d]
                scored = (benchmark.score(question, ranked, conv) if granularity == "turn"
                          else benchmark.score_sessions(question, ranked, conv))
                scores.append(scored)
                tally.record(scored, question.gold_turns, question.gold_sessions, question.category,
                             question_id=question.question_id, question=question.text)
        finally:
            memory.close()
        if embedder is not None and hasattr(embedder, "save"):
            embedder.save()
        if index % benchmark.progress_every == 0 or index == len(conversations):
            log(f"  {peer}: {index}/{len(conversations)} haystacks ({conv.question_id})")
    return tally.result(benchmark=benchmark.result_name, pipeline=pipeline, architecture=peer, branch="-", mode=mode,
                        **benchmark.result_fields(data, conversations, scores))
