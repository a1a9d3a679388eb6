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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synthex_resources.embedder import Embedder, EmbedderConfig

KEY_BYTES = 32  # sha256 of the text
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024  # ~340,000 MiniLM vectors: every LoCoMo and LongMemEval-S text, several times


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


@dataclass(frozen=True)
class CacheLoad:
    """What ``EmbeddingCache.load`` read: the vectors by text key, oldest first, and why nothing was read
    (None: the file was read, or there was none)."""

    vectors: dict[bytes, np.ndarray]
    problem: str | None = None


class EmbeddingCache:
    """Vectors of one embedding model by text hash, in one ``.npz`` file under ``directory``.

    The file holds ``keys`` (n x 32 sha256 digests), ``vectors`` (n x dim float32) and ``checksum`` (the
    sha256 of both), so a truncated or altered file is detected and recomputed, never served. It is
    rewritten whole through a temporary file and ``os.replace`` (a kill leaves the old file or the new one),
    and bounded by ``max_bytes``: the least recently used vectors are dropped first."""

    def __init__(self, directory: Path, model: str, dim: int, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes <= 0:
            raise ValueError(f"embedding cache: max_bytes must be positive, got {max_bytes}")
        self.directory = Path(directory)
        self.model, self.dim, self.max_bytes = model, dim, max_bytes
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"
        # The model id's own hash too: two ids that slug alike ("a/b", "a_b") keep apart.
        self.path = self.directory / f"{slug}-{dim}-{hashlib.sha256(model.encode()).hexdigest()[:12]}.npz"

    @property
    def max_vectors(self) -> int:
        return max(1, self.max_bytes // (self.dim * 4 + KEY_BYTES))

    def load(self) -> CacheLoad:
        """The stored vectors; a missing file is an empty cache, an unreadable one an empty cache and a problem."""
        if not self.path.exists():
            return CacheLoad({})
        try:
            with np.load(self.path, allow_pickle=False) as data:
                keys, vectors, checksum = data["keys"], data["vectors"], str(data["checksum"])
        except Exception as exc:  # noqa: BLE001 - a truncated zip, a missing member, garbage: all recomputed
            return CacheLoad({}, f"unreadable ({type(exc).__name__}: {str(exc)[:120]})")
        if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != KEY_BYTES:
            return CacheLoad({}, f"keys have shape {keys.shape} {keys.dtype}, expected (n, {KEY_BYTES}) uint8")
        if vectors.dtype != np.float32 or vectors.shape != (len(keys), self.dim):
            return CacheLoad({}, f"vectors have shape {vectors.shape} {vectors.dtype}, "
                                 f"expected ({len(keys)}, {self.dim}) float32")
        if _checksum(keys, vectors) != checksum:
            return CacheLoad({}, "checksum mismatch (the file was altered or partly written)")
        return CacheLoad({bytes(k): v for k, v in zip(keys, vectors, strict=True)})

    def save(self, vectors: dict[bytes, np.ndarray]) -> None:
        """Write ``vectors`` (least recently used first), keeping the newest ``max_vectors``."""
        items = list(vectors.items())[-self.max_vectors:]
        keys = np.frombuffer(b"".join(k for k, _ in items), dtype=np.uint8).reshape(len(items), KEY_BYTES)
        matrix = (np.stack([v for _, v in items]).astype(np.float32, copy=False) if items
                  else np.zeros((0, self.dim), dtype=np.float32))
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".embeddings-", suffix=".npz.tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, keys=keys, vectors=matrix, checksum=np.array(_checksum(keys, matrix)))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


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
        self.cache = cache
        self.computed = 0
        self._warn = warn or (lambda line: None)
        self._vectors: dict[bytes, np.ndarray] = {}
        self._cache_read = cache is None
        self._dirty = False

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
        if loaded.problem is not None:
            self._warn(f"warning: embedding cache {self.cache.path}: {loaded.problem}; its vectors are recomputed")
            self._dirty = True  # rewritten whole at the next save
        self._vectors = loaded.vectors | self._vectors

    def embed(self, texts: list[str]) -> np.ndarray:
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
        """Write the vectors to the disk cache when some are new (or the file was unreadable)."""
        if self.cache is not None and self._dirty:
            self.cache.save(self._vectors)
            self._dirty = False
