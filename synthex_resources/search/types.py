"""What every part of search shares: hits, the request a strategy answers, the engine's surface as the
strategies see it, rerankers and the warnings a search reports.

It sits below the engine and every fusion (``engine`` -> strategies -> ``conversational_fusion`` / ``conversational_multihop`` /
``leaf_scope`` -> this module), so none of them imports the engine: the fusions reach it through the
``SearchBackend`` protocol, which ``SearchEngine`` implements.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from synthex.core.record import Record
from synthex.core.scope import BranchScope
from synthex_resources.store.filters import RecordFilter

if TYPE_CHECKING:
    import numpy as np

    from synthex_resources.record_store import RecordStore

log = logging.getLogger("synthex.search")


class Fusion(StrEnum):
    """How a strategy turns its candidate lists into one ranking (what ``synthex search --help`` shows)."""

    SINGLE = "single"  # one candidate list, its own scores (BM25 score / cosine)
    RRF = "rrf"  # reciprocal rank fusion of the records' ranks in each list
    LEAF_SUM = "leaf-sum"  # records lend their normalized scores to their leaves (turns), summed
    DRILL_DOWN = "drill-down"  # aggregates scored at their altitude lift their leaves' own scores
    CUSTOM = "custom"  # a plugin's own


class Leg(StrEnum):
    """A first-stage candidate list."""

    LEXICAL = "lexical"  # BM25 over the FTS index (or in memory on an encrypted store)
    DENSE = "dense"  # cosine over the vectors


class Decompose(StrEnum):
    """Multi-hop (a): how the scores of a question's parts are combined (search/strategies/conversational_multihop.py)."""

    NONE = "none"
    SUM = "sum"  # their mean: every part counts
    MAX = "max"  # their best

    def __bool__(self) -> bool:  # ``if strategy.decompose:`` reads "is it on"
        return self is not Decompose.NONE


class Diversify(StrEnum):
    """Multi-hop (d): how the top k is re-selected for coverage (search/strategies/conversational_multihop.py)."""

    NONE = "none"
    MMR = "mmr"  # maximal marginal relevance on the turns' own embeddings
    SESSION = "session"  # a turn discounted per turn of its session already taken

    def __bool__(self) -> bool:
        return self is not Diversify.NONE


@dataclass(frozen=True)
class Via:
    """A searched record a drilled-down hit was reached through (search/via.py): its id, its step (the
    altitude) and how many leaves it stands for."""

    id: str
    step: str
    leaves: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "step": self.step, "leaves": self.leaves}


@dataclass
class SearchHit(Record):
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)  # rank in each candidate list (1-based)
    collapsed: list[str] = field(default_factory=list)  # near-duplicate ids folded into this hit
    # A leaf a fusion drilled down to: the searched records that stand for it, per searched step (search/via.py)
    via: list[Via] = field(default_factory=list)

    def to_hit_dict(self) -> dict[str, Any]:
        return {"id": self.id, "step": self.step, "branch": self.branch, "score": round(self.score, 6),
                "content": self.content, "sources": list(self.source_ids), "metadata": self.metadata,
                "period": self.period, "ranks": self.ranks, "collapsed": self.collapsed,
                "via": [v.to_dict() for v in self.via]}


class SearchProblem(StrEnum):
    """What went wrong in a search that still answered (the hits are in first-stage order)."""

    RERANK_CALL_FAILED = "rerank-call-failed"  # the reranker's model call raised
    RERANK_UNUSABLE_REPLY = "rerank-unusable-reply"  # the reply named none of the listed hits


@dataclass(frozen=True)
class SearchWarning:
    problem: SearchProblem
    source: str  # what reported it (the reranker's name)
    detail: str = ""  # the error line or the start of the reply

    def __str__(self) -> str:
        what = {SearchProblem.RERANK_CALL_FAILED: "its model call failed",
                SearchProblem.RERANK_UNUSABLE_REPLY: "its reply named none of the hits"}[self.problem]
        detail = f" ({self.detail})" if self.detail else ""
        return f"reranker {self.source!r} kept the first-stage order: {what}{detail}"


