"""Approximate nearest neighbours over the dense matrix's rows: a faiss IVF index of 8-bit codes.

Why: the exact scan reads 4 x dim bytes per record per query, 1.5 GB at 1M records of 384 dims, which
took 107-282 ms per query here (docs/benchmarks.md). An IVF index partitions the vectors into ``nlist``
cells by k-means and reads only the ``nprobe`` cells nearest the query, each vector stored as a 1-byte
per dimension code (scalar quantization). Its shortlist is re-scored exactly from the float32 matrix by
the caller, so the scores are exact and only which records make the shortlist is approximate. faiss
(Meta's similarity-search library, the field's standard kernel for this) does the k-means and the SIMD
scans. The index is saved beside the table with the matrix it indexes (search/indexes/dense_index.py,
search/indexes/sidecar.py) and loaded by the next process instead of rebuilt.

Rows are the matrix's row numbers. Rows appended to the matrix after the build are added before the
next search (one cell assignment per row: ~1 ms per 1,000 rows); rows deleted since, and rows outside a
search's scope, are excluded by a bitmap selector, with ``nprobe`` raised in proportion when the scope
is a small share of the index so that as many in-scope vectors are read.
"""

from __future__ import annotations

import math
import threading

import numpy as np

TRAIN_PER_CELL = 64  # k-means sample: faiss wants at least 39 points per cell
KMEANS_ITERATIONS = 10


class IvfIndex:
    """An IVF index of 8-bit scalar-quantized codes over rows [0, ``rows``) of a float32 matrix."""

    def __init__(self, vectors: np.ndarray | None, nprobe: int = 64, seed: int = 0) -> None:
        import faiss  # imported here: ~0.1 s, and only stores past the ANN threshold need it

        self._faiss = faiss
        self._lock = threading.Lock()
        self.nprobe = nprobe
        self.rows = 0
        if vectors is None:  # ``loaded`` fills it
            return
        n, dim = vectors.shape
        self.nlist = max(16, int(math.sqrt(n)))
        self.nprobe = nprobe
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, self.nlist, faiss.ScalarQuantizer.QT_8bit,
                                              faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = KMEANS_ITERATIONS
        index.cp.seed = seed
        rng = np.random.default_rng(seed)
        sample = vectors[np.sort(rng.choice(n, size=min(n, TRAIN_PER_CELL * self.nlist), replace=False))]
        index.train(np.ascontiguousarray(sample))
        self._index = index
        self.extend(vectors)

    @classmethod
    def loaded(cls, data: np.ndarray, rows: int, nprobe: int = 64) -> IvfIndex:
        """An index saved by ``to_bytes`` over rows [0, ``rows``) of the same matrix (search/indexes/dense_index.py
        keeps it beside the table: a load is a copy, where a build at 1M records took 11.5 s)."""
        out = cls(None, nprobe)
        out._index = out._faiss.deserialize_index(np.ascontiguousarray(data))
        out.nlist = int(out._index.nlist)
        out.rows = rows
        return out

    def to_bytes(self) -> tuple[np.ndarray, int]:
        """The index serialized, and the rows it holds."""
        with self._lock:
            return self._faiss.serialize_index(self._index), self.rows

    def extend(self, vectors: np.ndarray) -> None:
        """Add rows [self.rows, len(vectors)) of the matrix (whose earlier rows are already in)."""
        with self._lock:
            if len(vectors) <= self.rows:
                return
            step = 100_000  # bounded temporary copies
            for start in range(self.rows, len(vectors), step):
                chunk = np.ascontiguousarray(vectors[start:min(start + step, len(vectors))])
                self._index.add_with_ids(chunk, np.arange(start, start + len(chunk), dtype=np.int64))
            self.rows = len(vectors)

    def search(self, query: np.ndarray, n: int, allowed: np.ndarray | None = None,
               share: float = 1.0) -> np.ndarray:
        """Matrix rows of (about) the ``n`` nearest vectors, among ``allowed`` rows when given (a bool
        mask over the matrix rows; ``share`` = its share of the index, to widen the probe)."""
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32)[None, :])
        nprobe = min(self.nlist, max(self.nprobe, int(math.ceil(self.nprobe / max(share, 1e-6)))))
        params = self._faiss.SearchParametersIVF(nprobe=nprobe)
        with self._lock:
            if allowed is not None:
                # one bit per indexed row (rows the mask does not cover, appended by a newer matrix: out)
                mask = np.zeros(self.rows, dtype=bool)
                mask[:min(len(allowed), self.rows)] = allowed[:self.rows]
                bitmap = np.packbits(mask, bitorder="little")
                params.sel = self._faiss.IDSelectorBitmap(len(bitmap), self._faiss.swig_ptr(bitmap))  # size in bytes
            _, rows = self._index.search(q, n, params=params)
        found = rows[0]
        return found[found >= 0]
