"""Order-invariant ingest: LoCoMo turns written to a stream source in one batch, or shuffled into several
batches each followed by a sync, give the same records (ids and contents) and, for every question, the
same top-10 of the conversational search, as a set and in order.

A slice of the real data (the first conversation's first sessions, the questions they answer); the full
measurement is ``python -m evals.invariance`` (seven conversations, ten batches; docs/_drafts/invariance.md).
Real stream files, CDC state, Dagster runs, LanceDB (FTS index folded after each sync) and embedder.
"""

from __future__ import annotations

import random

import pytest

from evals.invariance import DEFAULT_DATA, run_invariance, shuffled_batches, stream_lines
from synthex.core.sources import StreamOrigin, append_lines
from synthex_resources.search.engine import top_with_ties

needs_locomo = pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo dev data not found at {DEFAULT_DATA}")


def test_an_index_cut_inside_a_tie_group_does_not_depend_on_row_order():
    """An index query returns whichever members of a tie group its row order puts first at its limit;
    the candidate pool must be the same set whatever that order (the ingest order) was."""
    scores = {"top": 9.0, **{f"tie-{i:02d}": 3.0 for i in range(40)}, "low": 1.0}
    pools = []
    for seed in (1, 2, 3):
        rows = list(scores.items())
        random.Random(seed).shuffle(rows)  # the index's row order: the order records were written in
        calls = []

        def fetch(limit: int, rows=rows, calls=calls) -> list[tuple[str, float]]:
            calls.append(limit)
            return sorted(rows, key=lambda p: -p[1])[:limit]  # stable: ties in row order, as an index does

        pools.append(top_with_ties(fetch, 5))
        assert len(calls) > 1  # the first limit cut the tie group: it fetched further
    assert pools[0] == pools[1] == pools[2] == [("top", 9.0)] + [(f"tie-{i:02d}", 3.0) for i in range(4)]
    assert top_with_ties(lambda limit: sorted(scores.items(), key=lambda p: -p[1])[:limit], 0) == []


@needs_locomo
def test_lines_carry_their_identity_date_and_predecessor_from_the_data():
    lines = stream_lines(DEFAULT_DATA, conversations=1, sessions=2)
    assert {line["metadata"]["chat"]["session_id"] for line in lines} == {"S1", "S2"}
    assert len({line["id"] for line in lines}) == len(lines) and all(line["created_at"] for line in lines)
    by_id = {line["id"]: line for line in lines}
    first, second = lines[0], lines[1]
    assert first["metadata"]["chat"]["previous"] == ""  # a session's first turn answers nothing
    assert second["metadata"]["chat"]["previous"] == first["text"]  # the turn before it in the session
    batches = shuffled_batches(lines, 3, seed=42)
    assert len(batches) == 3 and sorted(x["id"] for b in batches for x in b) == sorted(by_id)
    assert [x["id"] for b in batches for x in b] != [x["id"] for x in lines]  # arrival order really differs
    assert batches == shuffled_batches(lines, 3, seed=42)


@needs_locomo
def test_one_batch_and_shuffled_batches_give_the_same_records_and_top10(tmp_path):
    result = run_invariance(DEFAULT_DATA, tmp_path, conversations=1, sessions=2, batches=3, seed=42,
                            answerable_only=True, log=lambda _: None)
    assert result["batches_b"] == 3 and all(s["created"] > 0 for s in result["syncs"]["B"])
    assert result["record_ids_identical"], result["record_id_differences"]
    assert result["contents_identical"]
    assert result["transient_ids_b"] == 0  # no record was ever computed from an arrival-order input
    assert result["questions"] >= 5
    # The recipe runs with its features: turns paired with their predecessor, sessions and speakers known.
    inputs = result["recipe_inputs"]
    assert inputs["turns_paired_with_previous"] > 0 and inputs["leaves_with_session_for_adjacency"] > 0
    assert inputs["leaves_with_speaker_for_name_drop"] > 0
    differing = [(d["question_id"], d["a"], d["b"]) for d in result["differing_questions"]]
    assert differing == []
    assert result["set_identical"] == result["order_identical"] == result["questions"]


@needs_locomo
def test_a_stream_line_brings_the_chat_fields_the_conversational_recipe_reads(tmp_path):
    lines = stream_lines(DEFAULT_DATA, conversations=1, sessions=1)[:2]
    append_lines(tmp_path / "turns.jsonl", lines)
    item = StreamOrigin(tmp_path / "turns.jsonl").items()[1]
    chat = item.metadata.get("chat") or {}
    assert chat.get("previous") == lines[0]["text"]
    assert chat.get("conversation_id") and chat.get("session_id") and chat.get("author")
