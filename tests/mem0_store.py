"""A real Mem0 store written offline (``add(infer=False)``, an update, a delete), read back through Mem0's
own ``get_all`` and its ``history.db``: what the Mem0 import is tested on.

``python tests/mem0_store.py`` writes the fixture tests/data/mem0/ (memories.json from ``get_all``, and a
copy of history.db) from a real run; ``pytest -m slow tests/test_migrate_mem0.py`` repeats the run itself.
Embeddings come from tests/fake_openai.py (4 dimensions, no network); the LLM is never called.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"  # read by mem0 at import time: no upload (there is no network)

FIXTURE = Path(__file__).parent / "data" / "mem0"


def memory(root: Path, base_url: str) -> Any:
    from mem0 import Memory

    return Memory.from_config({
        "vector_store": {"provider": "qdrant", "config": {"path": str(root / "qdrant"), "collection_name": "fixture",
                                                         "embedding_model_dims": 4, "on_disk": True}},
        "embedder": {"provider": "openai", "config": {"model": "fake-embed", "openai_base_url": base_url,
                                                      "api_key": "local", "embedding_dims": 4}},
        "llm": {"provider": "openai", "config": {"model": "unused", "api_key": "unused", "openai_base_url": base_url}},
        "history_db_path": str(root / "history.db"),
    })


def write_store(root: Path, base_url: str, grow: bool = False) -> dict[str, Any]:
    """Add four memories for two users and an agent, update one, delete one; ``grow``: then add one more
    and delete another (the store a re-import sees later). Returns Mem0's ``get_all`` for every scope."""
    mem = memory(root, base_url)
    try:
        if not grow:
            ids = []
            for text, scope, meta in (
                    ("Ann prefers window seats", {"user_id": "ann"}, {"topic": "travel"}),
                    ("Ann is allergic to peanuts", {"user_id": "ann", "run_id": "trip-1"}, {"topic": "health"}),
                    ("Bob lives in Lisbon", {"user_id": "bob"}, None),
                    ("The support agent answers in English", {"agent_id": "support"}, {"lang": "en"})):
                added = mem.add([{"role": "user", "content": text}], infer=False, metadata=meta, **scope)
                ids.append(added["results"][0]["id"])
            mem.update(ids[0], "Ann prefers aisle seats")
            mem.delete(ids[2])
        else:
            mem.add([{"role": "user", "content": "Cid plays the cello"}], user_id="cid", infer=False)
            found = mem.get_all(filters={"user_id": "ann"})["results"]
            mem.delete(next(m["id"] for m in found if "peanuts" in m["memory"]))
        everything = []
        for scope in ({"user_id": "ann"}, {"user_id": "bob"}, {"user_id": "cid"}, {"agent_id": "support"}):
            everything += mem.get_all(filters=scope)["results"]
        return {"results": everything}
    finally:
        mem.close() if hasattr(mem, "close") else mem.vector_store.client.close()


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_openai import FakeOpenAI

    work = FIXTURE.parent / "mem0-work"
    shutil.rmtree(work, ignore_errors=True)
    with FakeOpenAI() as server:
        FIXTURE.mkdir(parents=True, exist_ok=True)
        (FIXTURE / "memories.json").write_text(json.dumps(write_store(work, server.base_url), indent=1) + "\n")
        shutil.copy(work / "history.db", FIXTURE / "history.db")
        (FIXTURE / "grown.json").write_text(json.dumps(write_store(work, server.base_url, grow=True), indent=1) + "\n")
        shutil.copy(work / "history.db", FIXTURE / "grown-history.db")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
