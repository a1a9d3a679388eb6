"""LongMemEval loader and both retrieval protocols, on fixtures in the official schema."""

import json

import pytest
from conftest import write_json

from evals.longmemeval import documents, load_longmemeval, parse_lme_date, questions_for
from synthex.core.errors import SourceError


def q(qid, sessions, answer_ids, sids):
    return {"question_id": qid, "question_type": "single-session-user", "question": "Where did I go?",
            "answer": "Lisbon", "question_date": "2023/06/01 (Thu) 00:58",
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * len(sessions), "haystack_session_ids": sids,
            "haystack_sessions": sessions, "answer_session_ids": answer_ids}


USER_HIT = {"role": "user", "content": "I flew to Lisbon last week.", "has_answer": True}
USER_MISS = {"role": "user", "content": "What should I cook?", "has_answer": False}
ASSISTANT = {"role": "assistant", "content": "Lisbon is lovely.", "has_answer": False}
FIXTURE = [
    q("q1", [[USER_HIT, ASSISTANT], [USER_MISS, ASSISTANT], [USER_MISS]],
      ["answer_1", "answer_2"], ["answer_1", "answer_2", "other_3"]),
    q("q2_abs", [[USER_MISS]], ["answer_abs_1"], ["answer_abs_1"]),
]


@pytest.fixture
def lme_file(tmp_path):
    return write_json(tmp_path / "longmemeval_s_cleaned.json", FIXTURE)


def test_official_protocol_relabels_noans_sessions_and_uses_user_turns(lme_file):
    q1, q2 = load_longmemeval(lme_file)
    docs, gold = documents(q1, "session", "official")
    assert [d.doc_id for d in docs] == ["answer_1", "answer_2", "other_3"]
    assert docs[0].text == "I flew to Lisbon last week."  # user turns only
    assert gold == {"answer_1"}  # answer_2 has no has_answer turn: relabelled non-evidence
    docs, gold = documents(q1, "turn", "official")
    assert [d.doc_id for d in docs] == ["answer_1_1", "answer_2_1", "other_3_1"]
    assert gold == {"answer_1_1"}
    assert docs[0].created_at == "2023-05-20T02:21:00Z"
    assert [x.question_id for x in questions_for("official", [q1, q2])] == ["q1"]  # abstention excluded


def test_any_protocol_keeps_everything(lme_file):
    q1, q2 = load_longmemeval(lme_file)
    docs, gold = documents(q1, "session", "any")
    assert gold == {"answer_1", "answer_2"}
    assert "Lisbon is lovely." in docs[0].text
    assert len(questions_for("any", [q1, q2])) == 2
    docs, gold = documents(q2, "session", "any")
    assert gold == {"answer_abs_1"}


def test_loader_errors_name_the_question(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "x1", "question": "?"}]))
    with pytest.raises(SourceError, match=r"question #0 \(x1\) lacks question_type"):
        load_longmemeval(bad)
    assert parse_lme_date("2023/05/20 (Sat) 02:21") == "2023-05-20T02:21:00Z"


def test_shared_sample_loads():
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval" / "longmemeval_oracle_sample_2q.json"
    if not sample.exists():
        pytest.skip("shared data not beside this checkout")
    questions = load_longmemeval(sample)
    assert {x.question_id for x in questions} == {"6a1eabeb", "gpt4_70e84552_abs"}
    docs, gold = documents(questions[0], "turn", "official")
    assert gold and gold <= {d.doc_id for d in docs}


def test_eval_longmemeval_cli_official_protocol(lme_file, tmp_path):
    from conftest import cli

    data = json.loads(lme_file.read_text())
    data[0]["question"] = "Where did I fly to last week?"
    lme_file.write_text(json.dumps(data))
    # What the command prints, in this process (`synthex eval` as a process: test_benchmark_plugin).
    proc = cli("eval", "longmemeval", "--data", lme_file, "--protocol", "official", "--compare", "raw-bm25", "--json",
               "--project", tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["benchmark"] == "longmemeval-official" and out["n_questions"] == 1  # _abs excluded
    assert out["metrics"]["session"]["recall_all@5"] == 1.0
    assert out["metrics"]["turn"]["recall_any@1"] == 1.0
    assert out["headline"] == "session recall_all@5"


def test_freshness_metric():
    from evals.metrics import freshness

    assert freshness(["new", "old", "x"], ["old", "new"], 5) == {"fresh@5": 1.0, "recency_precision@5": 0.3}
    assert freshness(["old", "new"], ["old", "new"], 5)["fresh@5"] == 0.0  # stale fact ranked first
    assert freshness(["x", "old"], ["old", "new"], 5) == {"fresh@5": 0.0, "recency_precision@5": 0.1}
