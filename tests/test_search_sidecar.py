"""Search structures persisted beside the table (search/indexes/sidecar.py) and the lancedb-free read path.

Real LanceDB stores in temp dirs, real offline embedder. A store object opened afresh on the same
folder stands for a new process (a restarted MCP server or UI): it must load what the first one
persisted (counted, not timed), rank exactly as a full build does, and notice a write made since.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_leaf_scope import context
from test_leaf_scope import turns as leaf_scope_turns

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search import SearchEngine, load_search_strategies
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.leaf_scope import build_scope, scope_for
from synthex_resources.search.indexes.sidecar import FOLDER, sidecar
from synthex_resources.search.state import SearchSettings

MODES = ("bm25", "dense", "hybrid", "conversational")
QUERIES = ["Where did Ann go on her trip?", "What happened to the bicycle chain?"]
ROOT = Path(__file__).resolve().parents[1]


def turns(conv: str, session: int, count: int, day: int, first: int = 0) -> list[Record]:
    return leaf_scope_turns(conv, session, count, day, first, said="we talked about")


def write(store: RecordStore, leaves: list[Record]) -> None:
    store.records.upsert(leaves)
    store.records.upsert(context(leaves))
    SearchEngine(store).ensure_index()


def ranking(store: RecordStore, steps: list[str]) -> dict[str, list[tuple[str, float]]]:
    engine, registry = SearchEngine(store), load_search_strategies()
    return {f"{mode}|{q}": [(h.id, round(h.score, 9)) for h in engine.search(q, steps=steps, k=8,
                                                                              strategy=registry.get(mode))]
            for mode in MODES for q in QUERIES}


def fresh_copy(src: Path, dst: Path) -> Path:
    """The table alone, without what was persisted beside it: searched, it builds everything (the exact path)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(FOLDER))
    return dst


@pytest.fixture(scope="module")
def persisted(tmp_path_factory) -> tuple[Path, dict]:
    """A store searched once in every mode, its structures persisted; the rankings it gave."""
    root = tmp_path_factory.mktemp("sidecar-store") / "store"
    store = RecordStore(str(root))
    write(store, turns("c1", 1, 6, 1) + turns("c1", 2, 6, 3) + turns("c2", 1, 5, 2))
    first = ranking(store, ["ctx"])
    sidecar(store).wait()
    assert sidecar(store).saves >= 3  # bookkeeping, lexicon, matrix
    return root, first


def test_a_fresh_store_object_loads_what_was_persisted_and_ranks_identically(persisted, tmp_path):
    root, first = persisted
    reopened = RecordStore(str(root))
    again = ranking(reopened, ["ctx"])
    assert sidecar(reopened).loads >= 3 and sidecar(reopened).saves == 0  # loaded, nothing rebuilt or rewritten
    assert reopened.search_state.scopes.last == "load"
    assert dense_index(reopened).last_update == "persisted"
    assert any(again.values())
    assert again == first
    # the exact path: the same table with nothing persisted beside it, every structure built from the rows
    exact = RecordStore(str(fresh_copy(root, tmp_path / "exact")))
    assert ranking(exact, ["ctx"]) == again
    assert exact.search_state.scopes.last == "build" and dense_index(exact).last_update == "load"


def test_a_write_after_persisting_is_seen_by_the_next_store_object(persisted, tmp_path):
    root = fresh_copy(persisted[0], tmp_path / "store")
    shutil.copytree(persisted[0] / FOLDER, root / FOLDER)
    writer = RecordStore(str(root))
    write(writer, turns("c3", 1, 4, 20))  # new turns about the same topics, one of them only here
    writer.records.upsert([Record(id="c3-s1-t9", content="Ann: the quokka escaped from the zoo", step="turns",
                                  period="2023-05", materialization_key="c3-s1-t9",
                                  metadata={"chat": {"conversation_id": "c3", "session_id": "s1", "author": "Ann"},
                                            "time": {"created_at": "2023-05-20T11:00:00Z"}})])
    writer.records.upsert(context(writer.records.get_many(["c3-s1-t9"])))
    reader = RecordStore(str(root))
    got = ranking(reader, ["ctx"])
    assert reader.search_state.scopes.last == "build"  # small: rebuilt, not extended
    assert dense_index(reader).last_update == "persisted+append"  # the persisted matrix plus the new fragments
    exact = RecordStore(str(fresh_copy(root, tmp_path / "exact")))
    assert got == ranking(exact, ["ctx"])
    engine, conversational = SearchEngine(reader), load_search_strategies().get("conversational")
    assert [h.id for h in engine.search("quokka zoo", steps=["ctx"], k=1, strategy=conversational)] == ["c3-s1-t9"]


