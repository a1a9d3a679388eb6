"""The base of every search strategy: a frozen dataclass whose fields are its parameters, validated when built
(as LanceDB's ``lancedb.rerankers`` are: ``RRFReranker(K=60)``, ``LinearCombinationReranker(weight=0.7)``).

- ``SearchStrategy``: name, description, the fusion it uses (``fusion``), its parameters (dataclass fields,
  declared with ``param`` and checked in ``__post_init__``: a wrong type, a value out of range or an unknown
  option is one ``PipelineDefinitionError`` line) and ``search(engine, request)``, which the engine calls with
  the public ``SearchBackend`` (search/types.py).
- A variant is ``strategy.with_(param=value)`` (validated again), e.g. the ablations in
  evals/ablations/conversational.py.

Cheap to import (no numpy, no LanceDB): the registry, which ``synthex search --help`` loads, imports it.
"""

from __future__ import annotations

import types
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, ClassVar, NoReturn

from synthex.core.errors import PipelineDefinitionError
from synthex_resources.search.types import (
    Fusion,
    Reranker,
    SearchBackend,
    SearchHit,
    SearchRequest,
    SearchResults,
    SearchWarning,
)


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

