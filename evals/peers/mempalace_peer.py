"""MemPalace as a peer in the same LongMemEval run (``--compare mempalace``): each question's haystack its own
palace (ChromaDB, MemPalace's default backend), one drawer per turn of the protocol, searched with MemPalace's
own ``search_memories`` (vector candidates re-ranked with BM25, its default "hybrid" search), scored by the
same protocol as Synthex's rankings (``evals.peers.haystacks``).

The embedder is Synthex's: MemPalace's ``openai-compat`` embedding model pointed at the loopback endpoint
over the eval's embedder (the same MiniLM vectors, from the eval's memo and disk cache; MemPalace's own
MiniLM would be downloaded from the hub, which is not reachable here). Its configuration is read from
``MEMPALACE_CONFIG_DIR``: set to a folder of the eval's work dir for the peer's run and restored after, so
neither the user's ``~/.mempalace`` nor the process keeps it.

MemPalace's published LongMemEval figure (recall_any@5 96.6 % on S, "raw" mode) is of its own protocol
(benchmarks/longmemeval_bench.py of MemPalace/mempalace): one document per *session* (its user turns
joined), ChromaDB's default MiniLM, every question including abstention, gold = all ``answer_session_ids``.
Here it is scored by Synthex's protocol instead (official: user turns, the paper's metrics), like every
architecture of the run. Optional: ``pip install -e ".[mempalace]"``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evals.peers.local_embeddings import LocalEmbeddingServer

WING, ROOM = "longmemeval", "haystack"  # MemPalace files every drawer under a wing and a room


def mempalace_available() -> bool:
    try:
        import mempalace  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def _config_dir(folder: Path) -> Iterator[None]:
    """``MEMPALACE_CONFIG_DIR`` for the peer's run (MemPalace reads its settings there), then as it was."""
    before = os.environ.get("MEMPALACE_CONFIG_DIR")
    os.environ["MEMPALACE_CONFIG_DIR"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MEMPALACE_CONFIG_DIR", None)
        else:
            os.environ["MEMPALACE_CONFIG_DIR"] = before


class _Palace:
    """One haystack's palace (``evals.peers.haystacks.PeerMemory``): a drawer per turn, its id the turn id."""

    def __init__(self, root: Path, server: LocalEmbeddingServer) -> None:
        from mempalace.palace import get_collection

        self.path = str(root / "palace")
        self.drawers = get_collection(self.path, create=True)

    def add(self, texts: Sequence[str], turn_ids: Sequence[str]) -> None:
        if texts:  # one batched upsert, as MemPalace's miner files a file's chunks
            self.drawers.upsert(documents=list(texts), ids=list(turn_ids),
                                metadatas=[{"wing": WING, "room": ROOM, "source_file": t} for t in turn_ids])

    def search(self, query: str, depth: int) -> list[str]:
        from mempalace.searcher import search_memories

        found = search_memories(query, self.path, n_results=depth)
        if "error" in found:
            raise RuntimeError(f"mempalace search failed: {found['error']}")
        return [hit.get("drawer_id") for hit in found.get("results", [])]

    def close(self) -> None:
        self.drawers = None


def evaluate_mempalace_longmemeval(benchmark: Any, data: Path, work_dir: Path, limit: int | None = None, k: int = 10,
                                   log: Callable[[str], None] = print, embedder: Any = None) -> dict[str, Any]:
    """MemPalace on LongMemEval with the eval's embedder (module docstring)."""
    from evals.peers.haystacks import evaluate_peer_haystacks

    if not mempalace_available():
        raise RuntimeError("the mempalace peer needs mempalace: pip install -e '.[mempalace]'")
    config = work_dir / benchmark.work_subdir / "mempalace-config"
    config.mkdir(parents=True, exist_ok=True)

    def open_palace(root: Path, server: LocalEmbeddingServer) -> _Palace:
        (config / "config.json").write_text(json.dumps({
            "embedding_model": "openai-compat", "embedding_api_url": server.base_url,
            "embedding_api_model": "synthex-minilm"}))
        return _Palace(root, server)

    with _config_dir(config):
        return evaluate_peer_haystacks(benchmark, data, work_dir, "mempalace", open_palace, limit=limit, k=k,
                                       log=log, embedder=embedder, mode="hybrid",
                                       pipeline="mempalace (a drawer per turn, search_memories: vector + BM25)")
