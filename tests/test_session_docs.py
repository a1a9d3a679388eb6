"""LoCoMo session documents (`evals/session_docs.py`): a hand-made 3-session conversation, real BM25 and MiniLM."""

import json

import pytest
from conftest import write_json

from evals.benchmarks.locomo.data import load_locomo
from evals.session_docs import RANKERS, TEXTS, evaluate, main, question_scores, session_documents


def _turns(n, lines):
    return [{"speaker": s, "dia_id": f"D{n}:{i}", "text": t} for i, (s, t) in enumerate(lines, start=1)]


FIXTURE = [{
    "sample_id": "conv-s",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": _turns(1, [("Ann", "I cooked a big pot of pasta with tomato sauce tonight."),
                                ("Bob", "Yum, I love Italian food and fresh basil.")]),
        "session_2_date_time": "10:04 am on 12 June, 2023",
        "session_2": _turns(2, [("Ann", "I adopted a puppy from the shelter! I named him Rex."),
                                ("Bob", "A dog! Lovely, tell me more."),
                                ("Ann", "A beagle puppy, very playful.")]),
        "session_3_date_time": "9:00 am on 1 July, 2023",
        "session_3": _turns(3, [("Ann", "I am training for a marathon, running every morning."),
                                ("Bob", "Good luck with the race in the autumn!")]),
    },
    "qa": [
        {"question": "What name did Ann give the puppy she adopted?", "answer": "Rex", "evidence": ["D2:1"],
         "category": 4},
        {"question": "Which pasta sauce did Ann cook, and which marathon race is Ann training for?",
         "answer": "tomato; a marathon",
         "evidence": ["D1:1", "D3:1"], "category": 1},
        {"question": "No gold here", "answer": "x", "evidence": [], "category": 5},
    ],
}]


@pytest.fixture
def locomo_file(tmp_path):
    return write_json(tmp_path / "locomo10.json", FIXTURE)


class FakeEmbedder:
    """Bag of words hashed into 64 dimensions: for the command's plumbing only (no model load)."""

    name, dim = "fake-bow", 64

    def embed(self, texts):
        import numpy as np

        from synthex_resources.search.tokenize import tokenize

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in tokenize(text):
                out[row, sum(map(ord, word)) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def test_session_documents_render_date_speakers_and_peer_text(locomo_file):
    [conv] = load_locomo(locomo_file)
    docs = session_documents(conv, "project")
    assert [d.session_id for d in docs] == ["S1", "S2", "S3"]
    assert docs[1].text.splitlines()[0] == "[10:04 am on 12 June, 2023]"
    assert docs[1].turns[0] == "Ann: I adopted a puppy from the shelter! I named him Rex."
    peer = session_documents(conv, "mempalace")[1]
    assert peer.text.splitlines()[0] == 'Ann said, "I adopted a puppy from the shelter! I named him Rex."'
    assert "June" not in peer.text


def test_the_evidence_session_ranks_first(locomo_file):
    """Every ranker (BM25, MiniLM on the truncated text and on the turns' mean, both RRF hybrids), both texts."""
    from synthex_resources.embedder import EmbedderConfig

    [conv] = load_locomo(locomo_file)
    out = evaluate([conv], EmbedderConfig().create(), log=lambda _m: None)
    assert len(out["results"]) == len(TEXTS) * len(RANKERS) + 1 and len(out["questions"]) == 2  # no-gold item skipped
    puppy = out["questions"][0]
    for key, top in puppy["top10"].items():
        assert top[0] == "S2", (key, top)  # the gold session is the middle one: session order would fail
        assert sorted(top) == ["S1", "S2", "S3"]
    both = out["questions"][1]  # gold S1 and S3: a two-session question
    for key, top in both["top10"].items():
        assert set(top[:2]) == {"S1", "S3"}, (key, top)
    [rand] = [r for r in out["results"] if r["ranker"] == "chance"]  # 3 sessions, gold of 1 and of 2 sessions
    assert rand["metrics"] == {**rand["metrics"], "recall@1": 0.3333, "recall_any@1": 0.5, "recall_all@1": 0.1667,
                               "recall_all@5": 1.0}
    for r in (r for r in out["results"] if r is not rand):
        m = r["metrics"]
        assert r["n_questions"] == 2
        assert m["recall_any@1"] == 1.0 and m["recall@1"] == 0.75 and m["recall_all@1"] == 0.5, r
        assert m["recall_all@5"] == 1.0 and m["mrr"] == 1.0
        assert r["by_category"]["multi-hop"]["recall@1"] == 0.5


def test_question_scores_recall_is_the_share_of_gold_in_top_k():
    s = question_scores(["S4", "S1", "S2", "S3"], {"S1", "S3"})
    assert s["recall@1"] == 0.0 and s["recall@3"] == 0.5 and s["recall@5"] == 1.0
    assert s["recall_any@3"] == 1.0 and s["recall_all@3"] == 0.0 and s["mrr"] == 0.5


def test_command_prints_the_table_and_writes_the_json(locomo_file, tmp_path, capsys, monkeypatch):
    import evals.session_docs as sd

    monkeypatch.setattr("synthex_resources.embedder.EmbedderConfig.create", lambda self: FakeEmbedder())
    main(["--data", str(locomo_file), "--eval-dir", str(tmp_path / "evals"), "--text", "project"])
    printed = capsys.readouterr().out
    assert f"`python -m evals.session_docs --data {locomo_file} --eval-dir" in printed
    assert "| project | hybrid | 2 | " in printed and "| project | dense-mean | 2 | " in printed
    assert "By category: recall@10 / recall_any@10 / recall_all@10" in printed
    [saved] = (tmp_path / "evals" / "session_docs").glob("*-locomo.json")
    report = json.loads(saved.read_text())
    assert report["protocol"] == "session-documents" and report["headline"] == sd.HEADLINE
    assert {r["ranker"] for r in report["results"]} == {*RANKERS, "chance"}
    assert not list((tmp_path / "evals").glob("*.json"))  # `synthex eval report` reads those as architectures
