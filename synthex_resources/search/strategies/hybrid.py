"""The record-fusion family: the modes ``bm25``, ``dense``, ``hybrid`` and ``hybrid-equal`` (search/strategies/builtin.py).

``RecordFusion`` ranks the searched records themselves: each first-stage leg's top candidates
(``candidates``: leg -> how many), fused into one score per record (``fuse``), ties by id; near-duplicates
collapsed; then the reranker. ``LexicalOnly`` (BM25), ``DenseOnly`` (embeddings) and ``RRFHybrid`` (both, by
reciprocal rank fusion) are its fusions. The whole algorithm is here and needs no numpy of its own.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from synthex_resources.search.strategies.base import SearchStrategy, param
from synthex_resources.search.types import Fusion, Leg, SearchBackend, SearchRequest, SearchResults


@dataclass(frozen=True, kw_only=True)
class RecordFusion(SearchStrategy):
    """Ranks records: each first-stage leg's top candidates (``candidates``: leg -> how many), fused into
    one score per record (``fuse``), ties by id; near-duplicates collapsed; then the reranker."""

    dedup_cosine: float | None = param(None, low=-1.0, high=1.0,
                                       doc="collapse near-duplicates above this cosine (None: keep all)")

    @abstractmethod
    def candidates(self) -> dict[Leg, int]:
        """The legs to run, in fusion order, and how many candidates each gives."""

    @abstractmethod
    def fuse(self, lists: dict[Leg, list[tuple[str, float]]]) -> dict[str, float]:
        """One score per record from each leg's (id, score) pairs, best first."""

    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        query, k, metadata = request.query, request.k, request.metadata
        in_memory = not metadata
        runs: dict[Leg, Any] = {}
        for leg, pool in self.candidates().items():
            n = max(pool, k)
            if leg is Leg.LEXICAL:
                runs[leg] = lambda n=n: engine.lexical(query, request.where, n)
            else:
                runs[leg] = lambda n=n: engine.dense(query, request.rows, n, request.query_vector,
                                                     steps=request.steps, scope=request.scope,
                                                     periods=request.periods, in_memory=in_memory)
        if len(runs) > 1:  # the legs wait on different things (index I/O, the embedder): overlap them
            futures = {leg: engine.submit(fn) for leg, fn in runs.items()}
            lists = {leg: f.result() for leg, f in futures.items()}
        else:
            lists = {leg: fn() for leg, fn in runs.items()}
        ranks: dict[str, dict[str, int]] = {}
        for leg, pairs in lists.items():
            for rank, (rid, _score) in enumerate(pairs, start=1):
                ranks.setdefault(rid, {})[leg.value] = rank
        fused = self.fuse(lists)
        order = sorted(fused, key=lambda i: (-fused[i], i))
        want = len(order) if self.reranker is not None else k
        kept, collapsed = engine.collapse_near_duplicates(order, self.dedup_cosine, want, in_memory)
        rows = engine.store.records.rows_by_id(kept, scope=request.scope)  # the rows this branch reads
        hits = []
        for rid in kept:
            if rid not in rows:
                continue
            hit = engine.hit(rows[rid], fused[rid], ranks.get(rid, {}))
            hit.collapsed = collapsed.get(rid, [])
            if engine.metadata_matches(hit, metadata) and hit.content.strip():  # no text: no part in any ranking
                hits.append(hit)
        hits, warnings = self.rerank(query, hits)
        return SearchResults(hits[:k], warnings)


def _own_scores(pairs: list[tuple[str, float]]) -> dict[str, float]:
    return {rid: score for rid, score in pairs}


@dataclass(frozen=True, kw_only=True)
class LexicalOnly(RecordFusion):
    """BM25 only; a hit's score is its BM25 score."""

    fusion: ClassVar[Fusion] = Fusion.SINGLE
    kind: ClassVar[str] = "lexical"

    lexical_pool: int = param(50, low=1, doc="candidates taken from BM25")

    def candidates(self) -> dict[Leg, int]:
        return {Leg.LEXICAL: self.lexical_pool}

    def fuse(self, lists: dict[Leg, list[tuple[str, float]]]) -> dict[str, float]:
        return _own_scores(lists[Leg.LEXICAL])


@dataclass(frozen=True, kw_only=True)
class DenseOnly(RecordFusion):
    """Embeddings only; a hit's score is its cosine similarity to the query."""

    fusion: ClassVar[Fusion] = Fusion.SINGLE
    kind: ClassVar[str] = "dense"

    dense_pool: int = param(50, low=1, doc="candidates taken from the vector index")

    def candidates(self) -> dict[Leg, int]:
        return {Leg.DENSE: self.dense_pool}

    def fuse(self, lists: dict[Leg, list[tuple[str, float]]]) -> dict[str, float]:
        return _own_scores(lists[Leg.DENSE])


@dataclass(frozen=True, kw_only=True)
class RRFHybrid(RecordFusion):
    """BM25 and embeddings fused by reciprocal rank fusion (Cormack et al. 2009): a record scores
    ``sum over legs of weight / (rrf_k + rank)``."""

    fusion: ClassVar[Fusion] = Fusion.RRF
    kind: ClassVar[str] = "rrf"

    lexical_pool: int = param(50, low=1, doc="candidates taken from BM25 before fusion")
    dense_pool: int = param(50, low=1, doc="candidates taken from the vector index before fusion")
    rrf_k: int = param(60, low=0, doc="the RRF constant: larger flattens the rank differences")
    lexical_weight: float = param(1.0, low=0.0, doc="weight of the BM25 list")
    dense_weight: float = param(1.0, low=0.0, doc="weight of the dense list")
    dedup_cosine: float | None = param(0.95, low=-1.0, high=1.0,
                                       doc="collapse near-duplicates above this cosine (None: keep all)")

    def candidates(self) -> dict[Leg, int]:
        return {Leg.LEXICAL: self.lexical_pool, Leg.DENSE: self.dense_pool}

    def fuse(self, lists: dict[Leg, list[tuple[str, float]]]) -> dict[str, float]:
        weights = {Leg.LEXICAL: self.lexical_weight, Leg.DENSE: self.dense_weight}
        fused: dict[str, float] = {}
        for leg, pairs in lists.items():  # lexical first: the float sums are the same whatever the run
            for rank, (rid, _score) in enumerate(pairs, start=1):
                fused[rid] = fused.get(rid, 0.0) + weights[leg] / (self.rrf_k + rank)
        return fused

