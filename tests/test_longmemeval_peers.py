"""LongMemEval's third protocol, MemPalace's own benchmark (``--protocol mempalace``), and the peers' one registry
(``evals.peers.PEERS``), on hand-made files in the official schema where each rule changes the figure."""

import json
import math
import sys

import pytest
from conftest import cli, write_json
from test_longmemeval import FIXTURE, PROTOCOL_FIXTURE, WordEmbedder, q, turn

from evals.benchmarks.longmemeval.data import (
    documents,
    load_longmemeval,
    mempalace_metrics,
    mempalace_ndcg,
    questions_for,
)

# "bare": a haystack whose only session has no user turn: MemPalace's script skips such a corpus.
BARE = q("bare", [[turn("assistant", "Hello, how can I help?", False)]], ["answer_z"], ["answer_z"])
# "mixed": its gold answer_y has no user turn (no document in MemPalace's corpus), answer_x has one.
MIXED = q("mixed", [[turn("user", "I adopted a cat named Miso.", True)], [turn("assistant", "Miso!", True)]],
          ["answer_x", "answer_y"], ["answer_x", "answer_y"])


def test_mempalace_protocol_scores_every_question_against_the_answer_sessions(tmp_path):
    """Every question of the file (abstention and no-target ones too), gold = answer_session_ids as given (answer_b
    is not relabelled), every user turn of a gold session a gold turn; only a haystack without a user turn is out."""
    questions = load_longmemeval(write_json(tmp_path / "lme.json", [*PROTOCOL_FIXTURE, BARE, MIXED]))
    assert [x.question_id for x in questions_for("mempalace", questions)] == ["rel", "asst", "gone_abs", "mixed"]
    assert [x.question_id for x in questions_for("official", questions)] == ["rel", "mixed"]
    rel, _, _, _, mixed = questions
    docs, gold = documents(rel, "session", "mempalace")
    assert [d.doc_id for d in docs] == ["answer_a", "answer_b", "other_c"]  # other_c once
    assert docs[0].text == "I adopted a cat named Miso."  # user turns only, as its corpus
    assert gold == {"answer_a", "answer_b"}  # the official protocol relabels answer_b: {"answer_a"}
    turns, gold_turns = documents(rel, "turn", "mempalace")
    assert [d.doc_id for d in turns] == [d.doc_id for d in documents(rel, "turn", "official")[0]]  # same records
    assert gold_turns == {"answer_a_1", "answer_b_1"}  # answer_b_1 has no has_answer: gold all the same
    docs, gold = documents(mixed, "session", "mempalace")
    assert [d.doc_id for d in docs] == ["answer_x"] and gold == {"answer_x", "answer_y"}  # answer_y: no document


def test_mempalace_metrics_are_its_scripts():
    # Its nDCG's ideal is the top k's own relevances sorted: a lone hit second is 1/log2(3) whatever the gold.
    assert mempalace_ndcg(["x", "a"], {"a", "b"}, 2) == pytest.approx(1 / math.log2(3))
    assert mempalace_ndcg(["a", "x", "b"], {"a", "b"}, 3) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert mempalace_ndcg(["x", "y"], {"a"}, 2) == 0.0
    scores = mempalace_metrics(["x", "a", "b"], {"a", "b"}, ks=(1, 2, 3))
    assert (scores["recall_any@1"], scores["recall_any@2"], scores["recall_all@2"], scores["recall_all@3"]) == (
        0.0, 1.0, 0.0, 1.0)
    assert mempalace_metrics(["x"], set(), ks=(1,)) == {"recall_any@1": 0.0, "recall_all@1": 1.0, "ndcg_any@1": 0.0}