def test_a_large_persisted_scope_is_extended_like_a_full_build(persisted, tmp_path):
    root = fresh_copy(persisted[0], tmp_path / "store")
    shutil.copytree(persisted[0] / FOLDER, root / FOLDER)
    write(RecordStore(str(root)), turns("c1", 2, 3, 3, first=6) + turns("c4", 1, 3, 25))
    reader = RecordStore(str(root), search=SearchSettings(scope_incremental_from=0))  # extend at any size
    cache = reader.search_state.scopes
    engine = SearchEngine(reader)
    where = engine.where(["ctx"], BranchScope.own())
    extended = scope_for(engine, where)
    assert cache.last == "extend" and len(extended.leaf_ids) == 17 + 6
    built = build_scope(engine.store.read_dataset(), where)
    assert sorted(extended.leaf_ids) == sorted(built.leaf_ids)
    ids = extended.leaf_ids
    assert ids[extended.prev[extended.index_of["c1-s2-t6"]]] == "c1-s2-t5"  # linked to the persisted tail
    assert {r: sorted(ids[p] for p in ps) for r, ps in extended.leaves_of.items()} == \
        {r: sorted(built.leaf_ids[p] for p in ps) for r, ps in built.leaves_of.items()}


def test_a_torn_save_is_ignored_and_rebuilt(persisted, tmp_path):
    root = fresh_copy(persisted[0], tmp_path / "store")
    shutil.copytree(persisted[0] / FOLDER, root / FOLDER)
    # A kill between the two renames of a save: the arrays of one save beside the description of another.
    for meta in (root / FOLDER).glob("leaf_scope-*.json"):
        data = json.loads(meta.read_text())
        meta.write_text(json.dumps(data | {"token": "0" * 16}))
    reader = RecordStore(str(root))
    assert ranking(reader, ["ctx"]) == persisted[1]
    assert reader.search_state.scopes.last == "build"
    sidecar(reader).wait()
    again = RecordStore(str(root))
    ranking(again, ["ctx"])
    assert again.search_state.scopes.last == "load"  # the rebuild was persisted whole


def test_lexical_leg_through_pylance_equals_lancedbs_fts_query(persisted):
    store = RecordStore(str(persisted[0]))
    engine = SearchEngine(store)
    where = engine.where(["ctx", "turns"], BranchScope.own())
    tbl = store.records_table()
    for q in QUERIES:
        text = " ".join(q.lower().replace("?", "").split())
        want = [(r["id"], float(r["_score"])) for r in tbl.search(text, query_type="fts", fts_columns="content")
                .where(where, prefilter=True).select(["id", "_score"]).limit(200).to_list()]
        got = engine.lexical(q, where, 200)
        assert got and got == sorted(want, key=lambda p: (-p[1], p[0]))[:len(got)]


def test_a_search_process_never_imports_lancedb(persisted):
    code = ("import sys; from synthex_resources.record_store import RecordStore; "
            "from synthex_resources.search import SearchEngine, load_search_strategies as s; "
            f"e = SearchEngine(RecordStore({str(persisted[0])!r})); "
            "print([len(e.search('bread baking', steps=['ctx'], strategy=s().get(m))) for m in "
            f"{list(MODES)!r}], 'lancedb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(persisted[0])})
    assert out.returncode == 0, out.stderr
    counts, imported = out.stdout.strip().rsplit(" ", 1)
    assert all(c > 0 for c in json.loads(counts))
    assert imported == "False"
