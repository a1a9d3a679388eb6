"""LongMemEval loader and both retrieval protocols, on fixtures in the official schema."""

import json
import subprocess
import sys

import pytest
from conftest import write_json

from evals.benchmarks.longmemeval.data import documents, load_longmemeval, parse_lme_date, questions_for
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
    assert [x.question_id for x in questions_for("any", [q1, q2])] == ["q1"]  # peers leave out _abs too
    docs, gold = documents(q2, "session", "any")
    assert gold == {"answer_abs_1"}


def test_loader_errors_name_the_question(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "x1", "question": "?"}]))
    with pytest.raises(SourceError, match=r"bad.json: question #0 \(x1\): question_type: missing"):
        load_longmemeval(bad)  # no question parses: the file is refused, naming the first
    assert parse_lme_date("2023/05/20 (Sat) 02:21") == "2023-05-20T02:21:00Z"


def test_shared_sample_loads():
    from evals.shared_data import LONGMEMEVAL_ORACLE_SAMPLE, shared_data_file

    sample = shared_data_file(LONGMEMEVAL_ORACLE_SAMPLE)
    if not sample.exists():
        pytest.skip(f"shared data not found at {sample} (set SYNTHEX_SHARED_DATA)")
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


# -- the real files' shapes and the paper's protocol (xiaowu0162/LongMemEval src/retrieval/) -------------

def turn(role, content, has_answer=None):
    out = {"role": role, "content": content}
    if has_answer is not None:
        out["has_answer"] = has_answer
    return out


# Each rule of the official protocol changes what is scored here:
# - "rel": answer_b is an evidence session whose only has_answer turn is the assistant's: relabelled
#   non-evidence; other_c is repeated (same id and turns, two positions, as in 13 of 498 real S haystacks).
# - "asst": its only has_answer turn is an assistant turn: no target on the user side (left out).
# - "gone_abs": abstention (left out by both protocols).
PROTOCOL_FIXTURE = [
    q("rel", [[turn("user", "I adopted a cat named Miso.", True), turn("assistant", "Congrats!", False)],
              [turn("user", "Any tips for a pet?", False), turn("assistant", "Your cat Miso needs water.", True)],
              [turn("user", "Recommend a movie."), turn("assistant", "Try Alien.")],
              [turn("user", "Recommend a movie."), turn("assistant", "Try Alien.")]],
      ["answer_a", "answer_b"], ["answer_a", "answer_b", "other_c", "other_c"]),
    q("asst", [[turn("user", "Name a dessert.", False), turn("assistant", "Tiramisu.", True)]],
      ["answer_d"], ["answer_d"]),
    q("gone_abs", [[turn("user", "I adopted a dog.", False)]], ["answer_e"], ["answer_e"]),
]
PROTOCOL_FIXTURE[0]["question"] = "What is the name of my cat?"
PROTOCOL_FIXTURE[1]["question_type"] = "single-session-assistant"


def test_repeated_session_is_one_document(tmp_path):
    rel, _, _ = load_longmemeval(write_json(tmp_path / "lme.json", PROTOCOL_FIXTURE))
    docs, gold = documents(rel, "turn", "official")
    assert [d.doc_id for d in docs] == ["answer_a_1", "answer_b_1", "other_c_1"]  # other_c once
    assert gold == {"answer_a_1"}
    assert documents(rel, "session", "official")[1] == {"answer_a"}  # answer_b relabelled
    assert documents(rel, "session", "any")[1] == {"answer_a", "answer_b"}


def test_gzip_file_loads_and_a_malformed_question_is_one_line(tmp_path):
    import gzip

    data = [*PROTOCOL_FIXTURE, {**PROTOCOL_FIXTURE[0], "question_id": "broken", "haystack_dates": ["soon"] * 4},
            {**PROTOCOL_FIXTURE[0], "question_id": "clash",
             "haystack_sessions": [*PROTOCOL_FIXTURE[0]["haystack_sessions"][:3], [turn("user", "other text")]]}]
    path = tmp_path / "longmemeval_s.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    warned = []
    questions = load_longmemeval(path, warn=warned.append)
    assert [x.question_id for x in questions] == ["rel", "asst", "gone_abs"]
    assert warned == [f"{path}: question #3 (broken): haystack_dates[0]: not a date like '2023/05/20 (Sat) 02:21': 'soon'",
                      f"{path}: question #4 (clash): haystack_sessions[3]: session 'other_c' repeats an earlier "
                      "session's id with other turns"]


