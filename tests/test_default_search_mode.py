"""The default search mode is named once, in the core (``synthex.core.naming.DEFAULT_SEARCH_MODE``): a
pipeline's search output without ``mode=``, a ``SearchEngine.search`` without a strategy and the registry
all resolve that one name.

Real LanceDB store in a tmp dir with the bag-of-words embedder of test_conversational_costs."""

from __future__ import annotations

from test_conversational_costs import BagEmbedder

from synthex.core.definition import PipelineDefinition
from synthex.core.naming import DEFAULT_SEARCH_MODE
from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.strategies.registry import load_search_strategies


def test_every_default_is_the_one_named_in_the_core(tmp_path):
    definition = PipelineDefinition("plain", project_dir=tmp_path / "p")
    definition.source("notes", file=str(tmp_path / "notes.jsonl"))
    definition.output("search", from_=["notes"], surface="search")
    assert definition.search_mode() == DEFAULT_SEARCH_MODE

    store = RecordStore(str(tmp_path / "store"), embedder=BagEmbedder())
    store.records.upsert([Record(id=f"r{i}", content=f"garden tomato chess {i}" if i % 2 else f"snow storm {i}",
                                 step="notes", materialization_key=f"r{i}") for i in range(8)])
    engine = SearchEngine(store)
    named = load_search_strategies().get(DEFAULT_SEARCH_MODE)
    for query in ("garden tomato", "snow"):
        default = engine.search(query, ["notes"], BranchScope.own(), 4)
        explicit = engine.search(query, ["notes"], BranchScope.own(), 4, strategy=named)
        assert default and [(h.id, h.score) for h in default] == [(h.id, h.score) for h in explicit]
    store.close()
