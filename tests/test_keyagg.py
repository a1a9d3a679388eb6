"""Issue 22 parts 1-2: aggregates by key (named and callable keys, multi-key membership, provenance, incremental
recompute of only the changed keys, hostile keys, TOML round trip, the Dagster asset and its partitions) and
bounded fold state.

One module-scoped project is run twice (the second run after one member changed and one arrived); the tests
read what both runs stored and counted. Everything else is in process, without another run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import go_offline

from synthex import CompressState, Pipeline, TruncateState, WindowState
from synthex.core.errors import PipelineDefinitionError, StepError
from synthex.core.limits import Limits
from synthex.core.periods import ALL_PERIODS
from synthex.core.record import Record
from synthex.core.steps.group_keys import KeyGroup, key_functions, keys_of
from synthex.prompts import member_digest

TURNS = [  # (id, conversation, session, speaker, time, text)
    ("c1/1", "c1", "S1", "Caroline", "2023-05-08T13:56:00Z", "Caroline: I went to the LGBTQ support group in Boston. #pride"),
    ("c1/2", "c1", "S1", "Melanie", "2023-05-08T13:56:30Z", "Melanie: That sounds great! Did you see Dr. Patel there?"),
    ("c1/3", "c1", "S2", "Caroline", "2023-06-10T10:00:00Z", "Caroline: Yes, Dr. Patel talked about the adoption agency. #pride #family"),
    ("c1/4", "c1", "S2", "Melanie", "2023-06-10T10:00:30Z", "Melanie: I painted a sunset with my kids in Boston. #family"),
    ("c2/1", "c2", "S1", "Jon", "2023-06-11T09:00:00Z", "Jon: I lost my job at the bank, so I am opening a dance studio."),
]
CHANGED = {"c1/4": "Melanie: I painted a sunset with my kids in Paris. #family"}  # the second run's edit
ADDED = ("c2/2", "c2", "S1", "Gina", "2023-06-11T09:00:30Z", "Gina: A dance studio! I opened a clothing store.")


def hashtags(record: Record) -> list[str]:
    """A key function giving several keys: the record joins one group per hashtag (none: no group)."""
    return [w[1:] for w in record.content.split() if w.startswith("#")]


def speaker_prompt(records: list[Record], group: KeyGroup) -> str:
    return f"What does {group} say?\n" + "\n".join(r.content for r in records)


def append_turn(record: Record, state: str) -> str:
    """A plain-Python fold whose state grows with every input: what the state bounds are for."""
    return f"{state}\n{record.content}" if state else record.content


def write_turns(path: Path, turns: list[tuple[str, ...]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "content": text, "created_at": when, "metadata": {"chat": {
        "conversation_id": conv, "session_id": session, "author": who}}}) + "\n"
        for i, conv, session, who, when, text in turns))
    return path


def key_pipeline(root: Path, data: Path, prompt=speaker_prompt) -> Pipeline:
    pipe = Pipeline("keyagg", project_dir=root)
    pipe.source("turns", file=str(data), format="jsonl")
    pipe.aggregate("people", from_="turns", by="speaker", prompt=prompt)
    pipe.aggregate("tags", from_="turns", by=hashtags, fn=member_digest)
    pipe.aggregate("entities", from_="turns", by="entity", fn=member_digest)
    pipe.aggregate("people-monthly", from_="turns", by="speaker", period="month", fn=member_digest)
    pipe.fold("log-truncated", from_="turns", fn=append_turn, state=TruncateState(tokens=12))
    pipe.fold("log-window", from_="turns", fn=append_turn, state=WindowState(inputs=2))
    pipe.fold("log-compressed", from_="turns", fn=append_turn, state={"kind": "compress", "every": 2})
    pipe.output("search", from_=["people"], surface="search")  # only it is embedded when written
    return pipe


@dataclass
class Built:
    root: Path
    first: dict[str, list[Record]]  # step -> records after the first run
    second: dict[str, list[Record]]  # ... after the second run (c1/4 changed, c2/2 added)
    first_calls: list[str]  # the keys the speaker prompt was rendered for, per run
    second_calls: list[str]
    second_run: object


STEPS = ("turns", "people", "tags", "entities", "people-monthly", "log-truncated", "log-window", "log-compressed")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    root = tmp_path_factory.mktemp("keyagg")
    data = write_turns(root / "turns.jsonl", TURNS)
    calls: list[str] = []

    def counting_prompt(records: list[Record], group: KeyGroup) -> str:
        calls.append(group.key)
        return f"What does {group} say?\n" + "\n".join(r.content for r in records)

    with pytest.MonkeyPatch.context() as mp:
        go_offline(mp)
        pipe = key_pipeline(root, data, counting_prompt)
        pipe.open()
        try:
            assert pipe.run().status == "completed"
            first = {s: pipe.records(s) for s in STEPS}
            first_calls = list(calls)
            calls.clear()
            edited = [(i, c, s, w, t, CHANGED.get(i, text)) for i, c, s, w, t, text in TURNS] + [ADDED]
            write_turns(data, edited)
            run = pipe.run()
            assert run.status == "completed"
            second = {s: pipe.records(s) for s in STEPS}
        finally:
            pipe.close()
    return Built(root, first, second, first_calls, list(calls), run)


def by_key(records: list[Record]) -> dict[str, Record]:
    return {r.meta("group.key"): r for r in records}


def turns_by_item(built: Built) -> dict[str, Record]:
    """The first run's turns by their source line's id."""
    return {next(i for i, *_, text in TURNS if text == t.content): t for t in built.first["turns"]}


def test_named_key_one_record_per_key_with_provenance_to_every_member(built):
    people = by_key(built.first["people"])
    turns = {t.id: t for t in built.first["turns"]}
    assert set(people) == {"Caroline", "Melanie", "Jon"}
    for key, record in people.items():
        expected = {t.id for t in turns.values() if t.meta("chat.author") == key}
        assert set(record.source_ids) == expected and expected
        assert record.period == ALL_PERIODS and record.meta("time.period") == ALL_PERIODS
        assert record.meta("group.by") == "speaker" and record.meta("group.members") == len(expected)
    assert people["Jon"].meta("chat.conversation_id") == "c2"
    named = key_functions()
    assert [named.get(n)(turns_by_item(built)["c1/3"]) for n in ("conversation", "session", "topic")] == [
        "c1", "c1/S2", ["adoption agency"]]
    # A key group spans periods: Caroline's turns are from May and June, her record is one.
    assert {t.period for t in turns.values() if t.meta("chat.author") == "Caroline"} == {"2023-05", "2023-06"}


def test_callable_key_with_several_keys_per_record_and_records_in_no_group(built):
    tags = by_key(built.first["tags"])
    turns = {t.id: t for t in built.first["turns"]}
    assert {k: sorted(turns[s].meta("chat.author") for s in r.source_ids) for k, r in tags.items()} == {
        "pride": ["Caroline", "Caroline"], "family": ["Caroline", "Melanie"]}
    both = next(t for t in turns.values() if "#pride #family" in t.content)
    assert both.id in tags["pride"].source_ids and both.id in tags["family"].source_ids  # in two groups
    assert tags["family"].meta("group.by") == "tests.test_keyagg:hashtags" or \
        tags["family"].meta("group.by").endswith(":hashtags")
    # fn= is plain Python: a deterministic digest of the member turns, no model.
    assert tags["family"].audit["model"].startswith("python:") and "Melanie: I painted" in tags["family"].content
    entities = by_key(built.first["entities"])
    assert {"boston", "dr. patel"} <= set(entities) and "caroline" not in entities  # the speaker is left out
    assert len(entities["boston"].source_ids) == 2


def test_key_and_period_gives_one_record_per_key_and_month(built):
    monthly = built.first["people-monthly"]
    assert sorted((r.period, r.meta("group.key")) for r in monthly) == [
        ("2023-05", "Caroline"), ("2023-05", "Melanie"), ("2023-06", "Caroline"), ("2023-06", "Jon"),
        ("2023-06", "Melanie")]
    assert all(r.meta("time.period") == r.period for r in monthly)


def test_incremental_recompute_touches_only_the_changed_keys(built):
    # First run: one prompt per speaker. Second run: Melanie's turn changed and Gina arrived, so only their
    # records are made; Caroline's and Jon's keep their ids and their prompts are not rendered again.
    assert sorted(built.first_calls) == ["Caroline", "Jon", "Melanie"]
    assert sorted(built.second_calls) == ["Gina", "Melanie"]
    before, after = by_key(built.first["people"]), by_key(built.second["people"])
    assert after["Caroline"].id == before["Caroline"].id and after["Jon"].id == before["Jon"].id
    assert after["Melanie"].id != before["Melanie"].id and "Gina" in after
    stats = built.second_run.step_stats["people"]
    assert (stats.output, stats.skipped) == (2, 2)
    tags_before, tags_after = by_key(built.first["tags"]), by_key(built.second["tags"])
    assert tags_after["pride"].id == tags_before["pride"].id  # no member of #pride changed
    assert tags_after["family"].id != tags_before["family"].id
    assert built.second_run.step_stats["tags"].output == 1
    # entities: boston lost a member, paris is new; dr. patel is untouched
    ents_before, ents_after = by_key(built.first["entities"]), by_key(built.second["entities"])
    assert ents_after["dr. patel"].id == ents_before["dr. patel"].id
    assert len(ents_after["boston"].source_ids) == 1 and "paris" in ents_after
    monthly_stats = built.second_run.step_stats["people-monthly"]
    assert monthly_stats.output == 2  # June's Melanie and Gina; May's groups and June's Caroline, Jon kept


def test_the_plan_after_a_run_is_empty_and_the_asset_shows_its_partitions(built):
    from dagster import AssetKey

    from synthex_assets import build_definitions

    pipe = key_pipeline(built.root, built.root / "turns.jsonl")
    pipe.open()
    try:
        # Only "people" has work: its prompt here is another function than the run's (a new version).
        plan = pipe.plan()
        assert set(plan.per_step) == {"people"} and plan.per_step["people"]["periods"] == [ALL_PERIODS]
    finally:
        pipe.close()
    graph = build_definitions(pipe).resolve_asset_graph()
    node = graph.get(AssetKey("people"))
    assert node.partitions_def.partition_dimension_names == ["branch", "period"]
    assert f"`{ALL_PERIODS}`" in node.metadata["synthex/partitions"] and f"`{ALL_PERIODS}`" in node.description
    assert "calendar month" in graph.get(AssetKey("people_monthly")).metadata["synthex/partitions"]


def test_hostile_keys_are_one_line_naming_the_record(built):
    record = Record(id="r1", content="x", step="turns", branch="main", metadata={"chat": {"title": "T"}})
    about = "step 'k': record r1"
    limits = Limits(group_key_chars=10, group_keys_per_record=4)
    assert keys_of(record, lambda r: ["  a  b ", "", "a b", None], "f", limits, about) == ["a b"]
    assert keys_of(record, lambda r: None, "f", limits, about) == []
    cases = [
        (lambda r: "k" * 11, "over the group_key_chars bound of 10"),
        (lambda r: iter(str(i) for i in range(10**9)), "more than 4 keys"),  # an endless generator is not drained
        (lambda r: ["a", 7], "key of type int"),
        (lambda r: 7, "returned int"),
        (lambda r: {"a": 1}, "returned dict"),
        (lambda r: 1 / 0, "raised ZeroDivisionError"),
    ]
    for fn, problem in cases:
        with pytest.raises(StepError, match=problem) as caught:
            keys_of(record, fn, "f", limits, about)
        assert str(caught.value).startswith(about) and "\n" not in str(caught.value)
    # Through the planner, on the stored turns: the step and the record are named.
    pipe = Pipeline("keyagg", project_dir=built.root, limits=Limits(group_key_chars=5))
    pipe.source("turns", file=str(built.root / "turns.jsonl"), format="jsonl")
    pipe.aggregate("people", from_="turns", by="speaker", fn=member_digest)
    pipe.open()
    try:
        with pytest.raises(StepError, match=r"step 'people': record \w+.*key 'Caroline' is 8 characters, over "
                                            r"the group_key_chars bound of 5") as caught:
            pipe.plan()
        assert "\n" not in str(caught.value)
    finally:
        pipe.close()


def test_definition_errors_and_toml_round_trip(tmp_path):
    data = write_turns(tmp_path / "turns.jsonl", TURNS[:1])
    pipe = key_pipeline(tmp_path, data)
    text = pipe.to_toml(tmp_path / "p.toml")
    assert 'by = "speaker"' in text and 'by = "test_keyagg:hashtags"' in text
    again = Pipeline.from_toml(tmp_path / "p.toml", project_dir=tmp_path, trust=True)
    assert {s: again.steps[s].version_hash() for s in again.steps} == {s: pipe.steps[s].version_hash() for s in pipe.steps}
    assert again.steps["tags"].key_fn is hashtags and again.steps["people"].by == "speaker"
    assert again.steps["people-monthly"].period == "month" and again.steps["people"].period is None
    with pytest.raises(PipelineDefinitionError, match="unknown key function 'colour'"):
        pipe.aggregate("x", from_="turns", by="colour", fn=member_digest)
    with pytest.raises(PipelineDefinitionError, match="by= takes a key function"):
        pipe.aggregate("x", from_="turns", by=3, fn=member_digest)
    with pytest.raises(PipelineDefinitionError, match="exactly one of prompt= or fn="):
        pipe.aggregate("x", from_="turns", by="speaker", fn=member_digest, prompt=speaker_prompt)
    with pytest.raises(PipelineDefinitionError, match="period='fortnight'"):
        pipe.aggregate("x", from_="turns", by="speaker", period="fortnight", fn=member_digest)
    assert set(key_functions().names()) >= {"speaker", "conversation", "session", "entity", "topic"}
    # A time aggregate keeps its version (so its record ids): no by= / fn= in its config.
    assert "by" not in pipe.steps["people"].__class__(name="m", from_=["turns"], prompt=speaker_prompt).config()


def by_period(records: list[Record]) -> dict[str, Record]:
    return {r.period: r for r in records}


def test_fold_state_bounds_keep_the_state_small(built):
    turns = sorted(built.second["turns"], key=lambda r: r.meta("time.created_at"))
    # Unbounded, the state would be every turn so far (what append_turn makes).
    log = {"2023-05": "\n".join(t.content for t in turns[:2]), "2023-06": "\n".join(t.content for t in turns)}
    truncated = by_period(built.second["log-truncated"])
    for period, record in truncated.items():
        assert len(record.content) <= 12 * 4 and record.content
        assert log[period].endswith(record.content)  # the last tokens, cut at a word
        assert record.meta("step.state_bound") == "truncate"
    window = by_period(built.second["log-window"])
    assert window["2023-06"].content == "\n".join(t.content for t in turns[-2:])
    assert window["2023-06"].source_ids == [t.id for t in turns[-2:]] == window["2023-06"].meta("step.window")
    assert window["2023-05"].source_ids == [t.id for t in turns[:2]]  # May: both of its turns
    compressed = by_period(built.second["log-compressed"])
    june = compressed["2023-06"]
    assert june.meta("step.inputs_folded") == len(turns) == 6  # compressed after the 2nd, 4th and 6th input
    assert len(june.content) < len(log["2023-06"]) and june.content
    assert june.audit["prompt_function"] == "synthex.core.prompts:compress_state"
    assert "offline" in june.audit["model"]
    assert built.first["log-compressed"][0].audit["tokens_in"] > 0


def test_fold_state_definition_errors_and_toml(tmp_path):
    pipe = Pipeline("f", project_dir=tmp_path)
    pipe.source("turns", file=str(write_turns(tmp_path / "t.jsonl", TURNS[:1])), format="jsonl")
    for bad, problem in [(TruncateState, "TruncateState: tokens=0; expected a positive integer"),
                         (WindowState, "WindowState: inputs=0")]:
        with pytest.raises(PipelineDefinitionError, match=problem):
            bad(0)
    with pytest.raises(PipelineDefinitionError, match="CompressState: every=True"):
        CompressState(every=True)
    with pytest.raises(PipelineDefinitionError, match="fold 'x': state: unknown fold state bound 'lossy'"):
        pipe.fold("x", from_="turns", fn=append_turn, state={"kind": "lossy"})
    with pytest.raises(PipelineDefinitionError, match="fold 'x': state='short'"):
        pipe.fold("x", from_="turns", fn=append_turn, state="short")
    with pytest.raises(PipelineDefinitionError, match="unknown field 'token'"):
        pipe.fold("x", from_="turns", fn=append_turn, state={"kind": "truncate", "token": 5})
    plain = pipe.fold("plain", from_="turns", prompt=append_turn)
    assert "state" not in plain.config() and "fn" not in plain.config()  # an unbounded fold keeps its version
    pipe.fold("t", from_="turns", fn=append_turn, state=TruncateState(tokens=50))
    pipe.fold("c", from_="turns", fn=append_turn, state=CompressState(every=3))
    text = pipe.to_toml(tmp_path / "p.toml")
    assert 'kind = "truncate"' in text and "tokens = 50" in text
    again = Pipeline.from_toml(tmp_path / "p.toml", project_dir=tmp_path, trust=True)
    assert again.steps["t"].state == TruncateState(tokens=50) and again.steps["c"].state == CompressState(every=3)
    assert again.steps["t"].version_hash() == pipe.steps["t"].version_hash()
    assert again.steps["c"].version_hash() == pipe.steps["c"].version_hash()