def test_eval_longmemeval_mempalace_protocol_shares_the_official_workspaces(tmp_path):
    """``--protocol mempalace`` scores all three questions with its metrics and says so (headline line, the
    count), ingesting the official protocol's turn records into the same workspaces."""
    data = write_json(tmp_path / "lme.json", [*PROTOCOL_FIXTURE, BARE])
    official = json.loads(cli("eval", "longmemeval", "--data", data, "--compare", "raw-bm25", "--json",
                              "--run-id", "official", "--project", tmp_path).stdout)
    proc = cli("eval", "longmemeval", "--data", data, "--protocol", "mempalace", "--compare", "raw-bm25", "--json",
               "--run-id", "mempalace", "--project", tmp_path)
    out = json.loads(proc.stdout)
    assert (out["benchmark"], out["n_questions"], official["n_questions"]) == ("longmemeval-mempalace", 3, 1)
    assert out["selection"] == {"in_file": 4, "malformed": 0, "scored": 3, "excluded_abstention": 0,
                                "excluded_no_target": 0, "excluded_no_user_turn": 1}
    assert "4 questions, 3 scored; left out: 1 with no user turn" in proc.stderr
    assert out["headline"].startswith("session recall_any@5 (MemPalace's own benchmark protocol")
    from evals.report import connect_eval_results
    from synthex_resources.sql import eval_results_path

    con = connect_eval_results(eval_results_path(tmp_path / ".synthex"), read_only=True)
    rows = con.execute("select eval_run_id, gold_sessions, hits from eval_results where question_id = 'rel' "
                       "order by eval_run_id").fetchall()
    con.close()
    assert [(run, gold) for run, gold, _ in rows] == [("mempalace", ["answer_a", "answer_b"]), ("official", ["answer_a"])]
    assert rows[0][2] == rows[1][2]  # the same ranking, scored by each protocol
    work = tmp_path / ".synthex" / "evals" / "work" / "longmemeval"
    assert sorted(p.name for p in work.iterdir() if p.is_dir()) == ["official"]  # one set of workspaces
    text = cli("eval", "longmemeval", "--data", data, "--protocol", "mempalace", "--compare", "raw-bm25",
               "--project", tmp_path).stdout
    headline = next(line for line in text.splitlines() if line.startswith("longmemeval-mempalace: headline"))
    assert headline.endswith(f"; the protocol scores 3 questions of the file: raw-bm25 "
                             f"{out['metrics']['session']['recall_any@5']:.4f} (3 questions)")


def test_one_registry_names_the_peers():
    from evals.architectures import resolve
    from evals.benchmarks.locomo.benchmark import LoCoMo
    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.peers import PEER_NAMES, PEERS, peer_runner, peers_of

    assert PEER_NAMES == ("mem0", "mempalace") == tuple(PEERS)
    assert (LongMemEval.peers, LoCoMo.peers) == (peers_of("longmemeval"), peers_of("locomo")) == (
        ("mem0", "mempalace"), ("mem0",))
    assert [a.name for a in resolve(["raw-bm25", *PEER_NAMES], None)] == ["raw-bm25"]  # peers are not pipelines
    for name, peer in PEERS.items():  # every runner imports without the peer's optional package
        for benchmark in peer.runners:
            assert callable(peer_runner(name, benchmark))
    help_text = cli("eval", "longmemeval", "--help").stdout
    assert "a peer (mem0, mempalace)" in " ".join(help_text.split())


def test_a_peer_not_installed_is_one_line(tmp_path, monkeypatch):
    """``PeerUnavailable`` (a SynthexError: one line, exit 1), raised before any work; other errors are not
    turned into it."""
    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.peers import PeerUnavailable
    from synthex.core.errors import SynthexError

    monkeypatch.setitem(sys.modules, "mempalace", None)  # `import mempalace` raises ImportError
    monkeypatch.delenv("SYNTHEX_MEMPALACE_PYTHON", raising=False)  # the eval's own interpreter
    data = write_json(tmp_path / "lme.json", FIXTURE)
    with pytest.raises(PeerUnavailable, match=r"^the mempalace peer needs mempalace: pip install -e '\.\[mempalace\]'$"):
        LongMemEval().evaluate_peer("mempalace", data, tmp_path / "work", limit=None, k=10, log=lambda _l: None)
    assert issubclass(PeerUnavailable, SynthexError)
    proc = cli("eval", "longmemeval", "--data", data, "--compare", "mempalace", "--project", tmp_path, check=False)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == (
        "error: the mempalace peer needs mempalace: pip install -e '.[mempalace]'")


