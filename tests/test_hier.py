"""Issue 22, parts 3-5: records with no text never match; the hierarchical (drill-down) strategy is a
registered, switchable search mode that reaches the turns an aggregate gathers; its template runs offline.

Real LanceDB, real embedder, real runs, on tiny hand-made data (one project per module where tests read).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest
from conftest import cli, locomo_sessions, write_json

from evals.benchmarks.locomo.data import (
    with_previous_turn,  # importing it also registers the locomo-turns format
)
from synthex import Pipeline
from synthex.core.digest import key_digest
from synthex_resources.search.strategies.builtin import CONVERSATIONAL, HIERARCHICAL
from synthex_resources.search.strategies.hierarchical import DrillDown
from synthex_resources.search.strategies.registry import load_search_strategies

# -- part 5: records with no text ----------------------------------------------------------------------

OFFER = "Ferrous Labs sent the offer letter: a senior engineer role, start in March."


def chatgpt_conversation(cid: str, title: str, messages: list[tuple[str, str]], when: float) -> dict:
    mapping, parent = {}, None
    for i, (role, text) in enumerate(messages):
        node = f"{cid}-{i}"
        mapping[node] = {"id": node, "parent": parent, "children": [],
                         "message": {"id": node, "author": {"role": role}, "create_time": when + i,
                                     "content": {"content_type": "text", "parts": [text]}}}
        if parent is not None:
            mapping[parent]["children"].append(node)
        parent = node
    return {"id": cid, "conversation_id": cid, "title": title, "create_time": when, "update_time": when,
            "mapping": mapping, "current_node": parent}


@pytest.fixture(scope="module")
def empty_export_project(tmp_path_factory):
    """The default template's steps over a hand-made export with one empty conversation: its transcript
    and its (offline) summary are empty records."""
    root = tmp_path_factory.mktemp("empty")
    export = write_json(root / "conversations.json", [
        chatgpt_conversation("c-offer", "Job offer", [("user", OFFER), ("assistant", "Congratulations on the offer!")],
                             1_700_000_000),
        chatgpt_conversation("c-bread", "Sourdough", [("user", "My sourdough starter smells of acetone."),
                                                      ("assistant", "Feed it more often.")], 1_700_100_000),
        chatgpt_conversation("c-garden", "Garden", [("user", "The tomatoes split after the rain."),
                                                    ("assistant", "Water them evenly.")], 1_700_200_000),
        chatgpt_conversation("c-empty", "", [], 1_700_300_000),
    ])
    (root / "pipeline.py").write_text(
        "from synthex import Pipeline\n"
        "from synthex.prompts import extract_transcript, summarize_conversation\n"
        "pipeline = Pipeline('empty-test')\n"
        f"pipeline.source('chatgpt', file={str(export)!r}, format='chatgpt-export')\n"
        "pipeline.transform('transcripts', from_='chatgpt', fn=extract_transcript)\n"
        "pipeline.transform('summaries', from_='transcripts', prompt=summarize_conversation)\n"
        "pipeline.output('search', from_=['transcripts', 'summaries'], surface='search')\n")
    cli("run", "--project", str(root))
    return root


def test_empty_records_never_match_in_any_strategy(empty_export_project):
    from synthex.core.project import load_pipeline

    pipe = load_pipeline(empty_export_project)
    try:
        blank = [r for step in ("transcripts", "summaries") for r in pipe.records(step) if not r.content.strip()]
        assert blank, "the fixture must hold records with no text"
        blank_ids = {r.id for r in blank}
        for mode in ("dense", "bm25", "hybrid", "hybrid-equal", "conversational", "hierarchical"):
            hits = pipe.search("Ferrous Labs offer", mode=mode, k=10)
            assert hits, mode  # the offer is found ...
            assert not blank_ids & {h.id for h in hits}, mode  # ... and no empty record, at any rank
            assert all(h.content.strip() for h in hits), mode
        dense = pipe.search("Ferrous Labs offer", mode="dense", k=10)
        assert OFFER in dense[0].content or dense[0].step == "summaries"
        # Before: the empty summary ranked second (its vector is near every query). Now every record
        # with text still ranks, and only those.
        with_text = {r.id for step in ("transcripts", "summaries") for r in pipe.records(step) if r.content.strip()}
        assert {h.id for h in dense} == with_text
    finally:
        pipe.close()


# -- part 3: the drill-down strategy --------------------------------------------------------------------

def test_the_hierarchical_strategy_is_registered_validated_and_listed():
    registry = load_search_strategies()
    strategy = registry.get("hierarchical")
    assert strategy is HIERARCHICAL and isinstance(strategy, DrillDown)
    assert strategy.turns is CONVERSATIONAL  # the strong flat baseline is its turn leg
    assert "hierarchical" in registry.describe()
    with pytest.raises(Exception, match="altitude_weight must be at least 0"):
        strategy.with_(altitude_weight=-1.0)
    assert strategy.with_(altitude_weight=0.0).altitude_weight == 0.0


def test_key_digest_is_the_key_then_the_members_words_most_frequent_first():
    text = key_digest("Ann", ["I went camping at the lake.", "Camping again, by the lake, with Rex."])
    assert text == "Ann: camping lake went rex"
    assert key_digest("Ann", ["Camping again, by the lake, with Rex.", "I went camping at the lake."]) == \
        "Ann: camping lake rex went"  # ties by first use


# A conversation where a flat search fills the top with the other speaker's lexical match: Bob talks about
# instruments; what Ann plays is said in two sessions in words the question does not use.
INSTRUMENTS = {
    "1:00 pm on 8 May, 2023": [("Ann", "I play the cello in a small quartet."),
                               ("Bob", "Nice, I mostly listen to jazz records.")],
    "2:00 pm on 4 June, 2023": [("Bob", "My cousin owns many instruments, mostly drums."),
                                ("Bob", "She practises every evening."),
                                ("Ann", "That sounds loud.")],
    "3:00 pm on 9 September, 2023": [("Ann", "Guitar lessons start next week, I bought a used guitar."),
                                     ("Bob", "Good luck with the lessons.")],
}


def instruments_fixture() -> list[dict]:
    return locomo_sessions(INSTRUMENTS, "conv-h")


def hierarchy_pipeline(name: str, root, data, mode: str, run: bool = True) -> Pipeline:
    """The hierarchical-conversational architecture's steps (evals/architectures.py) over a LoCoMo file, run
    (``run=False``: defined only)."""
    from synthex.prompts import key_profile

    pipe = Pipeline(name, project_dir=root, lexical_stem=True)
    pipe.source("turns", file=str(data), format="locomo-turns")
    pipe.transform("turns-in-context", from_="turns", fn=with_previous_turn)
    for key in ("speaker", "entity", "topic"):
        pipe.aggregate(f"by-{key}", from_="turns", by=key, fn=key_profile)
    pipe.output("search", from_=["turns-in-context", "by-speaker", "by-entity", "by-topic"], surface="search",
                mode=mode)
    if run:
        pipe.run()
    return pipe


@contextlib.contextmanager
def hierarchy_on(tmp_path_factory, name: str, sessions: dict, conversation: str, mode: str) -> Iterator[Pipeline]:
    """``hierarchy_pipeline`` over a hand-made LoCoMo conversation (conftest ``locomo_sessions``), closed after."""
    root = tmp_path_factory.mktemp(name)
    pipe = hierarchy_pipeline(name, root, write_json(root / "locomo.json", locomo_sessions(sessions, conversation)),
                              mode)
    try:
        yield pipe
    finally:
        pipe.close()


@pytest.fixture(scope="module")
def hierarchy(tmp_path_factory):
    """The hierarchical-conversational architecture on the conversation above (one build for the module)."""
    root = tmp_path_factory.mktemp("hier")
    pipe = hierarchy_pipeline("hier", root, write_json(root / "locomo.json", instruments_fixture()), "hierarchical")
    yield pipe
    pipe.close()


def dia(hits) -> list[str]:
    return [h.meta("chat.message_id") for h in hits]


def test_drill_down_returns_the_turns_an_aggregate_gathers_that_flat_search_misses(hierarchy):
    from synthex_resources.search import SearchEngine
    from synthex_resources.search.strategies.hierarchical_drill_down import altitude_scores, split_steps

    question = "Which instruments does Ann play?"
    engine = SearchEngine(hierarchy.store())
    steps = hierarchy.search_steps()
    with hierarchy.store().pinned_version():
        assert split_steps(engine, steps, hierarchy.app.scope(None), None) == (
            ["turns-in-context"], ["by-speaker", "by-topic"])  # no entity in these turns: by-entity is empty
        assert hierarchy.records("by-entity") == []
    flat = hierarchy.search(question, step="turns-in-context", mode="conversational", k=2)  # flat: the turns
    drilled = hierarchy.search(question, k=2)  # the search output's mode=: hierarchical
    assert dia(flat) == ["D2:1", "D2:2"]  # Bob's instruments and his next turn: Ann's cello is third
    assert dia(drilled) == ["D2:1", "D1:1"]  # Ann's aggregate lifts her turn: "I play the cello"
    assert all(h.step == "turns" for h in drilled)  # leaf turns, not aggregates
    speakers = {r.meta("group.key"): r for r in hierarchy.records("by-speaker")}
    cello = next(r for r in hierarchy.records("turns") if r.meta("chat.message_id") == "D1:1")
    assert cello.id in speakers["Ann"].source_ids and cello.id not in speakers["Bob"].source_ids
    ranked = altitude_scores(engine, question, "by-speaker", hierarchy.app.scope(None), None, HIERARCHICAL,
                             hierarchy.store().embedder.embed([question])[0])
    assert ranked[speakers["Ann"].id] == 1.0 > ranked.get(speakers["Bob"].id, 0.0)  # the aggregate that matched
    # Without the altitude, the strategy is its turn leg: the conversational ranking exactly.
    flat_again = SearchEngine(hierarchy.store()).search(question, steps=steps, k=2,
                                                        strategy=HIERARCHICAL.with_(altitude_weight=0.0))
    assert dia(flat_again) == dia(flat)


def test_the_mode_is_switchable_from_every_door(hierarchy):
    question = "Which instruments does Ann play?"
    assert hierarchy.search_mode() == "hierarchical"
    assert dia(hierarchy.search(question, mode="hierarchical", k=2)) == ["D2:1", "D1:1"]
    assert dia(hierarchy.search(question, mode="hybrid", k=2)) != ["D2:1", "D1:1"]  # another strategy, another answer


# -- part 4: the template ---------------------------------------------------------------------------------

def test_the_hierarchical_conversational_template_runs_offline_and_searches(tmp_path):
    from synthex.core.project import TEMPLATES

    assert "hierarchical-conversational" in TEMPLATES
    export = write_json(tmp_path / "conversations.json", [
        chatgpt_conversation("c-music", "Music", [("user", "I play the cello in a small quartet."),
                                                  ("assistant", "How long have you played?"),
                                                  ("user", "Ten years; guitar lessons start next week.")],
                             1_700_000_000),
        chatgpt_conversation("c-trip", "Trip", [("user", "We booked a ryokan in Kyoto for April."),
                                                ("assistant", "Kyoto in April has the cherry blossoms.")],
                             1_700_100_000)])
    cli("init", "mem", "--from", str(export), "--template", "hierarchical-conversational", cwd=tmp_path)
    proj = tmp_path / "mem"
    text = (proj / "pipeline.py").read_text()
    assert "--template hierarchical-conversational" in text and 'mode="hierarchical"' in text
    assert "0 errors" in cli("run", "--project", str(proj)).stdout
    hits = json.loads(cli("search", "when is the ryokan booked", "--json", "--project", str(proj)).stdout)["hits"]
    assert hits and hits[0]["step"] == "chatgpt" and "ryokan" in hits[0]["content"]  # a turn, through --mode's default
    same = json.loads(cli("search", "when is the ryokan booked", "--mode", "hierarchical", "--json",
                          "--project", str(proj)).stdout)["hits"]
    assert [h["id"] for h in same] == [h["id"] for h in hits]
    from synthex.core.project import load_pipeline

    pipe = load_pipeline(proj)
    try:
        speakers = {r.meta("group.key"): r for r in pipe.records("by-speaker")}
        assert set(speakers) == {"user", "assistant"}
        turns = {r.id for r in pipe.records("chatgpt")}
        assert sorted(i for r in speakers.values() for i in r.source_ids) == sorted(turns)  # provenance: every turn
        # word neighbours (hierarchical-expanded): the CLI and the Python API give the same turns, and a turn
        # naming an instrument ("guitar") is lifted for a question that names none
        asked = "Which instruments does the user play?"
        by_cli = json.loads(cli("search", asked, "--mode", "hierarchical-expanded", "-k", 2, "--json",
                                "--project", str(proj)).stdout)["hits"]
        assert [h["id"] for h in by_cli] == [h.id for h in pipe.search(asked, mode="hierarchical-expanded", k=2)]
        assert "cello" in by_cli[0]["content"]

        def guitar(mode: str) -> float:
            return next(h.score for h in pipe.search(asked, mode=mode, k=5) if "guitar" in h.content)
        assert guitar("hierarchical-expanded") > 1.1 * guitar("hierarchical-speaker")
    finally:
        pipe.close()
