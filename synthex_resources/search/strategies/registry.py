"""Search strategies: one class per fusion on one base, parameters validated when built (as LanceDB's
``lancedb.rerankers`` are: ``RRFReranker(K=60)``, ``LinearCombinationReranker(weight=0.7)``), and one
registry of named strategies that every door (CLI, MCP, the Python API, the Dagster resource, evals)
lists its modes from.

- ``SearchStrategy``: name, description, the fusion it uses (``fusion``), its parameters (dataclass fields,
  checked in ``__post_init__``: a wrong type, a value out of range or an unknown option is one
  ``PipelineDefinitionError`` line) and ``search(engine, request)``, which the engine calls.
- ``RecordFusion``: strategies that rank records from first-stage candidate lists (``candidates``) fused
  by ``fuse``: ``LexicalOnly``, ``DenseOnly``, ``RRFHybrid``.
- ``LeafSum``: ranks leaves (turns) through the records that stand for them (the ``conversational``
  strategy); its algorithm is search/strategies/conversational_fusion.py, loaded at its first search (numpy, scipy), so the
  registry itself is cheap to load (``synthex search --help`` lists it).
- ``DrillDown``: scores records at a higher altitude (key aggregates) and drills down to their leaf turns,
  fused with a ``LeafSum`` turn leg (the ``hierarchical`` strategy; search/strategies/hierarchical_drill_down.py, loaded at its
  first search).
- ``load_search_strategies()``: the registry, filled through ``register_search_strategies(registry)`` of
  the built-in module (search/strategies/builtin.py) and of every installed plugin
  (``synthex.plugins``); a plugin that fails is on ``registry.failures``.

A variant is ``strategy.with_(param=value)`` (validated again), e.g. the ablations in
evals/ablate_conversational.py.
"""

from __future__ import annotations

import types
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, ClassVar, NoReturn

from synthex.core import hookspecs
from synthex.core.errors import PipelineDefinitionError
from synthex.core.plugins import Registry, populate
from synthex_resources.search.types import (
    Decompose,
    Diversify,
    Fusion,
    Leg,
    Reranker,
    SearchBackend,
    SearchHit,
    SearchRequest,
    SearchResults,
    SearchWarning,
)

HOOK = hookspecs.register_search_strategies
BUILTINS = ("synthex_resources.search.strategies.builtin",)


def param(default: Any, *, low: float | None = None, high: float | None = None, doc: str = "") -> Any:
    """A strategy parameter: its default, the inclusive range it must lie in (numbers) and what it does."""
    return field(default=default, metadata={"low": low, "high": high, "doc": doc})


def _type_name(expected: Any) -> str:
    if isinstance(expected, type):
        return expected.__name__
    return " | ".join("None" if a is type(None) else _type_name(a) for a in typing.get_args(expected))


@dataclass(frozen=True, kw_only=True)
class SearchStrategy(ABC):
    """A named way to rank records for a query. Subclasses are frozen dataclasses whose fields are their
    parameters (declare them with ``param``); ``search`` is the fusion."""

    fusion: ClassVar[Fusion] = Fusion.CUSTOM
    kind: ClassVar[str] = "strategy"  # the class's short name: the default ``name``, and in messages
    takes_metadata_filter: ClassVar[bool] = True  # False: a metadata filter would cut its top k silently
    # True: its hits are records of the searched steps, ranked (surface search). False: it returns other
    # records reached through them (leaves a drill-down or leaf-sum lands on); a search that names a step
    # but no mode then does not take it as its default (``StrategyRegistry.resolve``).
    ranks_searched_records: ClassVar[bool] = True

    name: str = ""  # the registry's name for it (default: ``kind``)
    description: str = ""  # one line for help texts and the MCP tool
    reranker: Reranker | None = None  # reorders the strategy's own candidate pool, then the top k is cut

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.kind)
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = self._checked(f.name, getattr(self, f.name), hints[f.name])
            low, high = f.metadata.get("low"), f.metadata.get("high")
            if isinstance(value, int | float) and not isinstance(value, bool):
                if (low is not None and value < low) or (high is not None and value > high):
                    span = (f"between {low} and {high}" if low is not None and high is not None
                            else f"at least {low}" if low is not None else f"at most {high}")
                    self._refuse(f"{f.name} must be {span} (got {value!r})")
            object.__setattr__(self, f.name, value)

    def _refuse(self, problem: str) -> NoReturn:
        raise PipelineDefinitionError(f"search strategy {self.name!r} ({type(self).__name__}): {problem}")

    def _checked(self, name: str, value: Any, expected: Any) -> Any:
        """``value`` if it is of the declared type (an enum's value string becomes the member)."""
        options = typing.get_args(expected) if isinstance(expected, types.UnionType) else (expected,)
        for option in options:
            if option is type(None):
                if value is None:
                    return value
            elif option is float:
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return value
            elif option is int:
                if isinstance(value, int) and not isinstance(value, bool):
                    return value
            elif isinstance(option, type) and issubclass(option, Enum):
                if isinstance(value, option):
                    return value
                try:
                    return option(value)
                except ValueError:
                    self._refuse(f"{name} must be one of {', '.join(repr(m.value) for m in option)} (got {value!r})")
            elif isinstance(option, type) and isinstance(value, option):
                return value
        self._refuse(f"{name} must be {_type_name(expected)} (got {type(value).__name__} {value!r})")

    # -- what it is ------------------------------------------------------------------------------
    def parameters(self) -> dict[str, Any]:
        """Its parameters and their values (name, description and reranker excluded)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("name", "description", "reranker")}

    def with_(self, **changes: Any) -> SearchStrategy:
        """The same strategy with some parameters changed (validated like the original)."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            self._refuse(f"no parameter {', '.join(map(repr, unknown))}; parameters: {', '.join(sorted(known))}")
        return replace(self, **changes)

    # -- what it does ----------------------------------------------------------------------------
    @abstractmethod
    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        """The top ``request.k`` hits for ``request`` (``engine``: the retrieval primitives)."""

    def rerank(self, query: str, hits: list[SearchHit]) -> tuple[list[SearchHit], list[SearchWarning]]:
        """``hits`` as the reranker orders them (unchanged without one), and its warning if it could not."""
        if self.reranker is None:
            return hits, []
        out = self.reranker.rerank(query, hits)
        return list(out.hits), [out.warning] if out.warning is not None else []


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


