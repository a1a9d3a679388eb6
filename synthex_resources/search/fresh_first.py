"""Newer statements first: a wrapper strategy that moves a hit above an older hit saying the same thing.

A knowledge update ("I have three bikes" in March, "I just got a fourth bike" in May) leaves two turns
that both match the question; a ranking by relevance alone puts either first, and an agent reading the
first hit then answers with the stale fact (LongMemEval's knowledge-update questions; freshness, design
doc §9.2). This strategy runs its ``inner`` strategy, then, among the top ``window`` hits, lifts each hit
just above the best-ranked hit that is older (an earlier ``created_at``) and says the same thing: the
cosine of their two vectors reaches ``same_cosine`` (near-duplicate statements of one fact). Nothing else
moves, so a hit never leaves the top ``window`` and hits that state different things keep their order;
hits without a date or a vector take no part. No model beyond the vectors already stored.

Invariant: the hits are the inner strategy's, permuted within its top ``window`` (the set of the top
``window`` and everything after it unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from synthex_resources.search.strategies import DrillDown, SearchStrategy, param
from synthex_resources.search.types import SearchBackend, SearchHit, SearchRequest, SearchResults

if TYPE_CHECKING:  # numpy is imported where a search runs: the registry (loaded by `--help`) needs none
    import numpy as np


def newer_first(hits: list[SearchHit], vectors: dict[str, np.ndarray], same_cosine: float) -> list[SearchHit]:
    """``hits`` with each one moved just above the first-ranked older hit whose vector's cosine with its own
    reaches ``same_cosine``; taken in rank order, so of three statements of one fact the newest ends first."""
    import numpy as np

    order = list(hits)
    unit = {hit_id: v / n for hit_id, v in vectors.items() if (n := float(np.linalg.norm(v))) > 0}
    for hit in list(order):
        if not hit.created_at or hit.id not in unit:
            continue
        at = order.index(hit)
        mine = unit[hit.id]
        for above in range(at):
            other = order[above]
            if (other.created_at and other.created_at < hit.created_at and other.id in unit
                    and float(unit[other.id] @ mine) >= same_cosine):
                order.insert(above, order.pop(at))
                break
    return order


@dataclass(frozen=True, kw_only=True)
class FreshFirst(SearchStrategy):
    """``inner``'s ranking with newer statements of the same thing first (module docstring)."""

    kind: ClassVar[str] = "fresh-first"

    inner: SearchStrategy = param(DrillDown(), doc="the strategy whose ranking is reordered")
    window: int = param(10, low=2, doc="the top hits reordered (none leaves them)")
    same_cosine: float = param(0.6, low=0.0, high=1.0, doc="cosine of two hits' vectors from which they state "
                                                            "the same thing (the newer one then ranks first)")

    @property
    def takes_metadata_filter(self) -> bool:  # type: ignore[override]
        return self.inner.takes_metadata_filter

    @property
    def ranks_searched_records(self) -> bool:  # type: ignore[override]
        return self.inner.ranks_searched_records

    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        import numpy as np

        inner = self.inner if self.reranker is None else replace(self.inner, reranker=self.reranker)
        found = inner.search(engine, request)
        top = list(found[: self.window])
        rows = engine.store.records.rows_by_id([h.id for h in top], ["id", "vector"]) if len(top) > 1 else {}
        vectors = {i: np.asarray(r["vector"], dtype=np.float32) for i, r in rows.items() if r.get("vector") is not None}
        return SearchResults(newer_first(top, vectors, self.same_cosine) + list(found[self.window:]),
                             found.warnings, found.mode)