def test_official_protocol_leaves_out_no_target_and_abstention(tmp_path):
    questions = load_longmemeval(write_json(tmp_path / "lme.json", PROTOCOL_FIXTURE))
    assert [x.question_id for x in questions_for("official", questions)] == ["rel"]
    assert [x.question_id for x in questions_for("any", questions)] == ["rel", "asst"]


def test_paper_metrics():
    from evals.benchmarks.longmemeval.data import paper_ndcg, paper_session_metrics, paper_turn_metrics

    # The paper's DCG counts the first two positions fully: a lone relevant item second is nDCG 1.
    assert paper_ndcg([False, True], 1, 2) == 1.0
    assert paper_ndcg([False, False, True], 1, 3) == pytest.approx(1 / 1.584962500721156)
    gold = {"answer_a_1", "answer_f_3"}
    ranked = ["answer_a_3", "x_1", "answer_a_1", "y_1", "answer_f_3"]
    turn_scores = paper_turn_metrics(ranked, gold, ks=(1, 3, 5))
    assert (turn_scores["recall_any@1"], turn_scores["recall_any@3"], turn_scores["recall_all@3"],
            turn_scores["recall_all@5"]) == (0.0, 1.0, 0.0, 1.0)
    sessions = paper_session_metrics(ranked, gold, lambda t: t.rsplit("_", 1)[0], ks=(1, 2, 3))
    # answer_a_3 is a non-evidence turn of an evidence session: it stands for "noans_a", not answer_a.
    assert sessions["recall_any@1"] == 0.0
    # k=2: {noans_a, x}; k=3 grows to 3 turns: {noans_a, x, answer_a}.
    assert (sessions["recall_any@2"], sessions["recall_any@3"], sessions["recall_all@3"]) == (0.0, 1.0, 0.0)
    assert sessions["ndcg_any@3"] == pytest.approx(paper_ndcg([False, False, True], 2, 3))
    assert paper_turn_metrics(["x_1"], set(), ks=(1,)) == {"recall_any@1": 0.0, "recall_all@1": 1.0,
                                                         "ndcg_any@1": 0.0}


def test_eval_longmemeval_official_counts_what_it_scored(tmp_path):
    from conftest import cli

    data = write_json(tmp_path / "lme.json", PROTOCOL_FIXTURE)
    proc = cli("eval", "longmemeval", "--data", data, "--compare", "raw-bm25", "--json", "--project", tmp_path)
    out = json.loads(proc.stdout)
    assert out["n_questions"] == 1
    assert out["selection"] == {"in_file": 3, "malformed": 0, "scored": 1, "excluded_abstention": 1,
                                "excluded_no_target": 1}
    assert "3 questions, 1 scored; left out: 1 abstention (_abs), 1 with no target turn" in proc.stderr
    assert out["metrics"]["turn"]["recall_any@1"] == 1.0  # answer_a_1 first
    assert out["metrics"]["session"]["recall_all@1"] == 1.0  # gold answer_a only: answer_b was relabelled


class CountingEmbedder:
    """A deterministic stand-in model that counts what it embedded (the model is not what is tested)."""

    name, dim = "counting", 4

    def __init__(self):
        self.seen = []

    def embed(self, texts):
        import numpy as np

        self.seen += texts
        return np.array([[len(t), t.count("a"), 1.0, 0.0] for t in texts], dtype=np.float32)


def test_texts_embedded_ahead_are_not_embedded_again(tmp_path):
    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.shared_embedder import EmbedAheadOfWorkspaces, MemoEmbedder

    benchmark = LongMemEval()
    questions = benchmark.load(write_json(tmp_path / "lme.json", PROTOCOL_FIXTURE))
    texts = benchmark.texts(questions[0])
    assert texts == ["I adopted a cat named Miso.", "Any tips for a pet?", "Recommend a movie.",
                     "What is the name of my cat?"]  # user turns, a repeated session once, the question
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner)
    ahead = EmbedAheadOfWorkspaces(memo, [texts, texts[:1]], ahead=0, chunk=2)
    ahead.drain()
    assert sorted(inner.seen) == sorted(texts) and memo.computed == 4
    memo.embed(texts)  # what the workspace's store asks for later: all from the memo
    assert memo.computed == 4 and len(inner.seen) == 4
    ahead.close()


