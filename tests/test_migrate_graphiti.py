"""A Graphiti / Zep graph comes in whole (issue 37): episodes, entity nodes and facts with their group id,
every time axis apart, a fact's episodes as its sources, an expired or invalidated fact as history (not
searched, in its entity's lineage), re-imports incremental. The fixture tests/data/graphiti is a real
graphiti_core run through its embedded Kuzu driver (tests/graphiti_store.py); ``SYNTHEX_SLOW_TESTS=1``
also repeats that run here."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import cli, load

from synthex.core.errors import SourceError
from synthex.core.importers import detect_format, load_source

FIXTURE = Path(__file__).parent / "data" / "graphiti"
STEPS = ("graphiti", "graphiti_facts", "graphiti_entities", "graphiti_episodes")


def imported(root: Path, run: bool = True):
    pipe = load(root)
    try:
        stats = pipe.run().step_stats if run else None
        records = {s: pipe.records(s) for s in STEPS}
        lineage = {r.meta("source.key"): sorted(s.meta("source.key") for s in r.sources()[1:])
                   for s in STEPS[1:] for r in records[s]}
        found = [h.content for h in pipe.search("Dana works at", k=20)]
    finally:
        pipe.close()
    return stats, records, lineage, found


def check_graph(graph: dict, root: Path, run: bool = True):
    """Every model of the file arrived as it was; current facts are searched, expired ones are history."""
    stats, records, lineage, found = imported(root, run)
    raw = {r.meta("source.original_id"): r for r in records["graphiti"]}
    assert set(raw) == {m["uuid"] for models in graph.values() for m in models}
    for models in graph.values():
        for model in models:
            rec = raw[model["uuid"]]
            assert rec.meta("source.raw") == {k: v for k, v in model.items() if not k.endswith("_embedding")}
            assert rec.meta("source.scope") == {"group_id": model["group_id"]}
    current = {e["uuid"] for e in graph["entity_edges"] if e["expired_at"] is None and e["invalid_at"] is None}
    expired = {e["uuid"] for e in graph["entity_edges"]} - current
    assert current and expired
    assert {r.meta("source.original_id") for r in records["graphiti_facts"]} == current
    for edge in graph["entity_edges"]:
        rec = raw[edge["uuid"]]
        axes = rec.meta("time")
        for axis in ("created_at", "valid_at", "invalid_at", "expired_at"):  # apart, none merged into another
            assert axes.get(axis) == (edge[axis] + "Z" if edge[axis] else None), (axis, axes)
        assert rec.meta("source.current") is (edge["uuid"] in current)
        if edge["uuid"] in current:  # its provenance: the episodes Graphiti says it came from, then its entities
            assert lineage[f"fact:{edge['uuid']}"] == sorted(
                [*(f"episode:{e}" for e in edge["episodes"]),
                 *{f"entity:{edge['source_node_uuid']}", f"entity:{edge['target_node_uuid']}"}])
        else:  # history: in the lineage of its source entity, not searched as a fact
            assert f"expired-fact:{edge['uuid']}" in lineage[f"entity:{edge['source_node_uuid']}"]
            assert edge["fact"] not in found
    assert {r.meta("source.original_id") for r in records["graphiti_episodes"]} == {e["uuid"] for e in graph["episodes"]}
    assert {r.meta("source.original_id") for r in records["graphiti_entities"]} == {n["uuid"] for n in graph["entity_nodes"]}
    dana = next(n for n in graph["entity_nodes"] if n["name"] == "Dana")
    assert raw[dana["uuid"]].meta("custom") == dana["attributes"] and raw[dana["uuid"]].meta("source.embedding_dim") == 3
    return stats, found


def test_a_graphiti_graph_arrives_whole_and_a_grown_one_adds_only_what_is_new(tmp_path):
    graph_file = tmp_path / "graph.json"
    shutil.copy(FIXTURE / "graph.json", graph_file)
    assert detect_format(graph_file) == "graphiti"
    cli("init", "from-zep", "--from", str(graph_file), "--dir", str(tmp_path / "proj"))
    _, found = check_graph(json.loads(graph_file.read_text()), tmp_path / "proj")
    assert "Dana works at Beta Corp" in found
    shutil.copy(FIXTURE / "grown.json", graph_file)  # one more episode: a coffee fact; the tea fact expired since
    stats, found = check_graph(json.loads(graph_file.read_text()), tmp_path / "proj")
    # New: the episode, the coffee entity, its mention, the coffee fact and the tea fact as history.
    assert stats["graphiti"].output == 5
    assert "Dana drinks green tea" not in found and "Dana drinks coffee" in found


def test_hostile_graphiti_files_are_one_line(tmp_path):
    graph = json.loads((FIXTURE / "graph.json").read_text())
    bad = tmp_path / "graph.json"
    edge = graph["entity_edges"][1]
    edge["fact"] = 7
    bad.write_text(json.dumps(graph))
    with pytest.raises(SourceError) as caught:
        load_source(bad, "auto")
    assert str(caught.value) == f"{bad}: entity edge #1 ({edge['uuid']}): 'fact' is a number 7; expected a string"
    edge["fact"], edge["expired_at"] = "ok", "yesterday"
    bad.write_text(json.dumps(graph))
    with pytest.raises(SourceError, match=r"entity edge #1 \(.*\): 'expired_at' is a string 'yesterday', not a timestamp"):
        load_source(bad, "graphiti")
    bad.write_text(json.dumps({"episodes": graph["episodes"], "sagas": []}))
    with pytest.raises(SourceError) as caught:
        load_source(bad, "graphiti")
    assert str(caught.value).startswith(f"{bad}: 'sagas' is not a Graphiti list this reads (episodes, ")


@pytest.mark.skipif(os.environ.get("SYNTHEX_SLOW_TESTS") != "1", reason="a real graphiti_core + Kuzu run: SYNTHEX_SLOW_TESTS=1")
def test_a_real_graphiti_graph_round_trip(tmp_path):
    pytest.importorskip("graphiti_core")
    pytest.importorskip("kuzu")
    import graphiti_store

    graphiti_store.write_fixture(tmp_path / "graphiti")
    cli("init", "from-zep", "--from", str(tmp_path / "graphiti" / "graph.json"), "--dir", str(tmp_path / "proj"))
    check_graph(json.loads((tmp_path / "graphiti" / "graph.json").read_text()), tmp_path / "proj")
