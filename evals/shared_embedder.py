"""One embedder for a whole eval, remembering every text it embedded, in memory and (optionally) on disk.

An eval builds many small projects (one per conversation and architecture); several architectures
index the same texts (the turns; each turn with the one before it). A store never embeds a text it
already holds, but each project has its own store, so the memo here carries that across them. The
``EmbeddingCache`` carries it across eval runs: a fresh work dir, another architecture over the same
data, or the same eval again embeds only the texts no earlier run embedded (the model was ~57 % of a
first ``synthex eval locomo --compare conversational``; docs/benchmarks.md).

Vectors are a pure function of (model, text): the MiniLM embedder gives bit-identical vectors for a text
whatever batch it is in (padding is masked out), so a cached vector is the one a fresh run would compute,
and the figures do not depend on the cache.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synthex_resources.embedder import Embedder, EmbedderConfig

KEY_BYTES = 32  # sha256 of the text
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024  # ~340,000 MiniLM vectors (384 float32 + a 32-byte key each)


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


@dataclass(frozen=True)
class CacheLoad:
    """What ``EmbeddingCache.load`` read: the vectors by text key, oldest first, and the problems of the
    shard files that could not be read (each: ``<file>: <problem>``; their vectors are recomputed)."""

    vectors: dict[bytes, np.ndarray]
    problems: tuple[str, ...] = ()


class EmbeddingCache:
    """Vectors of one embedding model by text hash: ``.npz`` shard files in one folder per model.

    A shard holds ``keys`` (n x 32 sha256 digests), ``vectors`` (n x dim float32) and ``checksum`` (the
    sha256 of both), so a truncated or altered shard is detected, skipped and recomputed, never served.
    ``save`` writes only the vectors no shard holds yet, as a new shard (through a temporary file and
    ``os.replace``: a kill leaves no partial shard), so saving after every workspace costs what that
    workspace embedded, not the whole cache. Bounded by ``max_bytes``: past it the shards are compacted
    into one holding the most recently used vectors (written before the others are deleted: a kill in
    between leaves duplicates, which the next load reads once and the next compaction removes)."""

    def __init__(self, directory: Path, model: str, dim: int, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes <= 0:
            raise ValueError(f"embedding cache: max_bytes must be positive, got {max_bytes}")
        self.model, self.dim, self.max_bytes = model, dim, max_bytes
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"
        # The model id's own hash too: two ids that slug alike ("a/b", "a_b") keep apart.
        self.path = Path(directory) / f"{slug}-{dim}-{hashlib.sha256(model.encode()).hexdigest()[:12]}"
        self._on_disk: set[bytes] = set()  # keys some readable shard holds (as of the last load / save)
        self._bad: list[Path] = []  # unreadable shards: deleted at the next save, which rewrites their vectors

    @property
    def max_vectors(self) -> int:
        return max(1, self.max_bytes // (self.dim * 4 + KEY_BYTES))

    def shards(self) -> list[Path]:
        return sorted(self.path.glob("shard-*.npz")) if self.path.is_dir() else []

    def load(self) -> CacheLoad:
        """The stored vectors, oldest shard first; an unreadable shard is skipped and named in ``problems``."""
        vectors: dict[bytes, np.ndarray] = {}
        problems = []
        self._bad = []
        for shard in self.shards():
            try:
                found = self._read(shard)
            except ValueError as exc:
                problems.append(f"{shard}: {exc}")
                self._bad.append(shard)
                continue
            for key, vec in found.items():
                vectors.pop(key, None)  # a key in a later shard was used later
                vectors[key] = vec
        self._on_disk = set(vectors)
        return CacheLoad(vectors, tuple(problems))

    def _read(self, shard: Path) -> dict[bytes, np.ndarray]:
        try:
            with np.load(shard, allow_pickle=False) as data:
                keys, vectors, checksum = data["keys"], data["vectors"], str(data["checksum"])
        except Exception as exc:  # noqa: BLE001 - a truncated zip, a missing member, garbage: all recomputed
            raise ValueError(f"unreadable ({type(exc).__name__}: {str(exc)[:120]})") from exc
        if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != KEY_BYTES:
            raise ValueError(f"keys have shape {keys.shape} {keys.dtype}, expected (n, {KEY_BYTES}) uint8")
        if vectors.dtype != np.float32 or vectors.shape != (len(keys), self.dim):
            raise ValueError(f"vectors have shape {vectors.shape} {vectors.dtype}, "
                             f"expected ({len(keys)}, {self.dim}) float32")
        if _checksum(keys, vectors) != checksum:
            raise ValueError("checksum mismatch (the file was altered or partly written)")
        return {bytes(k): v for k, v in zip(keys, vectors, strict=True)}

    def save(self, vectors: dict[bytes, np.ndarray]) -> None:
        """Write the vectors of ``vectors`` (least recently used first) that no shard holds, as a new shard;
        past the bound, compact to the newest ``max_vectors``."""
        new = [(k, v) for k, v in vectors.items() if k not in self._on_disk]
        if new:
            self._write(new)
            self._on_disk.update(k for k, _ in new)
        for shard in self._bad:
            shard.unlink(missing_ok=True)
        self._bad = []
        if len(self._on_disk) > self.max_vectors:
            old = self.shards()
            kept = [(k, v) for k, v in vectors.items() if k in self._on_disk][-self.max_vectors:]
            written = self._write(kept)
            for shard in old:
                if shard != written:
                    shard.unlink(missing_ok=True)
            self._on_disk = {k for k, _ in kept}

    def _write(self, items: list[tuple[bytes, np.ndarray]]) -> Path:
        keys = np.frombuffer(b"".join(k for k, _ in items), dtype=np.uint8).reshape(len(items), KEY_BYTES)
        matrix = (np.stack([v for _, v in items]).astype(np.float32, copy=False) if items
                  else np.zeros((0, self.dim), dtype=np.float32))
        self.path.mkdir(parents=True, exist_ok=True)
        # Named by time then pid: shards sort in the order they were written, two evals never collide.
        target = self.path / f"shard-{time.time_ns():020d}-{os.getpid()}.npz"
        fd, tmp = tempfile.mkstemp(prefix=".shard-", suffix=".tmp", dir=self.path)
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, keys=keys, vectors=matrix, checksum=np.array(_checksum(keys, matrix)))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target


def _checksum(keys: np.ndarray, vectors: np.ndarray) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(keys).tobytes())
    digest.update(np.ascontiguousarray(vectors).tobytes())
    return digest.hexdigest()


class MemoEmbedder:
    """``Embedder`` that embeds each distinct text once: from memory, else from ``cache`` (read at the first
    ``embed``), else through ``inner``. ``computed`` counts the texts ``inner`` embedded; ``save()`` writes
    what is new to the cache (the eval calls it after each workspace, so a killed eval keeps its work)."""

    def __init__(self, inner: Embedder | None = None, cache: EmbeddingCache | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.inner = inner or EmbedderConfig().create()
        self.name, self.dim = self.inner.name, self.inner.dim
        # Questions reach the memo as prefixed texts (embed_queries): keyed apart from the same text stored.
        self.query_prefix = getattr(self.inner, "query_prefix", "")
        self.cache = cache
        self.computed = 0
        self._warn = warn or (lambda line: None)
        self._vectors: dict[bytes, np.ndarray] = {}
        self._cache_read = cache is None
        self._dirty = False
        # An eval searches a workspace's questions on several threads (evals.benchmarks.evaluate): the memo's
        # dict is reordered on every embed (least recently used last), so concurrent embeds would race.
        self._lock = threading.RLock()

    @classmethod
    def with_disk_cache(cls, directory: Path | None, warn: Callable[[str], None] | None = None,
                        inner: Embedder | None = None) -> MemoEmbedder:
        """A memo over the default embedder, with the disk cache in ``directory`` (None: memory only)."""
        inner = inner or EmbedderConfig().create()
        cache = None
        if directory is not None:
            model = inner.name + (f"@{base}" if (base := getattr(inner, "base_url", None)) else "")
            cache = EmbeddingCache(directory, model, inner.dim)
        return cls(inner, cache, warn)

    def _read_cache(self) -> None:
        self._cache_read = True
        assert self.cache is not None
        loaded = self.cache.load()
        for problem in loaded.problems:
            self._warn(f"warning: embedding cache {problem}; its vectors are recomputed")
            self._dirty = True  # the next save deletes that shard and writes what was recomputed
        self._vectors = loaded.vectors | self._vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return self._embed(texts)

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not self._cache_read:
            self._read_cache()
        keys = [text_key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if missing:
            first = {k: t for k, t in zip(keys, texts, strict=True)}
            for key, vec in zip(missing, self.inner.embed([first[k] for k in missing]), strict=True):
                self._vectors[key] = vec
            self.computed += len(missing)
            self._dirty = True
        if self.cache is not None:  # least recently used first: a used vector moves to the end
            for key in dict.fromkeys(keys):
                self._vectors[key] = self._vectors.pop(key)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        """Write the new vectors to the disk cache (and drop an unreadable shard)."""
        with self._lock:
            if self.cache is not None and self._dirty:
                self.cache.save(self._vectors)
                self._dirty = False


class EmbedAheadOfWorkspaces:
    """Embeds, on one background thread, the texts of the conversations an eval is about to ingest (through
    ``embedder``, so each workspace's store then finds them in the memo), staying at most ``ahead``
    conversations in front of the one being ingested. A workspace's set-up (its pipeline run's planning and
    store writes) then overlaps the model's work on the next haystacks; the eval waits for a conversation's
    texts before ingesting it (``wait_embedded``), so the model's batches are all this thread's. Vectors are a pure function of the text (any batch), so figures do
    not change; texts go in chunks of ``chunk``, so an embed the workspace itself makes waits at most one chunk
    (256: most haystacks in one or two calls, whose batches the model sorts by token length across the call).
    A conversation's texts are chunked shortest first: the model pads each batch to its longest text, so a
    chunk of texts of one length costs what that length costs, and a chunk in the conversation's own order
    costs what its longest text costs, for each text (on a LongMemEval haystack, one call of all its texts:
    32.7 texts per CPU-second; chunks of 64 in haystack order: 15.1; docs/benchmarks.md).
    ``prepare(index)``, when given, runs on the thread after conversation ``index``'s texts (from ``prepare_from``
    on): the eval ingests that conversation's workspace there, so the texts only its architecture embeds (turns
    in context, key aggregates' profiles) are embedded while the eval searches the previous workspace, not
    after; ``wait_embedded`` then also waits for it. An exception there is dropped: the eval's own ingest of
    that workspace runs the same steps again and raises it where it belongs.
    ``close`` stops the thread (the texts not embedded yet are embedded later, where they are needed)."""

    def __init__(self, embedder: MemoEmbedder, texts_of: list[list[str]], ahead: int = 2, chunk: int = 256,
                 prepare: Callable[[int], None] | None = None, prepare_from: int = 1) -> None:
        self.embedder, self.texts_of, self.ahead, self.chunk = embedder, texts_of, ahead, chunk
        self.prepare, self.prepare_from = prepare, prepare_from
        self._current = 0  # the conversation the eval is ingesting (0-based)
        self._embedded = 0  # conversations whose texts are all embedded (the first ``_embedded``)
        self._ended = False  # the thread returned (all done, stopped, or the model raised)
        self._changed = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._work, name="synthex-eval-embed-ahead", daemon=True)
        self._thread.start()

    def reached(self, index: int) -> None:
        """The eval started conversation ``index`` (0-based): the thread may run up to ``index + ahead``."""
        with self._changed:
            self._current = index
            self._changed.notify_all()

    def wait_embedded(self, index: int) -> None:
        """Until conversation ``index``'s texts are embedded (or the thread ended): its workspace then finds them
        all in the memo, instead of embedding the rest itself a partition at a time, in small mixed batches."""
        with self._changed:
            while self._embedded <= index and not self._ended:
                self._changed.wait()

    def _work(self) -> None:
        try:
            self._embed_all()
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def _embed_all(self) -> None:
        for index, texts in enumerate(self.texts_of):
            with self._changed:
                while not self._stopped and index > self._current + self.ahead:
                    self._changed.wait()
                if self._stopped:
                    return
            ordered = sorted(dict.fromkeys(texts), key=len)  # each chunk's texts of about one length
            for start in range(0, len(ordered), self.chunk):
                if self._stopped:
                    return
                try:
                    self.embedder.embed(ordered[start:start + self.chunk])
                except Exception:  # noqa: BLE001 - the workspace embeds them itself and raises it there
                    return
            if self.prepare is not None and index >= self.prepare_from and not self._stopped:
                try:
                    self.prepare(index)
                except Exception:  # noqa: BLE001 - the eval's own ingest of it raises it there
                    pass
            with self._changed:
                self._embedded = index + 1
                self._changed.notify_all()

    def drain(self) -> None:
        """Let it embed every conversation's texts, and wait until it has."""
        self.reached(len(self.texts_of))
        self._thread.join()

    def close(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        self._thread.join()

    def __enter__(self) -> EmbedAheadOfWorkspaces:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
