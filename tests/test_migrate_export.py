"""`synthex export` and `synthex init --from export.jsonl`: a project's memory out and back, identical
(issue 37, "Out again")."""

from __future__ import annotations

import json

from conftest import cli, load
from test_branches import make_branch

# What a restore keeps of every row: all of it but the run that wrote it (the restore's run writes it).
KEPT = ("id", "content", "step", "branch", "sources", "materialization_key", "created_at", "metadata", "audit",
        "period")


def rows_of(root):
    from synthex_resources.store.filters import RecordFilter

    pipe = load(root)
    try:
        rows = pipe.store().records.rows(RecordFilter(), None)
        records = [pipe.store().records.to_record(r).to_dict() for r in rows]
    finally:
        pipe.close()
    return {(r["id"], r["branch"]): {k: r[k] for k in KEPT} for r in records}


def test_export_and_init_from_it_restore_every_branch_identical(tmp_path, ran_project):
    root = ran_project.copy(tmp_path / "proj")
    make_branch(root)
    pipe = load(root)
    try:
        assert pipe.run(branch="better-summaries").status == "completed"
    finally:
        pipe.close()
    before = rows_of(root)
    assert {b for _, b in before} == {"main", "better-summaries"}
    export = tmp_path / "out" / "export.jsonl"
    cli("export", str(export), "--project", str(root))
    header = json.loads(export.read_text().splitlines()[0])
    assert header["branches"]["better-summaries"]["parent"] == "main"
    assert len(export.read_text().splitlines()) == 1 + len(before)

    cli("init", "restored", "--from", str(export), "--dir", str(tmp_path / "restored"))
    restored = tmp_path / "restored"
    assert (restored / "branches" / "better-summaries.py").exists()
    again = load(restored)
    try:
        assert again.run().status == "completed"
        assert again.run(branch="better-summaries").status == "completed"
        assert again.plan().estimates["records"] == 0  # nothing left to do: the rows are the exported ones
        scope = again.scope("better-summaries")
        assert not scope.owns("transcripts") and scope.owns("summaries")  # copy-on-write as it was
    finally:
        again.close()
    after = rows_of(restored)
    assert after == before


def test_export_one_branch_is_its_view_restored_as_main(tmp_path, ran_project):
    export = tmp_path / "main.jsonl"
    cli("export", str(export), "--branch", "main", "--project", str(ran_project.root))
    before = rows_of(ran_project.root)
    cli("init", "one", "--from", str(export), "--dir", str(tmp_path / "one"))
    again = load(tmp_path / "one")
    try:
        assert again.run().status == "completed"
        found = again.search("rust", k=3)
    finally:
        again.close()
    assert rows_of(tmp_path / "one") == before
    assert len(found) == 3  # the search output came back with the records


MCP_LINES = [
    {"type": "entity", "name": "Ann", "entityType": "person", "observations": ["likes rust", "lives in Lisbon"]},
    {"type": "entity", "name": "Lisbon", "entityType": "city", "observations": []},
    {"type": "relation", "from": "Ann", "to": "Lisbon", "relationType": "lives_in"},
]


def test_an_mcp_memory_file_comes_in_and_goes_out_the_same(tmp_path):
    memory = tmp_path / "memory.jsonl"
    memory.write_text("".join(json.dumps(line) + "\n" for line in MCP_LINES))
    cli("init", "mcp", "--from", str(memory), "--dir", str(tmp_path / "mcp"))
    pipe = load(tmp_path / "mcp")
    try:
        assert pipe.run().status == "completed"
        relation = pipe.records("mcp_memory_relations")[0]
        entities = {r.id: r for r in pipe.records("mcp_memory_entities")}
        linked = {s.meta("source.original_id") for s in relation.sources()}
        assert pipe.search("Lisbon", k=5)
    finally:
        pipe.close()
    assert linked == {"Ann|lives_in|Lisbon", "Ann", "Lisbon"} and len(entities) == 2  # lineage: its two entities
    out = tmp_path / "out.jsonl"
    cli("export", str(out), "--format", "mcp-memory", "--project", str(tmp_path / "mcp"))
    assert [json.loads(line) for line in out.read_text().splitlines()] == MCP_LINES


KEYED = '''
from synthex import Pipeline

pipeline = Pipeline("keyed")
pipeline.source("notes", file={export!r}, format="jsonl")


def person(record):
    return record.meta("custom.people")


def members(records, group):
    return f"{{group}}: {{len(records)}} notes"


pipeline.aggregate("people", from_="notes", by=person, fn=members)
pipeline.output("search", from_=["notes", "people"])
'''


def test_export_mcp_memory_makes_entities_of_key_aggregates(tmp_path):
    notes = tmp_path / "notes.jsonl"
    rows = [("n1", "Ann and Bob cook paella", ["Ann", "Bob"]), ("n2", "Ann runs", ["Ann"])]
    notes.write_text("".join(json.dumps({"id": i, "text": t, "created_at": "2024-03-01T10:00:00Z",
                                         "metadata": {"people": p}}) + "\n" for i, t, p in rows))
    root = tmp_path / "keyed"
    root.mkdir()
    (root / "pipeline.py").write_text(KEYED.format(export=str(notes)))
    pipe = load(root)
    try:
        assert pipe.run().status == "completed"
    finally:
        pipe.close()
    out = tmp_path / "memory.jsonl"
    cli("export", str(out), "--format", "mcp-memory", "--project", str(root))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    entities = {e["name"]: e for e in lines if e["type"] == "entity"}
    assert set(entities) == {"Ann", "Bob"}
    assert sorted(entities["Ann"]["observations"]) == ["Ann and Bob cook paella", "Ann runs"]
    assert entities["Ann"]["entityType"].endswith("person")
    assert [r for r in lines if r["type"] == "relation"] == [
        {"type": "relation", "from": "Ann", "to": "Bob", "relationType": "co_occurs_with"}]
