"""The newer-first reordering (search/strategies/hierarchical_fresh.py): a hit moves just above an older hit saying the same thing
(cosine of their vectors at or above the band), nothing else moves, and a hit never leaves the window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from synthex.core.errors import PipelineDefinitionError
from synthex.core.record import Record
from synthex_resources.search.strategies.builtin import HIERARCHICAL_EXPANDED, HIERARCHICAL_FRESH
from synthex_resources.search.strategies.hierarchical_fresh import FreshFirst, newer_first
from synthex_resources.search.types import Reranked, Reranker, SearchHit

BIKES = np.array([1.0, 0.0, 0.0])
BIKES_AGAIN = np.array([0.9, 0.3, 0.0])  # cosine 0.949 with BIKES
COOKING = np.array([0.0, 0.0, 1.0])


def hit(hit_id: str, day: str, written: str = "2024-06-01T09:00:00.000Z") -> SearchHit:
    """A turn stated on ``day`` (its ``time.created_at``), its record written at ``written`` (``created_at``)."""
    return SearchHit(id=hit_id, content=hit_id, step="turns", created_at=written,
                     metadata={"time": {"created_at": f"2023-{day}T10:00:00Z"}})


def ids(hits: list[SearchHit]) -> list[str]:
    return [h.id for h in hits]


def test_the_newer_statement_of_one_fact_moves_just_above_the_older():
    hits = [hit("old-bikes", "03-01"), hit("cooking", "04-01"), hit("new-bikes", "05-01")]
    vectors = {"old-bikes": BIKES, "cooking": COOKING, "new-bikes": BIKES_AGAIN}
    assert ids(newer_first(hits, vectors, 0.6)) == ["new-bikes", "old-bikes", "cooking"]
    assert ids(newer_first(hits, vectors, 0.96)) == ids(hits)  # below the band: not the same thing, no move


def test_three_statements_end_newest_first_and_unrelated_or_undated_hits_stay():
    hits = [hit("v1", "01-01"), hit("v2", "02-01"), hit("other", "01-15"), hit("v3", "03-01")]
    vectors = {"v1": BIKES, "v2": BIKES_AGAIN, "v3": BIKES, "other": COOKING}
    assert ids(newer_first(hits, vectors, 0.6)) == ["v3", "v2", "v1", "other"]
    undated = SearchHit(id="v3", content="v3", step="turns", created_at="2024-06-01T09:00:00.000Z")  # no date
    assert ids(newer_first([*hits[:3], undated], vectors, 0.6)) == ["v2", "v1", "other", "v3"]
    # same day (one session): neither is newer
    assert ids(newer_first([hit("a", "01-01"), hit("b", "01-01")], {"a": BIKES, "b": BIKES}, 0.6)) == ["a", "b"]


def test_the_strategy_is_registered_over_hierarchical_expanded_and_checks_its_parameters():
    assert isinstance(HIERARCHICAL_FRESH, FreshFirst) and HIERARCHICAL_FRESH.inner is HIERARCHICAL_EXPANDED
    assert HIERARCHICAL_FRESH.ranks_searched_records is HIERARCHICAL_EXPANDED.ranks_searched_records
    with pytest.raises(PipelineDefinitionError, match="same_cosine must be between 0.0 and 1.0"):
        HIERARCHICAL_FRESH.with_(same_cosine=1.5)


def test_the_registered_one_reorders_only_for_a_question_about_the_present_state():
    assert HIERARCHICAL_FRESH.present_only and (HIERARCHICAL_FRESH.same_cosine, HIERARCHICAL_FRESH.window) == (0.3, 5)
    assert HIERARCHICAL_FRESH.applies_to("Where do I currently keep my old sneakers?")
    assert HIERARCHICAL_FRESH.applies_to("How many followers do I have on Instagram now?")
    assert not HIERARCHICAL_FRESH.applies_to("When did Caroline go to the LGBTQ support group?")
    assert HIERARCHICAL_FRESH.with_(present_only=False).applies_to("When did Caroline go to the support group?")


def test_the_asker_gate_opens_for_a_question_about_the_askers_own_present_state():
    from synthex_resources.search.strategies.builtin import HIERARCHICAL_FRESH_ASKER

    assert HIERARCHICAL_FRESH_ASKER.own_present and HIERARCHICAL_FRESH_ASKER.present_only
    assert (HIERARCHICAL_FRESH_ASKER.window, HIERARCHICAL_FRESH_ASKER.same_cosine) == (5, 0.3)
    for asked in ("How many bikes do I own?", "What brand of BBQ sauce am I obsessed with?",
                  "How many projects have I completed?", "What's the name of the cat we have?"):
        assert HIERARCHICAL_FRESH_ASKER.applies_to(asked), asked
        assert not HIERARCHICAL_FRESH.applies_to(asked), asked  # the cue gate alone stays closed: unchanged
    for asked in ("When did I go to Paris?", "Which US state do Audrey and Andrew live in?",
                  "What does Melanie do to destress?", "When did Caroline go to the LGBTQ support group?",
                  "How many bikes did I have before I moved?"):
        assert not HIERARCHICAL_FRESH_ASKER.applies_to(asked), asked
    assert HIERARCHICAL_FRESH_ASKER.applies_to("Where do I currently keep my old sneakers?")  # a cue still opens


class OldestFirst(Reranker):
    """A second stage that puts its pool oldest first: what it returns is its order, whatever the first stage's."""

    name, top_n = "oldest-first", 20

    def rerank(self, query: str, hits: Sequence[Any]) -> Reranked:
        return Reranked(sorted(hits, key=lambda h: h.created_at), None)


