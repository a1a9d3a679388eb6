"""Issue 22, multi-hop: the ``hierarchical-speaker`` strategy (search/strategies/hierarchical_drill_down.py, step 5) gathers one
speaker's evidence from several sessions, which the flat turn leg misses; it is a registered, switchable
search mode. Real LanceDB, real embedder, a real run, on one tiny hand-made conversation (one build).
"""

from __future__ import annotations

import pytest
from test_hier import dia, hierarchy_on

from synthex_resources.search.strategies.builtin import HIERARCHICAL, HIERARCHICAL_SPEAKER
from synthex_resources.search.strategies.hierarchical import DrillDown
from synthex_resources.search.strategies.registry import load_search_strategies

# Both speakers play the same sports in the same words; only who said it tells Ann's turns from Bob's.
# What Ann plays is said in sessions 1 and 3.
SPORTS = {
    "1:00 pm on 8 May, 2023": [("Ann", "I play tennis every Saturday morning."),
                               ("Bob", "I play tennis too, but only on holidays.")],
    "2:00 pm on 4 June, 2023": [("Bob", "Volleyball on the beach, sometimes, for me."),
                                ("Ann", "Nice, the weather is good for it.")],
    "3:00 pm on 9 September, 2023": [("Ann", "I play volleyball on the beach on Sundays now."),
                                     ("Bob", "Cool, see you there.")],
}
QUESTION = "What sports does Ann play?"
EVIDENCE = ["D3:1", "D1:1"]  # sessions 3 and 1


@pytest.fixture(scope="module")
def sports(tmp_path_factory):
    """The hierarchical-conversational architecture's steps (evals/architectures.py) on the conversation."""
    with hierarchy_on(tmp_path_factory, "multihop", SPORTS, "conv-m", "hierarchical-speaker") as pipe:
        yield pipe


def test_the_named_speakers_evidence_from_two_sessions_is_found_where_flat_search_misses_it(sports):
    flat = sports.search(QUESTION, step="turns-in-context", mode="conversational", k=2)
    assert dia(flat) == ["D1:2", "D3:1"]  # Bob's tennis turn takes a slot: Ann's tennis is third
    assert dia(sports.search(QUESTION, mode="hierarchical", k=2)) == ["D3:1", "D1:2"]  # the altitudes alone too
    found = sports.search(QUESTION, k=2)  # the search output's mode=: hierarchical-speaker
    assert dia(found) == EVIDENCE
    assert {h.meta("chat.author") for h in found} == {"Ann"} and all(h.step == "turns" for h in found)


def test_a_question_naming_both_speakers_favours_neither(sports):
    both = "What sports do Ann and Bob play?"
    assert dia(sports.search(both, mode="hierarchical-speaker", k=4)) == \
        dia(sports.search(both, mode="hierarchical", k=4))


def test_the_strategy_is_registered_validated_and_switchable_by_name(sports):
    registry = load_search_strategies()
    strategy = registry.get("hierarchical-speaker")
    assert strategy is HIERARCHICAL_SPEAKER and isinstance(strategy, DrillDown)
    assert strategy.speaker_weight == 0.15 and HIERARCHICAL.speaker_weight == 0.0  # hierarchical unchanged
    assert strategy.with_(speaker_weight=0.0).parameters() == HIERARCHICAL.parameters()
    with pytest.raises(Exception, match="speaker_weight must be at least 0"):
        strategy.with_(speaker_weight=-0.5)
    assert sports.search_mode() == "hierarchical-speaker"
    assert dia(sports.search(QUESTION, mode="hierarchical-speaker", k=2)) == EVIDENCE
    assert dia(sports.search(QUESTION, mode="hierarchical", k=2)) != EVIDENCE  # another strategy, another answer
