"""The design's scorecard (§9.5) on eval results (issue 21): every figure present with its target, state and
protocol; recomputed here from the per-question hits; the same from ``pipeline.eval`` and ``synthex eval``;
"not measurable" explicit (LoCoMo freshness), freshness measured on LongMemEval's knowledge-update questions;
provenance completeness checked through the real store (and failing on a dangling source)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import cli, go_offline, load, write_json
from test_evalloop import locomo_small

from evals.result import EvalResult
from evals.scorecard import (
    FRESHNESS,
    PRECISION,
    PROVENANCE,
    SPEEDUP,
    TEMPORAL,
    ProvenanceCheck,
    Scorecard,
    ScoreState,
    precision_at,
    source_steps_of,
)

NAMES = [PRECISION, TEMPORAL, FRESHNESS, PROVENANCE, SPEEDUP]


@pytest.fixture(scope="module")
def scored(tmp_path_factory, ran_project):
    """``pipeline.eval("locomo")`` on a fresh eval workspace (so the speedup is timed), then the same eval
    through ``synthex eval --json`` and in text mode (workspaces reused: the speedup is not measured)."""
    base = tmp_path_factory.mktemp("scorecard")
    root = ran_project.copy(base / "proj")
    data = write_json(base / "locomo_small.json", locomo_small())
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        pipeline = load(root)
        try:
            result = pipeline.eval("locomo", data=data, run_id="py")
        finally:
            pipeline.close()
        from_cli = json.loads(cli("eval", "locomo", "--data", data, "--run-id", "cli", "--json",
                                  "--project", root).stdout)
        text = cli("eval", "locomo", "--data", data, "--run-id", "cli-text", "--project", root).stdout
    return root, result, from_cli, text


def test_every_figure_is_there_with_its_target_state_and_protocol(scored):
    _, result, _, _ = scored
    assert isinstance(result, EvalResult) and result.scorecard.names() == NAMES
    card = result.scorecard
    for name in NAMES:
        assert card[name].protocol, name
    assert card[FRESHNESS].state is ScoreState.NOT_MEASURABLE and card[FRESHNESS].value is None
    assert card[FRESHNESS].met is None and "knowledge-update" in card[FRESHNESS].protocol
    assert card[PROVENANCE].state is ScoreState.MEASURED and card[PROVENANCE].value == 1.0
    assert card[PROVENANCE].met is True and card[PROVENANCE].n > 0
    # the first eval of this project ingested fresh workspaces: the no-change re-run was timed
    speedup = card[SPEEDUP]
    assert speedup.state is ScoreState.MEASURED and speedup.value is not None and speedup.value > 0, speedup
    assert speedup.met == (speedup.value < 0.1) and " s / " in speedup.protocol
    assert "top 10" in card[TEMPORAL].protocol and "'temporal'" in card[TEMPORAL].protocol
    with pytest.raises(KeyError):
        card["precision@50"]


def test_figures_recomputed_from_the_per_question_hits(scored):
    _, result, _, _ = scored
    with_gold = [q for q in result.questions if q["gold_turns"]]
    precision = round(sum(precision_at(q["hits"], set(q["gold_turns"])) for q in with_gold) / len(with_gold), 4)
    assert result.scorecard[PRECISION].value == precision and result.scorecard[PRECISION].n == 6
    assert result.scorecard[PRECISION].met == (precision > 0.8)
    temporal = [q for q in result.questions if q["category"] == "temporal"]
    assert len(temporal) == 2
    accuracy = round(sum(set(q["gold_turns"]) <= set(q["hits"][:10]) for q in temporal) / len(temporal), 4)
    assert result.scorecard[TEMPORAL].value == accuracy and result.scorecard[TEMPORAL].n == 2
    assert precision_at(["a", "b"], {"a", "b"}) == 0.4  # a short list is not rewarded: divided by 5


def test_the_same_figures_from_both_doors_and_in_compare(scored):
    root, result, from_cli, text = scored
    card = from_cli["scorecard"]
    assert list(card) == NAMES
    for name in (PRECISION, TEMPORAL, FRESHNESS, PROVENANCE):
        assert card[name] == result.scorecard[name].to_dict(), name
    assert result.to_dict()["scorecard"] == result.scorecard.to_dict()
    assert Scorecard.from_dict(json.loads(json.dumps(result.to_dict()))["scorecard"]) == result.scorecard
    # the CLI re-used the workspaces: nothing to time, and it says why
    assert card[SPEEDUP]["state"] == "not measured" and card[SPEEDUP]["value"] is None
    assert card[SPEEDUP]["met"] is None and "earlier eval" in card[SPEEDUP]["protocol"]
    # the means file the single writer saved carries the scorecard too
    saved = sorted((root / ".synthex" / "evals").glob("*-locomo.json"))
    assert saved and "scorecard" in json.loads(saved[-1].read_text())[0]
    # text mode: a small table, one row per figure
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("scorecard"))
    assert lines[start + 1] == "| figure | target | main |"
    row = next(line for line in lines[start:] if line.startswith(f"| {PRECISION} |"))
    value = result.scorecard[PRECISION].value
    assert row == f"| {PRECISION} | > 0.8 | {value:.4f} ({'met' if value > 0.8 else 'not met'}) |"
    assert f"| {FRESHNESS} | > 0.7 | not measurable |" in lines
    # compare: one more section, the scorecard
    other = EvalResult.from_result({**from_cli, "scorecard": from_cli["scorecard"]}, [], {})
    table = result.compare(other).splitlines()
    assert [line.split(" | ")[1] for line in table if line.startswith("| scorecard |")] == NAMES
    assert f"| scorecard | {PRECISION} | {value:.4f} (" in next(line for line in table if f"| {PRECISION} |" in line)
    assert next(line for line in table if f"| {FRESHNESS} |" in line).endswith("| not measurable | not measurable | n/a |")


def test_provenance_check_fails_on_a_dangling_source_and_a_sourceless_derived_record(ran_project):
    pipeline = load(ran_project.root)
    try:
        summary = pipeline.records("summaries")[0]
        check = ProvenanceCheck(source_steps_of(pipeline))
        assert check.complete(summary) is True
        assert ProvenanceCheck(source_steps_of(pipeline)).complete(
            replace(summary, id="x-dangling", source_ids=[*summary.source_ids, "no-such-record"])) is False
        assert ProvenanceCheck(source_steps_of(pipeline)).complete(
            replace(summary, id="x-orphan", source_ids=[])) is False  # a summary is not a source record
    finally:
        pipeline.close()


def test_freshness_measured_on_longmemeval_knowledge_update(tmp_path):
    def session(text: str) -> list[dict]:
        return [{"role": "user", "content": text, "has_answer": True}]

    item = {"question_id": "ku1", "question_type": "knowledge-update", "question": "Which city do I live in now?",
            "answer": "Porto", "question_date": "2023/06/01 (Thu) 00:58",
            "haystack_dates": ["2023/01/10 (Tue) 10:00", "2023/05/20 (Sat) 02:21", "2023/03/01 (Wed) 09:00"],
            "haystack_session_ids": ["old", "new", "other"],
            "haystack_sessions": [session("I live in the city of Lisbon."), session("I now live in the city of Porto."),
                                  [{"role": "user", "content": "What should I cook?", "has_answer": False}]],
            "answer_session_ids": ["old", "new"]}
    data = write_json(tmp_path / "lme.json", [item])
    out = json.loads(cli("eval", "longmemeval", "--data", data, "--compare", "raw-bm25", "--json",
                         "--project", tmp_path).stdout)
    fresh = out["scorecard"][FRESHNESS]
    assert fresh["state"] == "measured" and fresh["n"] == 1 and fresh["value"] == out["freshness"]["fresh@5"]
    assert "fresh@5" in fresh["protocol"] and fresh["met"] == (fresh["value"] > 0.7)
    assert out["scorecard"][TEMPORAL]["state"] == "not measured"  # no temporal-reasoning question in this data