@dataclass(frozen=True, kw_only=True)
class LeafSum(SearchStrategy):
    """Ranks leaves (turns) through the records that stand for them (search/strategies/conversational_fusion.py, its
    algorithm): the ``conversational`` strategy. Takes step, branch and period filters, not metadata
    filters (they would silently cut the top k)."""

    fusion: ClassVar[Fusion] = Fusion.LEAF_SUM
    kind: ClassVar[str] = "leaf-sum"
    takes_metadata_filter: ClassVar[bool] = False
    ranks_searched_records: ClassVar[bool] = False

    lexical: bool = param(True, doc="score the searched records with BM25")
    dense: bool = param(True, doc="score the searched records by cosine")
    lexical_pool: int = param(50, low=1, doc="records taken from BM25 (the dense leg scores every record in scope)")
    lexical_weight: float = param(1.0, low=0.0, doc="weight of the records' normalized BM25 scores")
    dense_weight: float = param(1.0, low=0.0, doc="weight of the records' normalized cosine")
    leaf_dense_weight: float = param(0.0, low=0.0, doc="weight of the cosine of the leaves' own text")
    neighbour_weight: float = param(0.0, low=0.0, doc="share of the better adjacent turn's score a turn receives")
    date_weight: float = param(0.0, low=0.0, doc="bonus (x the top score) for turns inside a date the query names")
    drop_participants: bool = param(False, doc="drop the conversation's speakers' names from the query")
    relative_dates: bool = param(True, doc="resolve relative dates ('last week') against the search's as_of, "
                                           "and season/span forms ('the summer of 2022') without one")
    # Multi-hop strategies (search/strategies/conversational_multihop.py), all off by default; measured in docs/benchmarks.md.
    decompose: Decompose = param(Decompose.NONE, doc="score the question's parts and combine them")
    decompose_weight: float = param(0.5, low=0.0, doc="x the top score, for the combined parts' normalized scores")
    entity_weight: float = param(0.0, low=0.0, doc="credit for turns sharing rare terms/entities with the top hits")
    ppr_weight: float = param(0.0, low=0.0, doc="personalized PageRank over turns + rare terms, seeded by the top hits")
    expand_seeds: int = param(5, low=1, doc="how many first-stage hits seed the entity expansion and PageRank")
    ppr_restart: float = param(0.5, low=0.0, high=1.0, doc="PageRank restart probability (to the seeds)")
    rare_df: int = param(5, low=1, doc="a term is rare when at most this many turns use it (entities: 4x)")
    diversify: Diversify = param(Diversify.NONE, doc="re-select the top k for coverage")
    diversify_pool: int = param(3, low=1, doc="diversify among the top (pool x k) candidates")
    mmr_lambda: float = param(0.7, low=0.0, high=1.0, doc="MMR: weight of relevance against redundancy")
    session_penalty: float = param(0.3, low=0.0, high=1.0,
                                   doc="session: score x (1 - penalty) per turn of its session already taken")

    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        if request.metadata:
            raise ValueError("leaf-sum search (the conversational recipe) takes step, branch and period "
                             "filters, not metadata filters")
        # Imported here: leaf-sum search needs numpy and scipy, the registry (loaded by `--help`) does not.
        from synthex_resources.search.strategies.conversational_fusion import leaf_sum_search

        return leaf_sum_search(engine, request.query, request.steps, request.scope, request.k, self,
                               request.periods, request.as_of)


