"""A Mem0 store comes in whole: every memory of get_all() and every event of history.db, deletions as
history, re-imports incremental (issue 37). The fixture tests/data/mem0 is a real Mem0 run
(tests/mem0_store.py); ``SYNTHEX_SLOW_TESTS=1`` also repeats that run here (about 15 s)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import cli, load

from synthex.core.errors import SourceError
from synthex.core.importers import detect_format, load_source

FIXTURE = Path(__file__).parent / "data" / "mem0"


def store_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "mem0"
    folder.mkdir()
    shutil.copy(FIXTURE / "memories.json", folder / "memories.json")
    shutil.copy(FIXTURE / "history.db", folder / "history.db")
    return folder


def history_rows(db: Path) -> list[dict]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("select * from history")]


def imported(root: Path, run: bool = True):
    pipe = load(root)
    try:
        assert not run or pipe.run().status == "completed"
        memories = pipe.records("mem0_memories")
        raw = pipe.records("mem0") + pipe.records("mem0_history")
        lineage = {m.meta("source.original_id"): sorted(s.meta("source.kind") + ":" + str(s.meta("source.event"))
                                                        for s in m.sources()[1:]) for m in memories}
        found = [h.content for h in pipe.search("Lisbon", k=10)]
    finally:
        pipe.close()
    return memories, raw, lineage, found


def check_store(folder: Path, root: Path, run: bool = True) -> dict:
    """Every memory of get_all and every event of history.db arrived, with what Mem0 kept of it."""
    memories, raw, lineage, found = imported(root, run)
    got = {m.meta("source.original_id"): m for m in memories}
    expected = json.loads((folder / "memories.json").read_text())["results"]
    assert set(got) == {m["id"] for m in expected}
    for memory in expected:
        rec = got[memory["id"]]
        assert rec.content == memory["memory"]
        assert rec.meta("source.raw") == memory and rec.meta("source.hash") == memory["hash"]
        assert rec.meta("custom") == memory.get("metadata")
        assert {k: rec.meta(f"source.scope.{k}") for k in ("user_id", "agent_id", "run_id")} == {
            k: memory.get(k) for k in ("user_id", "agent_id", "run_id")}
        assert set(rec.meta("time")) >= {"created_at", "updated_at"}
    events = {r.meta("source.original_id"): r for r in raw if r.meta("source.kind") == "event"}
    history = history_rows(folder / "history.db")
    assert set(events) == {row["id"] for row in history}
    for row in history:
        assert events[row["id"]].meta("source.raw") == row and events[row["id"]].meta("source.current") is False
    deleted = {row["memory_id"] for row in history if row["event"] == "DELETE"}
    assert deleted and not deleted & set(got)  # a deleted memory is history, not a current memory
    updated = next(row["memory_id"] for row in history if row["event"] == "UPDATE")
    assert lineage[updated] == ["event:ADD", "event:UPDATE"]  # its versions, through lineage
    assert not any("Lisbon" in text for text in found)  # Bob's deleted memory is not searched as a fact
    return got


def test_a_mem0_store_arrives_whole_and_a_grown_one_adds_only_what_is_new(tmp_path):
    folder = store_copy(tmp_path)
    assert detect_format(folder / "memories.json") == "mem0"
    assert detect_format(folder / "history.db") == "mem0-history"
    cli("init", "from-mem0", "--from", str(folder / "memories.json"), "--from", str(folder / "history.db"),
        "--dir", str(tmp_path / "proj"))
    before = check_store(folder, tmp_path / "proj")
    shutil.copy(FIXTURE / "grown.json", folder / "memories.json")  # Mem0 went on: one added, one deleted
    shutil.copy(FIXTURE / "grown-history.db", folder / "history.db")
    pipe = load(tmp_path / "proj")
    try:
        run = pipe.run()
    finally:
        pipe.close()
    # New: Cid's memory; its ADD event, the peanuts DELETE event and Cid's memory as history.db rebuilds it.
    assert run.step_stats["mem0"].output == 1 and run.step_stats["mem0_history"].output == 3
    got = check_store(folder, tmp_path / "proj", run=False)
    kept = {m.id for m in before.values() if "peanuts" not in m.content}
    assert kept <= {m.id for m in got.values()}  # what did not change kept its record
    assert any("peanuts" in m.content for m in before.values())
    assert not any("peanuts" in m.content for m in got.values())  # deleted since: history now


def test_hostile_mem0_files_are_one_line(tmp_path):
    bad = tmp_path / "memories.json"
    bad.write_text(json.dumps({"results": [{"id": "m1", "memory": 7, "created_at": "2024-01-01T00:00:00Z"}]}))
    with pytest.raises(SourceError) as caught:
        load_source(bad, "mem0")
    assert str(caught.value) == f"{bad}: memory #0 (m1): 'memory' is a number 7; expected a string"
    db = tmp_path / "history.db"
    shutil.copy(FIXTURE / "history.db", db)
    with sqlite3.connect(db) as conn:
        conn.execute("update history set event = 'EXPLODE' where rowid = 2")
    with pytest.raises(SourceError) as caught:
        load_source(db, "auto")
    assert str(caught.value).startswith(f"{db}: history row #1 (") and "'event' is a string 'EXPLODE'" in str(caught.value)


@pytest.mark.skipif(os.environ.get("SYNTHEX_SLOW_TESTS") != "1", reason="a real Mem0 run (~15 s): SYNTHEX_SLOW_TESTS=1")
def test_a_real_mem0_store_round_trip(tmp_path):
    from evals.peers.mem0_peer import mem0_available

    if not mem0_available():  # not importorskip: importing mem0 here would turn its telemetry on
        pytest.skip("mem0ai is not installed")
    import mem0_store
    from fake_openai import FakeOpenAI

    folder = tmp_path / "mem0"
    with FakeOpenAI() as server:
        folder.mkdir()
        (folder / "memories.json").write_text(json.dumps(mem0_store.write_store(tmp_path / "work", server.base_url)))
    shutil.copy(tmp_path / "work" / "history.db", folder / "history.db")
    cli("init", "from-mem0", "--from", str(folder / "memories.json"), "--from", str(folder / "history.db"),
        "--dir", str(tmp_path / "proj"))
    check_store(folder, tmp_path / "proj")
