"""Multi-hop strategies (search/strategies/conversational_multihop.py) and relative query dates (search/strategies/conversational_temporal.py) in leaf-sum search.

A real LanceDB store in a tmp dir holding a small hand-made two-person chat (turns written directly,
no pipeline run, so this stays fast); a bag-of-words embedder makes cosine track shared words. Each
strategy is checked to change the ranking the way it claims, against the same search without it.
"""

from __future__ import annotations

import hashlib
from datetime import date, datetime

import numpy as np
import pytest

from synthex.core.record import Record
from synthex_resources.record_store import open_store
from synthex_resources.search import SearchEngine
from synthex_resources.search.strategies.builtin import CONVERSATIONAL
from synthex_resources.search.strategies.conversational import LeafSum
from synthex_resources.search.strategies.conversational_multihop import sub_queries
from synthex_resources.search.strategies.conversational_temporal import TimeWindow, time_window
from synthex_resources.search.tokenize import tokenize


class WordsEmbedder:
    """Hashed bag of words: texts sharing words have a high cosine, identical texts cosine 1."""

    dim = 256

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.full((len(texts), self.dim), 1e-3, dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text):
                out[row, int(hashlib.sha256(token.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


SESSIONS = [
    ("2023-05-08T13:00:00", [
        ("Ann", "I adopted a puppy named Biscuit from the Riverside shelter."),
        ("Bob", "Congratulations, what breed is it?"),
        ("Ann", "A beagle mix, very playful."),
    ]),
    ("2023-06-04T14:00:00", [
        ("Bob", "My zebra finch learned a new song."),
        ("Ann", "Biscuit chewed my favorite shoes yesterday."),
        ("Bob", "Puppies do that, be patient."),
        ("Bob", "My zebra finch learned a new song."),
    ]),
    ("2023-09-09T15:00:00", [
        ("Ann", "We went hiking at the lake."),
        ("Bob", "Was the weather good?"),
        ("Ann", "I also started pottery classes downtown."),
        ("Bob", "The finch is molting this week."),
    ]),
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> SearchEngine:
    store = open_store(str(tmp_path_factory.mktemp("strategies") / "store"), WordsEmbedder())
    records = []
    for s, (when, turns) in enumerate(SESSIONS, start=1):
        for t, (who, text) in enumerate(turns, start=1):
            chat = {"conversation_id": "c1", "session_id": f"S{s}", "author": who, "message_id": f"D{s}:{t}"}
            records.append(Record(id=f"turn-{s}-{t}", content=f"{who}: {text}", step="turns", created_at=when,
                                  metadata={"chat": chat, "time": {"created_at": when}}))
    store.records.upsert(records)
    engine = SearchEngine(store)
    engine.ensure_index(stem=True)
    return engine


# lexical leg only, no neighbour credit, no multi-hop strategy: what each strategy adds is easy to read
LEXICAL = CONVERSATIONAL.with_(dense=False, leaf_dense_weight=0.0, neighbour_weight=0.0, entity_weight=0.0)


def ranked(engine: SearchEngine, query: str, k: int = 10, **changes) -> list[str]:
    hits = engine.search(query, steps=["turns"], k=k, strategy=LEXICAL.with_(**changes))
    return [h.meta("chat.message_id") for h in hits]


def test_sub_queries_split_conjunctions_and_named_entities():
    assert sub_queries("What did the finch learn and which pottery classes started?") == [
        "What did the finch learn", "which pottery classes started"]
    # several named entities: one part per entity, a multi-word name kept whole
    assert sub_queries("Did she like the Grand Canyon more than Yosemite?") == [
        "Did she like the Grand Canyon more than  ?", "Did she like the   more than Yosemite?"]
    assert sub_queries("Did she like the Grand Canyon more than Yosemite?", rare_entities={"yosemite"}) == []
    assert sub_queries("What did the finch learn?") == []


def test_decomposition_gives_every_part_of_the_question_coverage(engine):
    query = "What new song did the zebra finch learn, and pottery?"
    plain = ranked(engine, query, k=3)
    assert "D3:3" not in plain  # the finch turns match more words and fill the top 3
    assert "D3:3" in ranked(engine, query, k=3, decompose="max", decompose_weight=1.0)
    assert "D3:3" in ranked(engine, query, k=3, decompose="sum", decompose_weight=1.0)


def test_shared_entity_expansion_credits_turns_sharing_a_rare_name_with_the_top_hits(engine):
    plain = ranked(engine, "Which shelter?", expand_seeds=1)
    assert plain[0] == "D1:1" and "D2:2" not in plain  # D2:2 shares no query word
    expanded = ranked(engine, "Which shelter?", entity_weight=0.5, expand_seeds=1)
    assert expanded[0] == "D1:1" and expanded[1] == "D2:2"  # "Biscuit" links the two sessions


def test_personalized_pagerank_spreads_from_the_seeds_over_adjacency_and_rare_terms(engine):
    plain = ranked(engine, "Which shelter?", expand_seeds=1)
    assert plain == ["D1:1"]
    walked = ranked(engine, "Which shelter?", ppr_weight=0.5, expand_seeds=1)
    assert walked[0] == "D1:1"
    # the next turn (adjacency) and the Biscuit turn of another session (rare term) are reached ...
    assert {"D1:2", "D2:2"} <= set(walked[1:4])
    # ... and the far session, reached only through common words if at all, ranks below them
    assert all(walked.index(x) > walked.index("D2:2") for x in ("D3:1", "D3:2", "D3:3") if x in walked)


def test_mmr_skips_a_near_duplicate_of_a_turn_already_taken(engine):
    assert ranked(engine, "zebra finch", k=2) == ["D2:1", "D2:4"]  # the same text twice
    assert ranked(engine, "zebra finch", k=2, diversify="mmr", mmr_lambda=0.5) == ["D2:1", "D3:4"]


def test_session_diversification_discounts_turns_of_a_session_already_taken(engine):
    assert ranked(engine, "zebra finch", k=2) == ["D2:1", "D2:4"]
    assert ranked(engine, "zebra finch", k=2, diversify="session", session_penalty=0.9) == ["D2:1", "D3:4"]


def test_strategies_are_off_by_default_and_the_recipe_turns_on_only_entity_expansion():
    default = LeafSum()
    assert not default.decompose and not default.diversify
    assert default.entity_weight == 0.0 and default.ppr_weight == 0.0
    assert CONVERSATIONAL.entity_weight > 0  # the one that helped on LoCoMo (docs/benchmarks.md)
    assert not CONVERSATIONAL.decompose and not CONVERSATIONAL.diversify and CONVERSATIONAL.ppr_weight == 0.0


def test_relative_dates_in_the_query_resolve_against_the_question_date():
    assert time_window("What did Ann do last week?") is None  # no question date: nothing to resolve
    week = time_window("What did Ann do last week?", as_of="2023-06-14")
    assert week.span == (date(2023, 6, 5), date(2023, 6, 11))
    assert week.contains(datetime(2023, 6, 4, 14)) is False and week.contains(datetime(2023, 6, 8))
    assert time_window("What did I buy two months ago?", as_of=date(2023, 8, 2)).span == (date(2023, 6, 1),
                                                                                          date(2023, 6, 30))
    assert time_window("What did we do in the summer of 2023?").span == (date(2023, 6, 1), date(2023, 8, 31))
    assert time_window("What did we do in the summer of 2023?", relative=False) == TimeWindow(year=2023)
    # the absolute forms keep their meaning
    assert time_window("on 4 June, 2023", as_of="2023-09-01") == TimeWindow(month=6, day=4, year=2023)


def test_the_question_date_reaches_the_date_prior_through_search(engine):
    query = "Which turns about the finch song last month?"
    assert ranked(engine, query, k=1, date_weight=1.0)[0] != "D3:4"  # no question date: "last month" unplaced
    hits = engine.search(query, steps=["turns"], k=1, strategy=LEXICAL.with_(date_weight=1.0), as_of="2023-10-02")
    assert hits[0].meta("chat.message_id") == "D3:4"  # September 2023, the month before the question
    hits = engine.search(query, steps=["turns"], k=1, strategy=LEXICAL.with_(date_weight=1.0, relative_dates=False),
                         as_of="2023-10-02")
    assert hits[0].meta("chat.message_id") != "D3:4"