class WordEmbedder:
    """A deterministic stand-in model: travel words, cooking words, and a constant (the model is not tested)."""

    name, dim = "words", 3

    def embed(self, texts):
        import numpy as np

        return np.array([[float(any(w in t.lower() for w in ("lisbon", "flew", "where"))), float("cook" in t.lower()),
                          0.1] for t in texts], dtype=np.float32)


def test_mem0_peer_is_scored_on_the_same_questions_and_turns(lme_file, tmp_path, monkeypatch):
    """``--compare mem0`` on LongMemEval (issue 34 item 3): Mem0 holds the protocol's turns (official: user turns),
    searched by vector through the eval's embedder, scored by the benchmark as Synthex's rankings are."""
    import sys

    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.peers import mem0_peer

    # Not pytest.importorskip("mem0"): that import, the process's first of Mem0, would turn its telemetry on.
    if not mem0_peer.mem0_available():
        pytest.skip("mem0ai is not installed")

    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0home"))  # keep Mem0's state out of ~
    for module in ("mem0.memory.setup", "mem0.memory.main"):
        if module in sys.modules:
            monkeypatch.setattr(sys.modules[module], "mem0_dir", str(tmp_path / "mem0home"))
    embedder = WordEmbedder()
    result = mem0_peer.evaluate_mem0_longmemeval(LongMemEval(), lme_file, tmp_path / "work", log=lambda _l: None,
                                                 embedder=embedder)
    assert (result["architecture"], result["benchmark"], result["n_questions"]) == ("mem0", "longmemeval-official", 1)
    [row] = result["questions"]
    assert row["question_id"] == "q1" and row["gold_turns"] == ["answer_1_1"]
    # Only user turns were added (no assistant "Lisbon is lovely."), and the Lisbon turn ranks first.
    assert row["hits"][0] == "answer_1_1" and set(row["hits"]) == {"answer_1_1", "answer_2_1", "other_3_1"}
    assert result["metrics"]["session"]["recall_all@1"] == 1.0
    assert sys.modules["mem0.memory.telemetry"].MEM0_TELEMETRY is False  # no upload attempted from the tests



def test_mempalace_peer_is_scored_on_the_same_questions_and_turns(lme_file, tmp_path, monkeypatch):
    """``--compare mempalace`` (issue 34 item 3): a palace per haystack holding the protocol's turns as drawers,
    embedded through the eval's embedder (the loopback endpoint), searched by MemPalace's own search_memories,
    scored by the benchmark; its configuration folder is the eval's and the environment is restored after."""
    from test_longmemeval_peers import needs_mempalace

    needs_mempalace()
    import os

    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.peers import mempalace_peer

    monkeypatch.delenv("MEMPALACE_CONFIG_DIR", raising=False)

    class CountedWords(WordEmbedder):
        embedded = 0

        def embed(self, texts):
            self.embedded += len(texts)
            return super().embed(texts)

    embedder = CountedWords()
    result = mempalace_peer.evaluate_mempalace_longmemeval(LongMemEval(), lme_file, tmp_path / "work",
                                                           log=lambda _l: None, embedder=embedder)
    assert (result["architecture"], result["benchmark"], result["n_questions"]) == ("mempalace", "longmemeval-official", 1)
    [row] = result["questions"]
    assert row["hits"][0] == "answer_1_1" and set(row["hits"]) == {"answer_1_1", "answer_2_1", "other_3_1"}
    assert embedder.embedded  # MemPalace embedded through Synthex's embedder, not a downloaded model
    assert "MEMPALACE_CONFIG_DIR" not in os.environ


def test_texts_embedded_ahead_go_in_chunks_of_one_length():
    """The model pads a batch to its longest text: a chunk the background thread sends holds texts of about one
    length (shortest first), not the haystack's mix (issue 34 item 4: a haystack embedded in chunks of 64 in
    its own order cost twice the CPU of its texts sorted)."""
    from evals.shared_embedder import EmbedAheadOfWorkspaces, MemoEmbedder

    class BatchRecorder(CountingEmbedder):
        def __init__(self):
            super().__init__()
            self.calls = []

        def embed(self, texts):
            self.calls.append(list(texts))
            return super().embed(texts)

    texts = ["a" * 90, "b", "c" * 91, "d" * 2, "e" * 92, "f" * 3]
    inner = BatchRecorder()
    ahead = EmbedAheadOfWorkspaces(MemoEmbedder(inner), [texts], ahead=0, chunk=3)
    ahead.drain()
    assert inner.calls == [["b", "d" * 2, "f" * 3], ["a" * 90, "c" * 91, "e" * 92]]
    ahead.close()