def test_a_mempalace_interpreter_without_it_is_one_line(tmp_path, monkeypatch):
    """``SYNTHEX_MEMPALACE_PYTHON`` naming no interpreter (or one without MemPalace): one line naming it, exit 1."""
    from evals.peers import mempalace_peer

    missing = tmp_path / "no-venv" / "bin" / "python"
    monkeypatch.setenv("SYNTHEX_MEMPALACE_PYTHON", str(missing))
    assert mempalace_peer.worker_python() == str(missing) and not mempalace_peer.mempalace_available()
    data = write_json(tmp_path / "lme.json", FIXTURE)
    proc = cli("eval", "longmemeval", "--data", data, "--compare", "mempalace", "--project", tmp_path, check=False)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == (
        f"error: the mempalace peer needs mempalace in SYNTHEX_MEMPALACE_PYTHON={missing}: "
        f"{missing} -m pip install mempalace==3.11.0")
    assert "Traceback" not in proc.stderr


def needs_mempalace() -> None:
    """Skip unless the worker's interpreter (``SYNTHEX_MEMPALACE_PYTHON``, else this one) has MemPalace."""
    from evals.peers.mempalace_peer import mempalace_available

    if not mempalace_available():
        pytest.skip("mempalace: not installed here, and SYNTHEX_MEMPALACE_PYTHON names no venv that has it")


def test_mempalace_peer_runs_in_the_interpreter_its_variable_names(tmp_path):
    """MemPalace in a venv of its own (``SYNTHEX_MEMPALACE_PYTHON``), absent from the eval's: the peer runs and
    ranks the haystack (the old peer, which imported it here, said it was not installed)."""
    import importlib.util
    import os
    import subprocess

    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.peers import mempalace_peer

    python = os.environ.get("SYNTHEX_MEMPALACE_PYTHON")
    if not python or importlib.util.find_spec("mempalace") is not None:
        pytest.skip("needs SYNTHEX_MEMPALACE_PYTHON set and MemPalace absent from this interpreter")
    if subprocess.run([python, "-c", "import mempalace"], capture_output=True, timeout=120).returncode:
        pytest.skip(f"{python} has no MemPalace")  # asked here, not of the peer: the test is of the peer
    data = write_json(tmp_path / "lme.json", FIXTURE)
    result = mempalace_peer.evaluate_mempalace_longmemeval(LongMemEval(), data, tmp_path / "work",
                                                           log=lambda _l: None, embedder=WordEmbedder())
    [row] = result["questions"]
    assert row["hits"][0] == "answer_1_1"


class EnvRecordingWords(WordEmbedder):
    """Records, at each embedding request MemPalace makes, whether the eval's own process has its variable."""

    def __init__(self):
        self.env_seen = []

    def embed(self, texts):
        import os

        self.env_seen.append(os.environ.get("MEMPALACE_CONFIG_DIR"))
        return super().embed(texts)


def test_mempalace_peer_keeps_its_configuration_in_its_own_process(tmp_path, monkeypatch):
    """MemPalace runs in a child process whose environment alone names its configuration folder: while it embeds
    through the eval's embedder, the eval's process has no ``MEMPALACE_CONFIG_DIR``."""
    needs_mempalace()
    import os

    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.peers import mempalace_peer

    monkeypatch.delenv("MEMPALACE_CONFIG_DIR", raising=False)
    embedder = EnvRecordingWords()
    data = write_json(tmp_path / "lme.json", FIXTURE)
    result = mempalace_peer.evaluate_mempalace_longmemeval(LongMemEval(), data, tmp_path / "work",
                                                           log=lambda _l: None, embedder=embedder)
    [row] = result["questions"]
    assert row["hits"][0] == "answer_1_1"
    assert embedder.env_seen and set(embedder.env_seen) == {None}
    assert "MEMPALACE_CONFIG_DIR" not in os.environ
    config = tmp_path / "work" / "official" / "mempalace-config"
    assert json.loads((config / "config.json").read_text())["embedding_model"] == "openai-compat"


