"""Exact dense search from an in-memory float32 matrix of the records' vectors.

LanceDB's flat vector scan measured ~290 ms at 100k records here, and its ANN indexes took 55-93 s
to build at 100k (docs/benchmarks.md). A matrix-vector product over the cached vectors is exact and
takes a few ms at 100k. The cache is keyed by the table version and reloaded when the table changed.
Memory: 4 bytes x dim per record (1.5 GB at 1M records of 384 dims).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from synthex_resources.record_store import RecordStore


@dataclass
class _Matrix:
    version: int
    ids: np.ndarray  # object array of ids
    codes: dict[str, dict[str, int]]  # column -> value -> integer code (masks compare integers, not strings)
    steps: np.ndarray
    branches: np.ndarray
    periods: np.ndarray
    vectors: np.ndarray  # (n, dim) float32, L2-normalized
    row_of: dict[str, int]
    unembedded: set[tuple[str, str]]  # (step, branch) holding records written without a vector


class DenseIndex:
    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self._matrix: _Matrix | None = None
        self._lock = threading.Lock()

    def _current(self) -> _Matrix | None:
        tbl = self.store.records_table()
        if tbl is None:
            return None
        version = tbl.version
        with self._lock:
            if self._matrix is None or self._matrix.version != version:
                data = tbl.search().select(["id", "step", "branch", "period", "vector"]).limit(None).to_arrow()
                has_vector = pc.is_valid(data.column("vector"))
                bare = data.filter(pc.invert(has_vector))
                unembedded = set(zip(bare.column("step").to_pylist(), bare.column("branch").to_pylist(), strict=True))
                data = data.filter(has_vector)
                vec_col = data.column("vector").combine_chunks()
                dim = vec_col.type.list_size
                flat = vec_col.flatten().to_numpy(zero_copy_only=False)
                vectors = np.asarray(flat, dtype=np.float32).reshape(-1, dim) if len(data) else np.zeros((0, dim), np.float32)
                codes: dict[str, dict[str, int]] = {}
                columns: dict[str, np.ndarray] = {}
                for name in ("step", "branch", "period"):
                    values = data.column(name).to_pylist()
                    table = codes[name] = {v: i for i, v in enumerate(sorted(set(values)))}
                    columns[name] = np.fromiter((table[v] for v in values), dtype=np.int32, count=len(values))
                self._matrix = _Matrix(
                    version=version,
                    ids=np.asarray(data.column("id").to_pylist(), dtype=object),
                    codes=codes,
                    steps=columns["step"],
                    branches=columns["branch"],
                    periods=columns["period"],
                    vectors=vectors,
                    row_of={rid: i for i, rid in enumerate(data.column("id").to_pylist())},
                    unembedded=unembedded,
                )
            return self._matrix

    def _ready(self, steps: list[str] | None, branch: str) -> _Matrix | None:
        """The matrix, after embedding any record in scope that was written without a vector."""
        m = self._current()
        groups = self.store.scope_groups(branch, steps)
        if m is not None and any(b in groups and (not groups[b] or s in groups[b]) for s, b in m.unembedded):
            self.store.ensure_vectors(steps, branch)
            m = self._current()
        return m

    def vectors_of(self, ids: list[str]) -> dict[str, np.ndarray]:
        m = self._current()
        if m is None:
            return {}
        return {rid: m.vectors[m.row_of[rid]] for rid in ids if rid in m.row_of}

    def scores(self, query_vector: np.ndarray, steps: list[str] | None, branch: str,
               periods: list[str] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cosine similarity of every record in scope: (ids, similarities, matrix rows)."""
        return self._scores(self._ready(steps, branch), query_vector, steps, branch, periods)

    def _scores(self, m: _Matrix | None, query_vector: np.ndarray, steps: list[str] | None, branch: str,
                periods: list[str] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if m is None or not len(m.ids):
            return np.zeros(0, object), np.zeros(0, np.float32), np.zeros(0, np.int64)
        mask = np.zeros(len(m.ids), dtype=bool)
        for served_by, names in self.store.scope_groups(branch, steps).items():  # copy-on-write view
            part = m.branches == m.codes["branch"].get(served_by, -1)
            if names:
                part &= np.isin(m.steps, [m.codes["step"].get(s, -1) for s in names])
            mask |= part
        if periods:
            mask &= np.isin(m.periods, [m.codes["period"].get(p, -1) for p in periods])
        rows = np.flatnonzero(mask)
        # Multiply all rows, then select: cheaper than copying the selected rows out of the matrix.
        sims = (m.vectors @ np.asarray(query_vector, dtype=np.float32))[rows] if len(rows) else np.zeros(0, np.float32)
        return m.ids[rows], sims, rows

    def search(self, query_vector: np.ndarray, steps: list[str] | None, branch: str,
               periods: list[str] | None, n: int) -> list[tuple[str, float, np.ndarray]]:
        """Top ``n`` (id, cosine similarity, vector), ties broken by id. Every row tied with the n-th
        similarity is a candidate before the cut, so which of a tie group makes it does not depend on
        the matrix's row order (the order records were written in)."""
        m = self._ready(steps, branch)
        _, sims, rows = self._scores(m, query_vector, steps, branch, periods)
        if m is None or not len(rows) or n <= 0:
            return []
        if len(rows) > n:
            kth = np.partition(sims, len(sims) - n)[len(sims) - n]  # the n-th largest similarity
            top = np.flatnonzero(sims >= kth)
        else:
            top = np.arange(len(rows))
        ranked = sorted(((m.ids[rows[i]], float(sims[i]), rows[i]) for i in top), key=lambda p: (-p[1], p[0]))
        return [(rid, sim, m.vectors[row]) for rid, sim, row in ranked[:n]]


def dense_index(store: RecordStore) -> DenseIndex:
    """The store's matrix (one per store object; it lives and dies with the store)."""
    return store.derived("dense_index", lambda: DenseIndex(store))
