"""LoCoMo loader quirks and the retrieval metrics, on a small fixture in the official format."""


import pytest
from conftest import write_json

from evals.benchmarks.locomo.data import (
    load_locomo,
    normalize_evidence,
    parse_session_date,
    parse_turns,
    with_previous_turn,
)
from evals.metrics import ndcg, recall_all, recall_any, score
from synthex.core.record import Record

FIXTURE = [{
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex!"},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Congrats!", "img_url": ["x"], "blip_caption": "a small dog"},
        ],
        "session_2_date_time": "10:04 am on 12 June, 2023",
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How is Rex doing?"}],
        "session_3_date_time": "9:00 am on 1 July, 2023",  # a date with no session: ignored
    },
    "qa": [
        {"question": "What is the puppy's name?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
        {"question": "How many dogs?", "answer": 1, "evidence": ["D1:1; D2:1"], "category": 1},
        {"question": "What did Ann buy?", "adversarial_answer": "a cat", "evidence": [], "category": 5},
        {"question": "Odd evidence", "answer": "x", "evidence": ["D", "D:11:26", "D1:2 D2:1"], "category": 2},
    ],
}]


@pytest.fixture
def locomo_file(tmp_path):
    return write_json(tmp_path / "locomo10.json", FIXTURE)


def test_loader_handles_the_official_quirks(locomo_file):
    [conv] = load_locomo(locomo_file)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.session_dates == {1: "2023-05-08T13:56:00Z", 2: "2023-06-12T10:04:00Z"}
    q = conv.questions
    assert q[1].answer == "1" and q[1].evidence == ["D1:1", "D2:1"] and q[1].evidence_sessions == ["S1", "S2"]
    assert q[2].adversarial and q[2].answer == "a cat" and q[2].evidence == []
    assert q[3].evidence == ["D1:2", "D2:1"]
    assert normalize_evidence(["D8:6; D9:17", "D", "D:11:26"]) == ["D8:6", "D9:17"]
    assert parse_session_date("10:04 am on 12 June, 2023").isoformat() == "2023-06-12T10:04:00+00:00"


def test_turn_source_items_and_context(locomo_file):
    items = parse_turns(locomo_file)
    assert [i.key for i in items] == ["conv-x/D1:1", "conv-x/D1:2", "conv-x/D2:1"]
    assert items[1].content == "Bob: Congrats! [shared an image: a small dog]"
    assert items[1].metadata["chat"]["previous"] == "Ann: I adopted a puppy named Rex!"
    assert items[2].metadata["chat"]["previous"] == ""  # no context across sessions
    rec = Record(id="r", content=items[1].content, step="turns", metadata=items[1].metadata)
    assert with_previous_turn(rec) == "Ann: I adopted a puppy named Rex!\nBob: Congrats! [shared an image: a small dog]"


def test_metrics():
    ranked = ["a", "b", "c", "d"]
    assert recall_any(ranked, {"c", "z"}, 3) == 1.0 and recall_any(ranked, {"d"}, 3) == 0.0
    assert recall_all(ranked, {"a", "c"}, 3) == 1.0 and recall_all(ranked, {"a", "d"}, 3) == 0.0
    assert ndcg(["a", "x"], {"a"}, 10) == 1.0
    assert ndcg(["x", "a"], {"a"}, 10) == pytest.approx(1 / 1.5849625, rel=1e-6)
    assert score(ranked, {"b"})["mrr"] == 0.5
