"""The newer-first reordering (search/strategies/hierarchical_fresh.py): a hit moves just above an older hit saying the same thing
(cosine of their vectors at or above the band), nothing else moves, and a hit never leaves the window."""

from __future__ import annotations

import numpy as np
import pytest

from synthex.core.errors import PipelineDefinitionError
from synthex_resources.search.strategies.builtin import HIERARCHICAL_EXPANDED, HIERARCHICAL_FRESH
from synthex_resources.search.strategies.hierarchical_fresh import FreshFirst, newer_first
from synthex_resources.search.types import SearchHit

BIKES = np.array([1.0, 0.0, 0.0])
BIKES_AGAIN = np.array([0.9, 0.3, 0.0])  # cosine 0.949 with BIKES
COOKING = np.array([0.0, 0.0, 1.0])


def hit(hit_id: str, day: str) -> SearchHit:
    return SearchHit(id=hit_id, content=hit_id, step="turns", created_at=f"2023-{day}T10:00:00Z")


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
    undated = SearchHit(id="v3", content="v3", step="turns")  # no date: takes no part
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
