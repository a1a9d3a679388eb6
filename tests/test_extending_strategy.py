"""docs/extending.md's example of a search strategy that keeps a structure of its own (``word_count.py``),
run as written: its module loaded from the doc's code block, its hook filling a real registry, its search
on a real LanceDB store in a temp dir, its structure built, extended by appended rows and loaded back
by another process's store from the sidecar."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from synthex.core.record import Record
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.strategies.registry import StrategyRegistry

DOCS = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def note(rid: str, text: str) -> Record:
    return Record(id=rid, content=text, step="notes", period="2024-01", materialization_key=rid,
                  metadata={"time": {"created_at": "2024-01-02T10:00:00Z"}})


@pytest.fixture
def word_count(tmp_path, monkeypatch):
    """The doc's module, written to a file and imported under its own name (as an installed plugin is)."""
    block = re.search(r"```python\n(# word_count\.py.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert block is not None, "docs/extending.md holds no word_count.py example"
    path = tmp_path / "word_count.py"
    path.write_text(block.group(1), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("word_count", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "word_count", module)
    spec.loader.exec_module(module)
    return module


def test_the_documented_strategy_ranks_through_its_own_versioned_structure(tmp_path, word_count):
    registry = StrategyRegistry()
    word_count.register_search_strategies(registry)
    strategy = registry.get("word-count")
    store = RecordStore(str(tmp_path / "store"))
    store.records.upsert([note("n1", "a zebra finch sings"), note("n2", "zebra zebra at the zoo"),
                          note("n3", "sourdough bread"), note("x1", "zebra zebra zebra")])
    store.records.upsert([Record(id="o1", content="zebra zebra zebra zebra", step="other", period="2024-01",
                                 materialization_key="o1")])  # another step: not this strategy's
    engine = SearchEngine(store)
    texts = store.search_state.structure(word_count.StepTexts)

    hits = list(engine.search("zebra finch", strategy=strategy, k=3))
    assert [h.id for h in hits] == ["x1", "n1", "n2"]  # n1 and n2 both count 2: ties by id
    assert [h.score for h in hits] == [3.0, 2.0, 2.0] and texts.last == "build"

    store.records.upsert([note("n4", "finch finch finch finch")])  # appended: the entry is extended
    assert [h.id for h in engine.search("finch", strategy=strategy, k=2)] == ["n4", "n1"]
    assert texts.last == "extend"
    store.search_state.sidecar.wait()

    reopened = RecordStore(str(tmp_path / "store"))  # the next process: the saved entry, loaded
    again = list(SearchEngine(reopened).search("finch", strategy=strategy, k=2))
    assert [h.id for h in again] == ["n4", "n1"]
    assert reopened.search_state.structure(word_count.StepTexts).last == "load"