def test_the_eval_waits_for_a_conversations_texts_before_ingesting_it():
    """``wait_embedded(i)`` returns once conversation i's texts are all in the memo (its workspace then embeds
    none itself), with the thread free to go on with the next ones; and returns at once after ``close``."""
    from evals.shared_embedder import EmbedAheadOfWorkspaces, MemoEmbedder

    inner = CountingEmbedder()
    memo = MemoEmbedder(inner)
    first, second = ["one turn", "another turn", "a question"], ["later turn"]
    ahead = EmbedAheadOfWorkspaces(memo, [first, second], ahead=1, chunk=1)
    ahead.wait_embedded(0)
    assert set(first) <= set(inner.seen)
    memo.embed(first)
    assert memo.computed == len(set(inner.seen)) and inner.seen.count("one turn") == 1  # none embedded twice
    ahead.close()
    ahead.wait_embedded(1)  # the thread ended: nothing to wait for


def test_prepare_runs_on_the_thread_after_a_conversations_texts_and_wait_embedded_waits_for_it():
    """``prepare(i)`` (the eval ingesting workspace i ahead) runs from ``prepare_from`` on, after i's texts are in
    the memo, and ``wait_embedded(i)`` returns only once it has; one that raises is dropped."""
    import threading

    from evals.shared_embedder import EmbedAheadOfWorkspaces, MemoEmbedder

    memo = MemoEmbedder(CountingEmbedder())
    prepared = []

    def prepare(index):
        assert memo.computed >= index + 1  # its texts are embedded first
        prepared.append((index, threading.current_thread().name))
        if index == 2:
            raise OSError("disk full")

    ahead = EmbedAheadOfWorkspaces(memo, [["a"], ["b"], ["c"]], ahead=2, chunk=1, prepare=prepare, prepare_from=1)
    ahead.wait_embedded(1)
    assert prepared[0] == (1, "synthex-eval-embed-ahead")
    ahead.drain()
    assert [i for i, _ in prepared] == [1, 2]
    ahead.close()


def test_workspaces_ingested_ahead_give_the_same_rows(tmp_path):
    """``evaluate``'s embedding thread ingests the next workspaces (``prepare``): every workspace after the first
    is built there, and the per-question rows are those of an eval that embeds and ingests nothing ahead."""
    import threading

    from evals.architectures import Architecture, _raw
    from evals.benchmarks import evaluate
    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.shared_embedder import MemoEmbedder

    second = json.loads(json.dumps(PROTOCOL_FIXTURE[0]))
    second["question_id"] = "rel2"
    second["question"] = "Which movie did I ask about?"
    data = write_json(tmp_path / "lme.json", [PROTOCOL_FIXTURE[0], second, {**second, "question_id": "rel3"}])
    built_on = []

    def build(*args):
        built_on.append(threading.current_thread().name)
        return _raw(*args)

    rows = {}
    for ahead in (0, 2):
        arch = Architecture("raw-bm25", build, mode="bm25", workspace="raw")
        built_on.clear()
        [result] = evaluate(LongMemEval(), data, [arch], tmp_path / f"work{ahead}", embed_ahead=ahead,
                            embedder=MemoEmbedder(CountingEmbedder()), log=lambda _l: None)
        rows[ahead] = [(q["question_id"], q["hits"]) for q in result["questions"]]
        if ahead:  # the 2nd and 3rd built on the thread, then opened again (nothing to run) by the loop
            assert built_on.count("synthex-eval-embed-ahead") == 2 and built_on.count("MainThread") == 3
    assert rows[0] == rows[2] and len(rows[0]) == 3


