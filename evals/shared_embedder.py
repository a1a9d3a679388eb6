"""One embedder for a whole eval, remembering every text it embedded.

An eval builds many small projects (one per conversation and architecture); several architectures
index the same texts (the turns; each turn with the one before it). A store never embeds a text it
already holds, but each project has its own store, so the memo here carries that across them.
"""

from __future__ import annotations

import hashlib

import numpy as np

from synthex_resources.embedder import Embedder, EmbedderConfig


class MemoEmbedder:
    def __init__(self, inner: Embedder | None = None) -> None:
        self.inner = inner or EmbedderConfig().create()
        self.name, self.dim = self.inner.name, self.inner.dim
        self._vectors: dict[bytes, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if missing:
            first = {k: t for k, t in zip(keys, texts, strict=True)}
            for key, vec in zip(missing, self.inner.embed([first[k] for k in missing]), strict=True):
                self._vectors[key] = vec
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)
