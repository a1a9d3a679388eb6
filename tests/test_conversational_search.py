"""The conversational recipe: leaf-sum fusion, date prior, neighbour credit, names dropped, stemmed BM25.

Real LanceDB, real embedder, real Dagster runs, on a small LoCoMo-format fixture.
"""

from datetime import UTC, datetime

import pytest
from conftest import locomo_sessions, write_json

from evals.benchmarks.locomo.data import (
    with_previous_turn,  # importing it also registers the locomo-turns format
)
from synthex import Pipeline
from synthex.core.scope import BranchScope
from synthex_resources import open_store
from synthex_resources.search import SearchEngine
from synthex_resources.search.strategies.builtin import CONVERSATIONAL
from synthex_resources.search.strategies.conversational_fusion import without_names
from synthex_resources.search.strategies.conversational_temporal import TimeWindow, time_window

SESSIONS = {
    "1:00 pm on 8 May, 2023": [
        ("Ann", "We went hiking at the lake, hiking all day, hiking until sunset."),
        ("Bob", "That sounds lovely."),
        ("Ann", "I have been cooking a lot lately, mostly soups."),
    ],
    "2:00 pm on 4 June, 2023": [
        ("Bob", "My zebra finch learned a new song."),
        ("Ann", "No way, that is adorable."),
        ("Bob", "It sings every morning now."),
        ("Ann", "Send me a recording sometime."),
    ],
    "3:00 pm on 9 September, 2023": [
        ("Ann", "Last weekend I went hiking at the lake again."),
        ("Bob", "Was the weather good?"),
    ],
}


def locomo_fixture() -> list[dict]:
    return locomo_sessions(SESSIONS, "conv-t")


def build(root, stem: bool = True) -> Pipeline:
    data = write_json(root / "locomo.json", locomo_fixture())
    pipe = Pipeline("conv", project_dir=root, lexical_stem=stem)
    pipe.source("turns", file=str(data), format="locomo-turns")
    pipe.transform("turns-in-context", from_="turns", fn=with_previous_turn)
    pipe.output("search", from_=["turns-in-context"], surface="search")
    pipe.run()
    return pipe


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return build(tmp_path_factory.mktemp("conv"))


def dia(hit) -> str:
    return hit.meta("chat.message_id")


def test_time_window_parses_the_forms_questions_use():
    assert time_window("What did Gina find on 1 February, 2023?") == TimeWindow(month=2, day=1, year=2023)
    assert time_window("Who did Maria have dinner with on May 3, 2023?") == TimeWindow(month=5, day=3, year=2023)
    assert time_window("When did Melanie go camping in June?") == TimeWindow(month=6)
    assert time_window("What setback did she face in October 2023?") == TimeWindow(month=10, year=2023)
    assert time_window("How many times in 2022?") == TimeWindow(year=2022)
    assert time_window("You may want to go") is None  # "may" alone is a verb
    assert time_window("What did Ann cook?") is None
    june = time_window("in June")
    assert june.contains(datetime(2023, 7, 10, tzinfo=UTC))  # told up to two weeks after the month
    assert not june.contains(datetime(2023, 7, 20, tzinfo=UTC))
    day = time_window("on 1 February, 2023")
    assert day.contains(datetime(2023, 2, 8, tzinfo=UTC)) and not day.contains(datetime(2023, 2, 12, tzinfo=UTC))
    assert not day.contains(datetime(2024, 2, 2, tzinfo=UTC))


def test_participant_names_are_dropped_from_the_query():
    names = {"ann", "bob"}
    assert without_names("What did Ann's dog eat with Bob?", names) == "What did dog eat with ?"
    assert without_names("Ann, Bob?", names) == "Ann, Bob?"  # nothing left: keep the query
    assert without_names("Annabel's plan", names) == "Annabel's plan"  # whole words only


def test_conversational_search_ranks_turns_not_context_records(pipe):
    hits = pipe.search("What does the finch sing?", mode="conversational", k=5)
    assert hits and all(h.step == "turns" and not h.source_ids for h in hits)
    assert len({h.id for h in hits}) == len(hits)
    assert dia(hits[0]) in {"D2:1", "D2:3"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_date_named_in_the_query_prefers_turns_written_then(pipe):
    without = pipe.search("Where did Ann go hiking?", mode="conversational", k=3)
    assert dia(without[0]) == "D1:1"  # the May turn says "hiking" three times
    dated = pipe.search("Where did Ann go hiking in September 2023?", mode="conversational", k=3)
    assert dia(dated[0]) == "D3:1"


def test_neighbouring_turns_share_the_score(pipe):
    engine = SearchEngine(open_store(pipe.store_uri))
    lexical_only = CONVERSATIONAL.with_(dense=False, leaf_dense_weight=0.0, date_weight=0.0)
    hits = engine.search("zebra", steps=["turns"], k=10, strategy=lexical_only)
    by_dia = {dia(h): h.score for h in hits}
    assert set(by_dia) == {"D2:1", "D2:2"}  # the match and the turn after it, nothing from other sessions
    assert by_dia["D2:1"] == pytest.approx(1.0) and by_dia["D2:2"] == pytest.approx(0.4)
    plain = engine.search("zebra", steps=["turns"], k=10, strategy=lexical_only.with_(neighbour_weight=0.0))
    assert [dia(h) for h in plain] == ["D2:1"]


def test_stemmed_index_is_a_project_choice_and_is_rebuilt_when_it_changes(tmp_path):
    pipe = build(tmp_path / "p", stem=False)
    engine = SearchEngine(open_store(pipe.store_uri))
    where = engine.where(["turns"], BranchScope.own())
    assert engine.lexical("cooked", where, 5) == []  # unstemmed: "cooked" is not "cooking"
    engine.ensure_index(stem=True)
    details = {i.name: i.index_details for i in engine.store.records_table().list_indices()}
    assert details["content_idx"]["stem"] is True
    [(rid, _)] = engine.lexical("cooked", where, 5)
    assert "cooking" in engine.store.records.get(rid).content
    pipe.lexical_stem = True
    assert 'lexical_stem = true' in pipe.to_toml()
    path = tmp_path / "pipeline.toml"
    pipe.to_toml(path)
    assert Pipeline.from_toml(path, project_dir=tmp_path / "p", trust=True).lexical_stem is True  # its fn is evals code


def test_metadata_filters_are_refused_by_leaf_sum(pipe):
    from synthex.core.errors import PipelineDefinitionError

    with pytest.raises(PipelineDefinitionError, match="metadata"):  # a user error: one line, not a traceback
        pipe.search("finch", mode="conversational", metadata={"chat.author": "Bob"})


def test_a_project_branch_can_be_evaluated_with_another_recipe(project):
    from evals.architectures import resolve

    [arch] = resolve(["main@conversational"], project)
    assert (arch.name, arch.branch, arch.mode, arch.work_key) == ("main@conversational", "main", "conversational", "project")
    with pytest.raises(ValueError, match="unknown search recipe 'nope'"):
        resolve(["main@nope"], project)
