"""DAG-aware search over a pipeline built by the engine (real LanceDB, real embedder)."""

import json
import random

import pytest
from conftest import cli, load, write_project

from synthex_resources import open_store
from synthex_resources.search import BM25, HYBRID, SearchEngine
from synthex_resources.search.tokenize import tokenize


@pytest.fixture(scope="module")
def ran_copy(tmp_path_factory, ran_project):
    """The session's run project (PIPELINE_PY over the small export, run once), copied for this module."""
    return ran_project.copy(tmp_path_factory.mktemp("search") / "proj")


@pytest.fixture
def built(ran_copy):
    """The project after one run; the tests here only read it."""
    return load(ran_copy)


def test_tokenizer_is_regex_lowercase_no_stopwords_no_stemming():
    assert tokenize("What's MongoDB? The running-shoes, v2.0") == [
        "what", "s", "mongodb", "the", "running", "shoes", "v2", "0"]


def test_surface_search_defaults_to_search_output_steps_and_drills_down(built):
    target = built.records("summaries")[5]
    hits = built.search(target.meta("chat.title"), k=5, mode="hybrid")  # the altitudes' own records
    assert hits and {h.step for h in hits} <= {"summaries", "monthly"}
    assert target.id in [h.id for h in hits]
    top = next(h for h in hits if h.id == target.id)
    assert [s.step for s in top.sources()] == ["transcripts"]
    assert [leaf.step for leaf in top.leaves()] == ["chatgpt"]
    assert top.lineage()["id"] == top.id
    monthly = built.search("Rust", step="monthly", k=3, mode="hybrid")
    assert monthly and all(h.step == "monthly" for h in monthly)
    assert all(s.step == "summaries" for s in monthly[0].sources())


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_modes_rank_the_matching_conversation_first(built, mode):
    hits = built.search("sourdough starter smells like acetone", step="transcripts", mode=mode, k=3)
    assert hits and "sourdough" in hits[0].content.lower()
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_exact_leaf_search_finds_what_no_summary_kept(built):
    # A follow-up line lives in the transcripts; the extractive summaries drop it.
    phrase = "ticket #1003"
    assert not any(phrase in r.content for r in built.records("summaries"))
    hits = built.search(phrase.upper(), exact=True)
    assert hits and all(h.step == "chatgpt" and phrase in h.content for h in hits)
    assert built.search(phrase, step="transcripts", exact=True)[0].step == "transcripts"
    assert built.search("no such phrase anywhere", exact=True) == []


def test_filters_by_period_and_metadata(built):
    period = built.records("transcripts")[0].period
    hits = built.search("conversation", step="transcripts", periods=[period], k=50, mode="hybrid")
    assert hits and all(h.period == period for h in hits)
    conv_id = built.records("transcripts")[3].meta("chat.conversation_id")
    hits = built.search("conversation", step="transcripts", metadata={"chat.conversation_id": conv_id}, k=50,
                        mode="hybrid")
    assert [h.meta("chat.conversation_id") for h in hits] == [conv_id]


def test_near_duplicates_collapse(built):
    engine = SearchEngine(open_store(built.store_uri))
    plain = engine.search("FastAPI Depends session", steps=["transcripts"], k=10,
                          strategy=HYBRID.with_(dedup_cosine=None))
    collapsed = engine.search("FastAPI Depends session", steps=["transcripts"], k=10,
                              strategy=HYBRID.with_(dedup_cosine=0.8))
    assert sum(len(h.collapsed) for h in collapsed) > 0
    kept = {h.id for h in collapsed}
    assert not kept & {c for h in collapsed for c in h.collapsed}
    assert plain[0].id == collapsed[0].id


