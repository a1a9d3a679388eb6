"""Mem0 as a peer in the same eval run: the same conversations, the same offline embedder, its own
local vector store (embedded Qdrant), ``add(infer=False)`` (no LLM), scored with the same metrics.

Optional: ``pip install -e ".[peers]"`` (mem0ai). Mem0's BM25 leg needs hub files, so offline it
searches by vector only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from synthex.core.naming import path_segment

# Mem0 reads this at import time: no telemetry upload (there is no network here).
os.environ["MEM0_TELEMETRY"] = "False"

from evals.locomo import load_locomo, turn_text  # noqa: E402
from evals.locomo_scoring import add_question  # noqa: E402
from evals.metrics import dedupe  # noqa: E402
from evals.peers.local_embeddings import LocalEmbeddingServer  # noqa: E402
from evals.scoring import Tally  # noqa: E402


def mem0_available() -> bool:
    try:
        import mem0  # noqa: F401
    except ImportError:
        return False
    return True


def _memory(root: Path, collection: str, base_url: str, dim: int):
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
        raise RuntimeError("the mem0 peer needs mem0ai: pip install -e '.[peers]'")
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


def evaluate_mem0_longmemeval(benchmark: Any, data: Path, work_dir: Path, limit: int | None = None, k: int = 10,
                              log=print, embedder: Any = None) -> dict[str, Any]:
    """Mem0 on LongMemEval: each question's haystack its own Mem0 memory holding the protocol's turns as
    Synthex ingests them (``documents``: official, user turns only), one ``add(infer=False)`` per turn with its
    id in the metadata; the question searched by vector, ``benchmark.ranking_depth`` deep (the paper's session
    metrics walk the turn ranking), scored by ``benchmark.score`` as Synthex's rankings are. ``benchmark``: a
    ``LongMemEval``; ``embedder``: the eval's (its memo and disk cache: the same vectors, not embedded again)."""
    from evals.longmemeval import documents
    from synthex.core.naming import path_segment

    if not mem0_available():
        raise RuntimeError("the mem0 peer needs mem0ai: pip install -e '.[peers]'")
    conversations = list(benchmark.load(data))[: limit or None]
    for line in benchmark.load_notes():
        log(line)
    depth = max(k, benchmark.ranking_depth)
    tally = Tally(category_level=benchmark.category_level)
    scores = []
    with LocalEmbeddingServer(embedder) as server:
        for index, conv in enumerate(conversations, start=1):
            root = work_dir / benchmark.work_subdir / "mem0" / path_segment(conv.question_id)
            shutil.rmtree(root, ignore_errors=True)  # Mem0 add() is not idempotent: start clean
            root.mkdir(parents=True)
            user = f"q{index}"
            memory = _memory(root, "lme", server.base_url, server.dim)
            try:
                for doc in documents(conv, "turn", benchmark.protocol)[0]:
                    memory.add(doc.text, user_id=user, infer=False, metadata={"turn_id": doc.doc_id})
                for question in benchmark.questions(conv):
                    found = memory.search(question.text, top_k=depth, filters={"user_id": user}, threshold=0.0)
                    turns = [t for t in dedupe(r.get("metadata", {}).get("turn_id")
                                               for r in found.get("results", [])) if t]
                    scored = benchmark.score(question, turns, conv)
                    scores.append(scored)
                    tally.record(scored, question.gold_turns, question.gold_sessions, question.category,
                                 question_id=question.question_id, question=question.text)
            finally:
                _close(memory)
            if embedder is not None and hasattr(embedder, "save"):
                embedder.save()
            if index % benchmark.progress_every == 0 or index == len(conversations):
                log(f"  mem0: {index}/{len(conversations)} haystacks ({conv.question_id})")
    return tally.result(
        benchmark=benchmark.result_name, pipeline="mem0ai (add infer=False, vector search)", architecture="mem0",
        branch="-", mode="dense", **benchmark.result_fields(data, conversations, scores))
