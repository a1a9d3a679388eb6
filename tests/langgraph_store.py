"""A real LangGraph store written offline (``put``, an update, a delete), read back through LangGraph's own
``search``: what the LangGraph import is tested on.

``python tests/langgraph_store.py`` writes the fixture tests/data/langgraph/: ``store.db`` (a SqliteStore
file), ``items.json`` (``[item.dict() for item in store.search(...)]``) and ``items.jsonl`` (the same, one a
line), and ``grown.db`` / ``grown.json``, the same store after one more put, an update and a delete (what a
re-import sees later); then the same puts into a ``PostgresStore`` on a real PostgreSQL
(evals/postgres_server.py): ``store.csv`` (its ``store`` table as ``COPY ... (FORMAT csv, HEADER)`` writes
it) and ``postgres_items.json`` (its ``search``). The values are the shapes LangMem writes: ``{"content":
text}`` (its ``manage_memory`` tool) and ``{"kind": "Memory", "content": {"content": text}}`` (its memory
manager). No model is called. Needs ``langgraph-checkpoint-sqlite`` and ``langgraph-checkpoint-postgres``
(the ``migrate-peers`` extra) and PostgreSQL's binaries.
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
COPY_CSV = "COPY store TO STDOUT WITH (FORMAT csv, HEADER)"


def fill(store: Any, grow: bool) -> list[dict[str, Any]]:
    """The puts, update and deletes (``grow``: what the store did next); the items its search returns."""
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
    return sorted((item.dict() for item in store.search((), limit=100)), key=lambda i: (i["namespace"], i["key"]))


def write_store(db: Path, grow: bool) -> list[dict[str, Any]]:
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    try:
        store = SqliteStore(conn)
        store.setup()
        return fill(store, grow)
    finally:
        conn.close()


def write_postgres_store(folder: Path) -> list[dict[str, Any]]:
    """The store written through a real ``PostgresStore``; its table dumped to ``folder/store.csv``."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    from evals.postgres_server import start_postgres

    server = start_postgres()
    try:
        uri = f"postgresql://{server.user}:{server.password}@127.0.0.1:{server.port}/{server.db}"
        with PostgresStore.from_conn_string(uri) as store:
            store.setup()
            items = fill(store, grow=False)
        with psycopg.connect(uri) as conn, conn.cursor().copy(COPY_CSV) as copy:
            (folder / "store.csv").write_bytes(b"".join(bytes(chunk) for chunk in copy))
        return items
    finally:
        server.stop()


def write_fixture(folder: Path = FIXTURE, postgres: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        for stem, grow in (("store", False), ("grown", True)):
            items = write_store(db, grow)
            shutil.copy(db, folder / f"{stem}.db")
            (folder / ("items.json" if not grow else "grown.json")).write_text(json.dumps(items, indent=1) + "\n")
            if not grow:
                (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    if postgres:
        items = write_postgres_store(folder)
        (folder / "postgres_items.json").write_text(json.dumps(items, indent=1) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # evals/, run as a script
    write_fixture(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE)