def test_mempalace_peer_under_its_own_protocol_ranks_session_documents(tmp_path):
    """``--protocol mempalace``: a drawer per session (its user turns joined), its raw vector query, every question
    (the abstention one too) scored by its metrics; the hits are session ids."""
    needs_mempalace()
    from evals.benchmarks.longmemeval.benchmark import LongMemEval
    from evals.peers import mempalace_peer

    data = write_json(tmp_path / "lme.json", FIXTURE)
    result = mempalace_peer.evaluate_mempalace_longmemeval(LongMemEval("mempalace"), data, tmp_path / "work",
                                                           log=lambda _l: None, embedder=WordEmbedder())
    assert (result["benchmark"], result["n_questions"]) == ("longmemeval-mempalace", 2)
    rows = {r["question_id"]: r for r in result["questions"]}
    assert rows["q1"]["hits"][0] == "answer_1" and set(rows["q1"]["hits"]) == {"answer_1", "answer_2", "other_3"}
    assert rows["q1"]["gold_sessions"] == ["answer_1", "answer_2"] and rows["q1"]["turn"] is None
    assert rows["q1"]["session"]["recall_any@1"] == 1.0
    assert rows["q2_abs"]["hits"] == ["answer_abs_1"] and rows["q2_abs"]["session"]["recall_all@1"] == 1.0
    assert result["pipeline"].startswith("mempalace (its LongMemEval benchmark's raw mode")


def test_a_result_without_turn_figures_is_a_row_of_dashes():
    """The text table of a peer ranking session documents (no turn ranking) shows dashes, not zeros that would
    read as misses, and does not take part in marking a column's best."""
    from evals.report import HEADLINE, table

    raw = {"architecture": "raw-bm25", "n_questions": 2, "metrics": {"turn": dict.fromkeys(HEADLINE, 0.5)}}
    other = {"architecture": "raw-dense", "n_questions": 2, "metrics": {"turn": dict.fromkeys(HEADLINE, 0.25)}}
    peer = {"architecture": "mempalace", "n_questions": 2, "metrics": {"turn": {}}}
    lines = table([raw, peer, other], "turn").splitlines()
    assert lines[2] == "| raw-bm25 | 2 | " + " | ".join(["**0.5000**"] * len(HEADLINE)) + " |"
    assert lines[3] == "| mempalace | 2 | " + " | ".join(["-"] * len(HEADLINE)) + " |"
    assert lines[4] == "| raw-dense | 2 | " + " | ".join(["0.2500"] * len(HEADLINE)) + " |"


def test_the_mem0_peer_turns_telemetry_off_without_changing_the_process_environment():
    # Mem0 reads MEM0_TELEMETRY once, at the import of mem0.memory.telemetry: the peer sets it for that
    # import only. A fresh interpreter, so no earlier import (or test helper) has set it.
    import importlib.util
    import os
    import subprocess

    if importlib.util.find_spec("mem0") is None:  # not importorskip: importing it here would turn telemetry on
        pytest.skip("mem0ai is not installed")

    code = ("import os\nfrom evals.peers import mem0_peer\nassert 'MEM0_TELEMETRY' not in os.environ\n"
            "assert mem0_peer.mem0_available()\nimport mem0.memory.telemetry as t\n"
            "assert t.MEM0_TELEMETRY is False, t.MEM0_TELEMETRY\nassert 'MEM0_TELEMETRY' not in os.environ\n")
    env = {k: v for k, v in os.environ.items() if k != "MEM0_TELEMETRY"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
