"""A real LangGraph store written offline (``SqliteStore.put``, an update, a delete), read back through
LangGraph's own ``search``: what the LangGraph import is tested on.

``python tests/langgraph_store.py`` writes the fixture tests/data/langgraph/: ``store.db`` (the
SqliteStore file), ``items.json`` (``[item.dict() for item in store.search(...)]``), and ``grown.db`` /
``grown.json``, the same store after one more put, an update and a delete (what a re-import sees later).
The values are the shapes LangMem writes: ``{"content": text}`` (its ``manage_memory`` tool) and
``{"kind": "Memory", "content": {"content": text}}`` (its memory manager). No model is called. Needs
``langgraph-checkpoint-sqlite``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).parent / "data" / "langgraph"


def write_store(db: Path, grow: bool) -> list[dict[str, Any]]:
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    try:
        store = SqliteStore(conn)
        store.setup()
        if not grow:
            store.put(("memories", "ann"), "m1", {"content": "Ann prefers window seats"})
            store.put(("memories", "ann"), "m2", {"content": "Ann is allergic to peanuts"})
            store.put(("memories", "bob"), "m3", {"kind": "Memory", "content": {"content": "Bob lives in Lisbon"}})
            store.put(("profile", "bob"), "settings", {"theme": "dark", "language": "pt"})
            store.put(("memories", "ann"), "m1", {"content": "Ann prefers aisle seats"})  # an update
            store.put(("memories", "ann"), "gone", {"content": "Ann's old phone number"})
            store.delete(("memories", "ann"), "gone")
        else:
            store.put(("memories", "cid"), "m4", {"content": "Cid plays the cello"})
            store.put(("memories", "bob"), "m3", {"kind": "Memory", "content": {"content": "Bob moved to Porto"}})
            store.delete(("memories", "ann"), "m2")
        return [item.dict() for item in store.search((), limit=100)]
    finally:
        conn.close()


def write_fixture(folder: Path = FIXTURE) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        for stem, grow in (("store", False), ("grown", True)):
            items = sorted(write_store(db, grow), key=lambda i: (i["namespace"], i["key"]))
            shutil.copy(db, folder / f"{stem}.db")
            (folder / ("items.json" if not grow else "grown.json")).write_text(json.dumps(items, indent=1) + "\n")


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE)
