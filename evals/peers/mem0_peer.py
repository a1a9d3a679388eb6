"""Mem0 as a peer in the same eval run: the same conversations, the same offline embedder, its own
local vector store (embedded Qdrant), ``add(infer=False)`` (no LLM), scored with the same metrics.

Optional: ``pip install -e ".[peers]"`` (mem0ai). Mem0's BM25 leg needs hub files, so offline it
searches by vector only.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.benchmarks.locomo.data import load_locomo, turn_text
from evals.benchmarks.locomo.scoring import add_question
from evals.metrics import dedupe
from evals.peers import PeerUnavailable
from evals.peers.local_embeddings import LocalEmbeddingServer
from evals.scoring import Tally
from synthex.core.naming import path_segment

MISSING = "the mem0 peer needs mem0ai: pip install -e '.[peers]'"


def _import_mem0() -> None:
    """Import mem0 with its telemetry off. Mem0 reads ``MEM0_TELEMETRY`` once, when ``mem0.memory.telemetry``
    is first imported, so the variable is set for that import only and the process's environment is put
    back as it was (a user's own setting is left alone)."""
    import sys

    if "mem0.memory.telemetry" in sys.modules:
        return
    before = os.environ.get("MEM0_TELEMETRY")
    if before is None:
        os.environ["MEM0_TELEMETRY"] = "False"  # no upload: there is no network here
    try:
        import mem0.memory.telemetry  # noqa: F401
    finally:
        if before is None:
            os.environ.pop("MEM0_TELEMETRY", None)


def mem0_available() -> bool:
    try:
        _import_mem0()
    except ImportError:
        return False
    return True


def _memory(root: Path, collection: str, base_url: str, dim: int):
    _import_mem0()
    from mem0 import Memory

    return Memory.from_config({
        "vector_store": {"provider": "qdrant", "config": {"path": str(root / "qdrant"), "collection_name": collection,
                                                         "embedding_model_dims": dim, "on_disk": True}},
        "embedder": {"provider": "openai", "config": {"model": "synthex-minilm", "openai_base_url": base_url,
                                                      "api_key": "local", "embedding_dims": dim}},
        "llm": {"provider": "openai", "config": {"model": "unused", "api_key": "unused", "openai_base_url": base_url}},
        "history_db_path": str(root / "history.db"),
    })


def _close(memory: Any) -> None:
    """Release both embedded Qdrant folders a Mem0 memory holds: its own, and the one its telemetry opens in
    MEM0_DIR (``migrations_qdrant``, the same folder for every memory of the process). Left to the garbage
    collector, the next conversation's memory can find that folder still locked ("already accessed by
    another instance of Qdrant client"), as the full suite saw once."""
    memory.vector_store.client.close()
    telemetry = getattr(memory, "_telemetry_vector_store", None)  # mem0 2.2's name; absent: nothing to close
    client = getattr(telemetry, "client", None)
    if client is not None:
        client.close()


def evaluate_mem0_locomo(data: Path, work_dir: Path, limit: int | None = None, k: int = 10, log=print) -> dict[str, Any]:
    if not mem0_available():
        raise PeerUnavailable(MISSING)
    conversations = load_locomo(data)[: limit or None]
    tally = Tally()
    with LocalEmbeddingServer() as server:
        for conv in conversations:
            root = work_dir / "mem0" / path_segment(conv.sample_id)
            shutil.rmtree(root, ignore_errors=True)  # Mem0 add() is not idempotent: start clean
            root.mkdir(parents=True)
            memory = _memory(root, conv.sample_id.replace("-", "_"), server.base_url, server.dim)
            for turn in conv.turns:
                memory.add(turn_text(turn), user_id=conv.sample_id, infer=False,
                           metadata={"dia_id": turn.dia_id, "session": turn.session_id})
            session_of = {t.dia_id: t.session_id for t in conv.turns}
            questions = [q for q in conv.questions if q.evidence]
            for question in questions:
                found = memory.search(question.question, top_k=k, filters={"user_id": conv.sample_id}, threshold=0.0)
                turns = dedupe(r.get("metadata", {}).get("dia_id") for r in found.get("results", []))
                add_question(tally, question, [t for t in turns if t], session_of)
            log(f"  mem0: {conv.sample_id} done ({len(questions)} questions)")
            _close(memory)
    return tally.result(
        benchmark="locomo", pipeline="mem0ai (add infer=False, vector search)", architecture="mem0",
        branch="-", mode="dense", data=str(data), conversations=len(conversations))


class _Mem0Haystack:
    """One haystack's Mem0 memory (``evals.peers.haystacks.PeerMemory``): ``add(infer=False)`` per turn with its
    id in the metadata, searched by vector."""

    user = "haystack"  # one memory per haystack: the user filter Mem0 requires selects all of it

    def __init__(self, root: Path, server: LocalEmbeddingServer) -> None:
        self.memory = _memory(root, "lme", server.base_url, server.dim)

    def add(self, texts: Sequence[str], turn_ids: Sequence[str]) -> None:
        for text, turn_id in zip(texts, turn_ids, strict=True):
            self.memory.add(text, user_id=self.user, infer=False, metadata={"turn_id": turn_id})

    def search(self, query: str, depth: int) -> list[str]:
        found = self.memory.search(query, top_k=depth, filters={"user_id": self.user}, threshold=0.0)
        return [r.get("metadata", {}).get("turn_id") for r in found.get("results", [])]

    def close(self) -> None:
        _close(self.memory)


def evaluate_mem0_longmemeval(benchmark: Any, data: Path, work_dir: Path, limit: int | None = None, k: int = 10,
                              log=print, embedder: Any = None) -> dict[str, Any]:
    """Mem0 on LongMemEval (``evals.peers.haystacks``): each question's haystack its own Mem0 memory, searched
    by vector. ``benchmark``: a ``LongMemEval``; ``embedder``: the eval's (its memo and disk cache: the same
    vectors, not embedded again)."""
    from evals.peers.haystacks import evaluate_peer_haystacks

    if not mem0_available():
        raise PeerUnavailable(MISSING)
    with LocalEmbeddingServer(embedder) as server:
        return evaluate_peer_haystacks(benchmark, data, work_dir, "mem0", lambda root: _Mem0Haystack(root, server),
                                       limit=limit, k=k, log=log, embedder=embedder,
                                       pipeline="mem0ai (add infer=False, vector search)", mode="dense")


def run_locomo(benchmark: Any, data: Path, work_dir: Path, *, limit: int | None, k: int, log: Any,
               embedding_cache: Path | None = None) -> dict[str, Any]:
    """The ``evals.peers.PEERS`` runner on LoCoMo (Mem0 embeds with its own server's default embedder)."""
    return evaluate_mem0_locomo(data, work_dir, limit=limit, k=k, log=log)


def run_longmemeval(benchmark: Any, data: Path, work_dir: Path, *, limit: int | None, k: int, log: Any,
                    embedding_cache: Path | None = None) -> dict[str, Any]:
    """The ``evals.peers.PEERS`` runner on LongMemEval: the eval's embedder and its disk cache."""
    from evals.shared_embedder import MemoEmbedder

    if not mem0_available():  # before the embedder loads
        raise PeerUnavailable(MISSING)
    return evaluate_mem0_longmemeval(benchmark, data, work_dir, limit=limit, k=k, log=log,
                                     embedder=MemoEmbedder.with_disk_cache(embedding_cache, warn=log))