def _bike_records() -> list[Record]:
    said = [("old-bikes", "03-01", "I own two bikes, a road bike and a mountain bike."),
            ("new-bikes", "05-01", "I own three bikes now, a road bike, a mountain bike and a gravel bike."),
            ("cooking", "04-01", "I cooked a lentil soup for dinner.")]
    return [Record(id=rid, content=text, step="turns", materialization_key=rid,
                   created_at=f"2023-{day}T10:00:00Z",
                   metadata={"chat": {"conversation_id": "c", "session_id": rid, "author": "user"},
                             "time": {"created_at": f"2023-{day}T10:00:00Z"}})
            for rid, day, text in said]


def test_a_reranked_fresh_search_takes_the_rerankers_order_then_puts_the_newer_statement_first(tmp_path):
    """The reranker reorders the inner strategy's pool first; newer-first then applies to the reranked top hits
    (a real store, engine and embedder): for a question about the asker's present state the newer bike count
    moves just above the older one the reranker put first; for a past-tense question the reranker's order stays."""
    from synthex_resources.record_store import RecordStore
    from synthex_resources.search import SearchEngine, load_search_strategies

    store = RecordStore(str(tmp_path / "store"))
    store.records.upsert(_bike_records())
    engine = SearchEngine(store)
    hybrid = load_search_strategies().get("hybrid")
    fresh = FreshFirst(name="fresh-test", inner=hybrid, window=5, same_cosine=0.3, present_only=True,
                       own_present=True)

    def found(asked: str, strategy: Any) -> list[str]:
        return [h.id for h in engine.search(asked, steps=["turns"], k=3, strategy=strategy)]

    now, then = "How many bikes do I own?", "How many bikes did I own in March?"
    assert fresh.applies_to(now) and not fresh.applies_to(then)
    for asked in (now, then):
        assert found(asked, hybrid.with_(reranker=OldestFirst())) == ["old-bikes", "cooking", "new-bikes"]
    assert found(now, fresh.with_(reranker=OldestFirst())) == ["new-bikes", "old-bikes", "cooking"]
    assert found(then, fresh.with_(reranker=OldestFirst())) == ["old-bikes", "cooking", "new-bikes"]


def test_the_newer_hits_own_session_does_not_raise_the_band_it_must_reach():
    """A newer statement whose own session's turns (same time, same subject) sit beside it in the top hits: with
    ``median_other_times`` they are left out of the median the pair must reach, so the newer session moves above
    the older statement; counted in (the default), the band is their cosine and nothing moves."""
    hits = [hit("old", "03-01"), hit("other", "04-01"), hit("sib1", "05-01"), hit("sib2", "05-01"),
            hit("new", "05-01")]
    vectors = {"new": np.array([1.0, 0.0, 0.0]), "sib1": np.array([0.95, 0.312, 0.0]),
               "sib2": np.array([0.95, 0.312, 0.0]), "old": np.array([0.6, 0.0, 0.8]),  # cosine 0.6 with new
               "other": np.array([0.2, -0.98, 0.0])}
    assert ids(newer_first(hits, vectors, 0.3)) == ids(hits)
    assert ids(newer_first(hits, vectors, 0.3, median_other_times=True)) == ["sib1", "sib2", "new", "old", "other"]
    from synthex_resources.search.strategies.builtin import HIERARCHICAL_FRESH_ASKER

    assert HIERARCHICAL_FRESH_ASKER.median_other_times and not HIERARCHICAL_FRESH.median_other_times


def test_newer_means_stated_later_not_written_later():
    """The order of two statements is their ``time.created_at`` (when each was said), never the records' write
    times (an ingest writes them within milliseconds, in source order, differently each build): here the
    older statement's record was written last, and the newer statement still moves first."""
    old = hit("old-bikes", "03-01", written="2024-06-01T09:00:00.900Z")
    new = hit("new-bikes", "05-01", written="2024-06-01T09:00:00.100Z")
    vectors = {"old-bikes": BIKES, "new-bikes": BIKES_AGAIN}
    assert ids(newer_first([old, new], vectors, 0.6)) == ["new-bikes", "old-bikes"]
    assert ids(newer_first([new, old], vectors, 0.6)) == ["new-bikes", "old-bikes"]