@dataclass(frozen=True, kw_only=True)
class DrillDown(SearchStrategy):
    """Scores records at a higher altitude (key aggregates, sessions: records standing for several
    leaves) and drills down to their leaf turns, fused with the turns' own scores from a leaf-sum recipe
    (search/strategies/hierarchical_drill_down.py, its algorithm): the ``hierarchical`` strategy. Takes step, branch and period
    filters, not metadata filters."""

    fusion: ClassVar[Fusion] = Fusion.DRILL_DOWN
    kind: ClassVar[str] = "drill-down"
    takes_metadata_filter: ClassVar[bool] = False
    ranks_searched_records: ClassVar[bool] = False

    turns: LeafSum = param(LeafSum(), doc="the turn leg: a leaf-sum recipe over the turn-level steps")
    altitude_weight: float = param(0.25, low=0.0, doc="x a turn's score per unit of its aggregates' scores")
    altitude_lexical_pool: int = param(50, low=1, doc="aggregates taken from BM25 per altitude step")
    altitude_dense_weight: float = param(1.0, low=0.0, doc="weight of the aggregates' cosine against BM25")
    key_weight: float = param(0.0, low=0.0, doc="score of an aggregate whose key the question names (off: "
                                                "it lifted the wrong speaker on LoCoMo's adversarial questions)")
    speaker_weight: float = param(0.0, low=0.0, doc="x (1 + this) for the turns of the one speaker the question "
                                                    "names (a speaker aggregate's key; off: none or several named)")
    expansion_weight: float = param(0.0, low=0.0, doc="x (1 + this x share of the best) for turns holding the query's "
                                                      "words or their nearest words in the memory's vocabulary")
    expansion_similarity: float = param(0.4, low=0.0, high=1.0, doc="cosine from which a vocabulary word counts as "
                                                                   "a query word's neighbour")

    def search(self, engine: SearchBackend, request: SearchRequest) -> SearchResults:
        if request.metadata:
            raise ValueError("drill-down search (the hierarchical recipe) takes step, branch and period "
                             "filters, not metadata filters")
        # Imported here: drill-down search needs numpy and scipy, the registry (loaded by `--help`) does not.
        from synthex_resources.search.strategies.hierarchical_drill_down import drill_down_search

        config = self if self.reranker is None else replace(self, turns=self.turns.with_(reranker=self.reranker))
        return drill_down_search(engine, request, config)


# -- the registry -----------------------------------------------------------------------------------
class StrategyRegistry(Registry[SearchStrategy]):
    """Named search strategies. Registering checks that the item is a ``SearchStrategy`` named as
    registered, so a plugin's mistake is its own one-line failure, not an error at search time."""

    def __init__(self) -> None:
        super().__init__("search strategy")

    def register(self, name: str, item: SearchStrategy, *, replace: bool = False) -> SearchStrategy:
        if not isinstance(item, SearchStrategy):
            raise PipelineDefinitionError(f"search strategy {name!r}: expected a SearchStrategy instance, "
                                          f"got {type(item).__name__}")
        if item.name != name:
            raise PipelineDefinitionError(f"search strategy {name!r}: the strategy is named {item.name!r}; "
                                          f"register it under its name")
        return super().register(name, item, replace=replace)

    def resolve(self, mode: str | None, default: str, *, at_named_step: bool) -> SearchStrategy:
        """The strategy a search uses; every door's search comes here (``search_memory``).

        - a mode named: that strategy, over the steps the search reads (named or the output's). A drill-down
          named with a step scores that step's records and returns the leaves they stand for, each with
          ``via`` naming the step's records it was reached through (what the evals ask for);
        - no mode, no step: ``default`` (the search output's ``mode=``, e.g. the template's drill-down);
        - no mode, a step named: surface search at that step (design §6.2): ``default`` if it ranks the
          searched records themselves, else ``DEFAULT_SEARCH_MODE`` (hybrid); ``hit.sources()`` and
          ``hit.leaves()`` drill down from there.
        An unknown name is one line naming the known ones."""
        from synthex.core.naming import DEFAULT_SEARCH_MODE

        name = mode or default
        if name not in self:
            raise PipelineDefinitionError(f"unknown search mode {name!r}; expected one of {', '.join(self.names())}")
        strategy = self.get(name)
        if mode is None and at_named_step and not strategy.ranks_searched_records:
            return self.get(DEFAULT_SEARCH_MODE)
        return strategy

    def describe(self) -> str:
        """``name: description`` of each, for help texts."""
        return "; ".join(f"{name}: {s.description}" if s.description else name for name, s in self.items())


def load_search_strategies() -> StrategyRegistry:
    """The built-in strategies, then every installed plugin's (``register_search_strategies``). A fresh
    registry per call: a caller with a lifetime (``ProjectApp``, ``SearchResource``) keeps its own."""
    registry = StrategyRegistry()
    populate(registry, HOOK, builtins=BUILTINS)
    return registry
