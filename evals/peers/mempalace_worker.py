"""The MemPalace peer's child process (``evals.peers.mempalace_peer``): MemPalace reads its settings (the embedding
model and endpoint) from ``MEMPALACE_CONFIG_DIR`` wherever it opens a palace, with no argument to pass them, so
that variable is set only in this process's environment, never in the eval's.

One JSON request per line on stdin, one JSON answer per line on stdout (``{"error": ...}`` for a failure);
anything MemPalace prints goes to stderr. Requests: ``open`` (root), ``add`` (texts, ids), ``search`` (query,
depth, how: ``search_memories`` = MemPalace's default search, ``query`` = the raw vector query of its own
LongMemEval benchmark), ``close``. Imports nothing of Synthex: it runs as a script.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

WING, ROOM = "longmemeval", "haystack"  # MemPalace files every drawer under a wing and a room


class Palace:
    def __init__(self, root: str) -> None:
        from mempalace.palace import get_collection

        self.path = f"{root}/palace"
        self.drawers = get_collection(self.path, create=True)
        self.count = 0

    def add(self, texts: list[str], ids: list[str]) -> None:
        if texts:  # one batched upsert, as MemPalace's miner files a file's chunks
            self.drawers.upsert(documents=texts, ids=ids,
                                metadatas=[{"wing": WING, "room": ROOM, "source_file": i} for i in ids])
            self.count += len(texts)

    def search(self, query: str, depth: int, how: str) -> list[str]:
        if how == "query":  # its benchmark's raw mode: the collection's vector query, at most the corpus
            if not self.count:
                return []
            found = self.drawers.query(query_texts=[query], n_results=min(depth, self.count))
            return list(found["ids"][0])
        from mempalace.searcher import search_memories

        hits = search_memories(query, self.path, n_results=depth)
        if "error" in hits:
            raise RuntimeError(f"search_memories: {hits['error']}")
        return [hit.get("drawer_id") for hit in hits.get("results", [])]


def serve(requests: TextIO, answers: TextIO) -> None:
    palace: Palace | None = None
    for line in requests:
        request = json.loads(line)
        answer: dict[str, Any] = {"ok": True}
        try:
            op = request["op"]
            if op == "open":
                palace = Palace(request["root"])
            elif op == "add":
                palace.add(request["texts"], request["ids"])
            elif op == "search":
                answer = {"ids": palace.search(request["query"], request["depth"], request["how"])}
            elif op == "close":
                palace = None
            else:
                answer = {"error": f"unknown request {op!r}"}
        except Exception as exc:  # noqa: BLE001 - every failure is one answer line the eval reports
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    protocol_out = sys.stdout
    sys.stdout = sys.stderr  # MemPalace's prints must not mix with the answers
    serve(sys.stdin, protocol_out)