class SearchResults(list[SearchHit]):
    """The hits, best first (a list), and the warnings of the search that found them (``warnings``):
    a reranker that failed is said here, not swallowed. ``mode``: the strategy that ranked them ("exact"
    for verbatim search) as a door resolved it (``search_memory``; empty from the engine itself)."""

    def __init__(self, hits: Iterable[SearchHit] = (), warnings: Iterable[SearchWarning] = (), mode: str = "") -> None:
        super().__init__(hits)
        self.warnings: tuple[SearchWarning, ...] = tuple(warnings)
        self.mode = mode


@dataclass(frozen=True)
class Reranked:
    hits: list[Any]
    warning: SearchWarning | None = None


class Reranker(ABC):
    """Reorders a strategy's candidates with a second, costlier judgement (one model call per query).

    A strategy gives it its own pool: every fused candidate (record fusions) or the top ``top_n`` leaves
    (leaf-sum); the top ``k`` are cut after it. A reranker that cannot rank returns the hits in their
    order with a ``SearchWarning``; the search passes it on (``SearchResults.warnings``)."""

    name: str = "reranker"
    top_n: int = 20  # how many of the first-stage hits it reorders (the rest follow unchanged)

    @abstractmethod
    def rerank(self, query: str, hits: Sequence[Any]) -> Reranked: ...


@dataclass(frozen=True)
class SearchRequest:
    """One search, as the engine hands it to a strategy (``where``: the prefilter of steps, branch,
    periods and metadata, built by the engine)."""

    query: str
    steps: list[str] | None
    scope: BranchScope  # the branch read, with the branches serving the steps it inherits
    k: int
    where: str
    rows: RecordFilter  # ``where`` as a typed filter (store/filters.py writes the SQL)
    periods: list[str] | None = None
    metadata: dict[str, Any] | None = None
    query_vector: np.ndarray | None = None
    as_of: datetime | str | None = None


class SearchBackend(Protocol):
    """What a strategy (search/strategies/base.py) and the fusions it runs get to search with: the engine
    (``synthex_resources.search.engine.SearchEngine``) as a public interface, nothing private. A strategy
    receives it with its ``SearchRequest`` and reads everything else through it: the candidate lists of
    the two legs, the search's filter, the store (its rows; ``store.search_state``: the structures kept
    per table version, search/state.py), and the helpers that turn rows into hits."""

    store: RecordStore

    def where(self, steps: list[str] | None, scope: BranchScope, periods: list[str] | None = None,
              metadata: dict[str, Any] | None = None) -> str:
        """The SQL prefilter of these steps, branch scope, periods and metadata (what the legs take)."""
        ...

    def submit(self, fn: Callable[[], Any]) -> Future:
        """``fn`` run on the search pool, reading the same table version as the search that submits it."""
        ...

    def query_vector_future(self, query: str) -> Future:
        """The query's embedding, computed on the pool."""
        ...

    def lexical_future(self, query: str, where: str, n: int) -> Future:
        """``lexical`` as a future (answered at once when the persisted postings serve the store)."""
        ...

    def lexical(self, query: str, where: str, n: int) -> list[tuple[str, float]]:
        """BM25 top ``n`` (id, score) among the rows of ``where``, best first, ties by id."""
        ...

    def dense(self, query: str, where: RecordFilter, n: int, vector: np.ndarray | None = None,
              steps: list[str] | None = None, scope: BranchScope | None = None, periods: list[str] | None = None,
              in_memory: bool = True) -> list[tuple[str, float]]:
        """Cosine top ``n`` (id, similarity), ties by id (``in_memory``: the matrix, else LanceDB's scan)."""
        ...

    def collapse_near_duplicates(self, order: list[str], threshold: float | None, want: int,
                                 in_memory: bool) -> tuple[list[str], dict[str, list[str]]]:
        """Walk the ranked ids ``order`` and fold each into an earlier kept one whose vector is above
        ``threshold`` cosine (None: no folding), until ``want`` are kept: (kept ids, kept id -> the ids
        folded into it)."""
        ...

    @staticmethod
    def metadata_matches(rec: Record, metadata: dict[str, Any] | None) -> bool:
        """Whether ``rec`` holds every (dotted key, value) of ``metadata`` exactly (the SQL prefilter on the
        stored JSON is approximate; this check is the exact one)."""
        ...

    def hit(self, row: dict[str, Any], score: float, ranks: dict[str, int]) -> SearchHit:
        """The hit of a stored row (decrypted when the store is), with its score and per-leg ranks."""
        ...
