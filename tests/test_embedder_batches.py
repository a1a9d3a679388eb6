"""The offline MiniLM's batches (issue 34 item 4): texts batched by token length, not characters, and the
batches run side by side on single-threaded ONNX sessions; the same vector bits whatever the arrangement."""

from __future__ import annotations

import threading

import numpy as np

from synthex_resources.embedder import MiniLMOnnxEmbedder

# Characters and tokens disagree: "a b c d e" is 9 characters and 7 tokens, "wonderful weather" 17 and 4.
TEXTS = ["a b c d e", "hello there", "1 2 3 4 5 6 7 8", "wonderful weather"]


class RecordedSession:
    """A real ONNX session, each run's input shape and thread kept."""

    def __init__(self, inner) -> None:  # noqa: ANN001 - an onnxruntime.InferenceSession
        self.inner = inner
        self.shapes: list[tuple[int, int]] = []
        self.threads: set[int] = set()

    def run(self, outputs, feed):  # noqa: ANN001, ANN201 - onnxruntime's signature
        self.shapes.append(feed["input_ids"].shape)
        self.threads.add(threading.get_ident())
        return self.inner.run(outputs, feed)


def test_a_call_is_batched_by_token_length():
    model = MiniLMOnnxEmbedder(batch_size=2, threads=1)
    model.embed(["warm up"])
    session = model._session = RecordedSession(model._session)
    model._sessions = [session]
    model.embed(TEXTS)
    # By tokens: (4, 4) and (7, 10) pad to 4 and 10; by characters (7, 4) and (10, 4) pad to 7 and 10.
    assert sorted(session.shapes) == [(2, 4), (2, 10)]


def test_batches_run_side_by_side_on_single_threaded_sessions():
    model = MiniLMOnnxEmbedder(batch_size=1, threads=2)
    model.embed(["one batch"])  # one batch: the first session only
    assert len(model._sessions) == 1
    model.embed(TEXTS)
    assert len(model._sessions) == 2
    assert all(s.get_session_options().intra_op_num_threads == 1 for s in model._sessions)
    recorded = [RecordedSession(s) for s in model._sessions]
    model._session, model._sessions = recorded[0], recorded
    model.embed(TEXTS * 8)
    assert all(r.shapes for r in recorded) and len(recorded[0].threads | recorded[1].threads) == 2


def test_same_vector_bits_whatever_the_batches_and_sessions():
    texts = [*TEXTS, "", "   ", "x" * 3000, "The billing service moved to Rust in March. " * 12]
    reference = MiniLMOnnxEmbedder(batch_size=16, threads=1).embed(texts)
    for batch_size, threads in ((1, 2), (3, 2), (2, 1)):
        model = MiniLMOnnxEmbedder(batch_size=batch_size, threads=threads)
        assert np.array_equal(model.embed(texts), reference)
        assert np.array_equal(np.concatenate([model.embed([t]) for t in texts]), reference)
    assert np.allclose(np.linalg.norm(reference, axis=1), 1.0, atol=1e-5)


def test_a_failing_batch_raises_on_the_callers_thread():
    model = MiniLMOnnxEmbedder(batch_size=1, threads=2)
    model.embed(TEXTS)

    class Broken:
        def run(self, outputs, feed):  # noqa: ANN001, ANN201
            raise RuntimeError("session failed")

    model._session = model._sessions[0] = model._sessions[1] = Broken()  # wherever a batch runs, it fails
    try:
        model.embed(TEXTS * 3)
    except RuntimeError as exc:
        assert str(exc) == "session failed"
    else:
        raise AssertionError("the failing batch was not raised")


def test_a_large_call_is_tokenized_a_window_at_a_time_with_the_same_bits(monkeypatch):
    """A call may carry every unembedded text of a step (``Vectors.ensure``): its encodings are held a window
    at a time, not all at once, and the vectors are those of one window."""
    import synthex_resources.embedder as embedder_module

    texts = [f"{t} {i}" for i in range(5) for t in TEXTS]  # 20 texts
    reference = MiniLMOnnxEmbedder(batch_size=4, threads=2).embed(texts)
    model = MiniLMOnnxEmbedder(batch_size=4, threads=2)
    model.embed(["warm up"])
    sizes: list[int] = []
    tokenizer = model._tokenizer

    class CountingTokenizer:
        def encode_batch(self, batch):  # noqa: ANN001, ANN201 - the tokenizers signature
            sizes.append(len(batch))
            return tokenizer.encode_batch(batch)

    model._tokenizer = CountingTokenizer()
    monkeypatch.setattr(embedder_module, "TOKENIZE_WINDOW", 6)
    assert np.array_equal(model.embed(texts), reference)
    assert sizes == [6, 6, 6, 2]