def test_split_check_reads_the_runs_rows_back_by_position(tmp_path):
    """``evals.benchmarks.longmemeval.split_check``: the run's per-question rows split at the N-th scored question of the file; the
    "all" part equals the run's own means, fresh@5 included (recomputed from the hits)."""
    from conftest import cli

    from evals.benchmarks.longmemeval.split_check import split_figures

    update = json.loads(json.dumps(PROTOCOL_FIXTURE[0]))
    update |= {"question_id": "upd", "question_type": "knowledge-update", "question": "Which movie did I ask about?"}
    data = write_json(tmp_path / "lme.json", [PROTOCOL_FIXTURE[0], PROTOCOL_FIXTURE[2], update])
    out = json.loads(cli("eval", "longmemeval", "--data", data, "--compare", "raw-bm25", "--json", "--run-id", "r1",
                         "--project", tmp_path).stdout)
    figures = split_figures(tmp_path, data, "r1", first=1)["raw-bm25"]
    assert (figures["first 1"]["n"], figures["rest"]["n"], figures["all"]["n"]) == (1, 1, 2)
    assert figures["all"]["session all@5"] == out["metrics"]["session"]["recall_all@5"]
    assert figures["all"]["turn any@10"] == out["metrics"]["turn"]["recall_any@10"]
    assert figures["first 1"]["fresh n"] == 0 and figures["rest"]["fresh n"] == 1
    assert figures["rest"]["fresh@5"] == out["freshness"]["fresh@5"]
    by_type = split_figures(tmp_path, data, "r1", first=1, by_type=True)["raw-bm25"]
    types = {q["question_type"] for q in (PROTOCOL_FIXTURE[0], PROTOCOL_FIXTURE[2])} - {"knowledge-update"}
    assert set(by_type) == {f"{part} / {t}" for part in ("first 1", "all") for t in types} | {
        "rest / knowledge-update", "all / knowledge-update"}
    assert by_type["all / knowledge-update"]["fresh n"] == 1 and by_type["all / knowledge-update"]["n"] == 1
    assert by_type["all / knowledge-update"]["turn nDCG@10"] == figures["rest"]["turn nDCG@10"]


def test_miss_check_keys_are_the_official_protocols_sessions():
    """``miss_check.session_keys``: a non-evidence turn of an evidence session is a key of its own (the relabelled
    "noans" twin), so it takes a place in the top k; a second gold turn of a session takes none."""
    from evals.benchmarks.longmemeval.miss_check import session_keys

    hits = ["answer_a_3", "answer_a_1", "b_1", "answer_a_5", "answer_c_1", "b_3"]
    assert session_keys(hits, {"answer_a_1", "answer_a_5", "answer_c_1"}) == [
        ("answer_a", False), ("answer_a", True), ("b", False), ("answer_c", True)]


def test_miss_check_counts_a_runs_misses(tmp_path):
    """``miss_check.misses`` on a real run's rows: a question with two gold sessions misses session recall_all@1 by
    construction; its one top key is counted, its left-out gold session's gold turn is placed in a rank bucket."""
    from conftest import cli

    from evals.benchmarks.longmemeval.miss_check import RANK_BUCKETS, misses

    bikes = q("bikes", [[turn("user", "I bought a red bike.", True), turn("assistant", "Nice.")],
                        [turn("user", "I bought a blue bike.", True), turn("assistant", "Cool.")],
                        [turn("user", "Recommend a movie."), turn("assistant", "Try Alien.")]],
              ["answer_f", "answer_g"], ["answer_f", "answer_g", "other_h"])
    bikes |= {"question": "How many bikes did I buy?", "question_type": "multi-session"}
    data = write_json(tmp_path / "lme.json", [PROTOCOL_FIXTURE[0], bikes])
    cli("eval", "longmemeval", "--data", data, "--compare", "raw-bm25", "--json", "--run-id", "r1", "--project", tmp_path)
    by_type = misses(tmp_path, data, "r1", "raw-bm25", first=1, k=1)
    assert set(by_type) == {"multi-session"}
    figures = by_type["multi-session"]
    assert (figures["misses"], figures["in first 1"], figures["gold sessions"], figures["left out"]) == (1, 0, {2: 1}, 1)
    assert figures["gold keys"] + figures["twins"] + figures["others"] == 1
    assert sum(figures[f"rank {lo}-{hi}"] for lo, hi in RANK_BUCKETS) + figures["not ranked"] == 1

    other = write_json(tmp_path / "other.json", [PROTOCOL_FIXTURE[0]])  # not the file run r1 scored
    result = subprocess.run([sys.executable, "-m", "evals.benchmarks.longmemeval.miss_check", str(tmp_path), str(other),
                             "r1", "raw-bm25", "1"], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"miss_check: {other}: question 'bikes' of eval run 'r1' is not among its scored "
                                     f"questions: pass the data file the run scored")