def test_projection_and_on_update_hook(tmp_path, small_export):
    body = '''
from synthex import Pipeline
from synthex.core.prompts import monthly_reflection, world_model_prompt
import json, pathlib

LOG = pathlib.Path(__file__).parent / "hook.jsonl"

def on_update(payload):
    with LOG.open("a") as fh:
        fh.write(json.dumps({{"output": payload["output"], "id": payload["record"]["id"]}}) + "\\n")

pipeline = Pipeline("proj")
pipeline.source("chatgpt", file={export!r})
pipeline.aggregate("monthly", from_="chatgpt", prompt=monthly_reflection)
pipeline.fold("world-model", from_="monthly", prompt=world_model_prompt)
pipeline.output("context", from_="world-model", surface="projection", on_update=on_update)
'''
    root = write_project(tmp_path / "p", small_export, body)
    pipe = load(root)
    pipe.run()
    latest = pipe.projection("context")
    assert latest.step == "world-model" and latest.period == max(r.period for r in pipe.records("monthly"))
    calls = [json.loads(line) for line in (root / "hook.jsonl").read_text().splitlines()]
    assert calls == [{"output": "context", "id": latest.id}]
    pipe.run()  # nothing changed: the hook does not fire again
    assert len((root / "hook.jsonl").read_text().splitlines()) == 1


def test_ranking_is_independent_of_ingest_order(tmp_path, small_export):
    data = json.loads(small_export.read_text())
    results = []
    for seed in (1, 2):
        shuffled = list(data)
        random.Random(seed).shuffle(shuffled)
        export = tmp_path / f"export{seed}.json"
        export.write_text(json.dumps(shuffled))
        pipe = load(write_project(tmp_path / f"p{seed}", export))
        pipe.run("transcripts")
        results.append([(h.id, round(h.score, 9)) for h in pipe.search("rust tokio task", step="transcripts", k=8)])
    assert results[0] == results[1]


def test_bm25_matches_the_reference_implementation_order(built):
    """LanceDB FTS (our engine) agrees with rank_bm25 (the reference) on the top hit."""
    from rank_bm25 import BM25Okapi

    records = built.records("transcripts")
    bm25 = BM25Okapi([tokenize(r.content) for r in records])
    engine = SearchEngine(open_store(built.store_uri))
    by_id = {r.id: i for i, r in enumerate(records)}
    for record in records[:6]:
        query = record.meta("chat.title")
        scores = bm25.get_scores(tokenize(query))
        ours = engine.search(query, steps=["transcripts"], k=1, strategy=BM25)
        assert scores[by_id[ours[0].id]] == pytest.approx(max(scores))  # our top hit is a reference top hit


def test_cli_search_json(built):
    # What the command prints, in this process (the search command's process is test_search_registry's door).
    proc = cli("search", "kyoto", "--step", "transcripts", "-k", "2", "--mode", "hybrid", "--json", "--project",
               built.project_dir)
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)["hits"]
    assert len(hits) <= 2 and hits[0]["step"] == "transcripts"
    assert {"id", "step", "branch", "score", "content", "sources", "metadata"} <= set(hits[0])


def test_openai_compatible_embedder_and_webhook(tmp_path, monkeypatch, small_export):
    """Vectors from an OpenAI-compatible /embeddings endpoint; a projection webhook receives JSON."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from fake_openai import FakeOpenAI

    received = []

    class Hook(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    body = f'''
from synthex import Pipeline
from synthex.core.prompts import monthly_reflection
pipeline = Pipeline("emb")
pipeline.source("chatgpt", file={{export!r}})
pipeline.aggregate("monthly", from_="chatgpt", prompt=monthly_reflection)
pipeline.output("latest", from_="monthly", surface="projection", on_update="http://127.0.0.1:{hook.server_address[1]}/hook")
'''
    with FakeOpenAI() as server:
        monkeypatch.setenv("SYNTHEX_EMBEDDER", "openai")
        monkeypatch.setenv("SYNTHEX_EMBEDDING_MODEL", "fake-embed")
        monkeypatch.setenv("SYNTHEX_EMBEDDING_DIM", "4")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        pipe = load(write_project(tmp_path / "emb", small_export, body))
        pipe.run()
        record = pipe.store().records.get(pipe.records("chatgpt")[0].id, with_embedding=True)
        assert record.embedding == [1.0, 0.0, 0.0, 0.0]
        assert pipe.search("conversation", step="chatgpt", mode="dense", k=2)
    hook.shutdown()
    assert len(received) == 1 and received[0]["output"] == "latest"
    assert received[0]["record"]["id"] == pipe.projection("latest").id
