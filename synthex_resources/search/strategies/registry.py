"""The one registry of named search strategies that every door (CLI, MCP, the Python API, the Dagster
resource, evals) lists its modes from.

``load_search_strategies()``: a fresh ``StrategyRegistry``, filled through ``register_search_strategies(registry)``
of the built-in module (search/strategies/builtin.py) and of every installed plugin (``synthex.core.plugins``);
a plugin that fails is on ``registry.failures``. Cheap to load: the strategies' algorithms are imported at
their first search, so ``synthex search --help`` lists the modes without numpy, scipy or LanceDB.
"""

from __future__ import annotations

from synthex.core import hookspecs
from synthex.core.errors import PipelineDefinitionError
from synthex.core.plugins import Registry, populate
from synthex_resources.search.strategies.base import SearchStrategy

HOOK = hookspecs.register_search_strategies
BUILTINS = ("synthex_resources.search.strategies.builtin",)


class StrategyRegistry(Registry[SearchStrategy]):
    """Named search strategies. Registering checks that the item is a ``SearchStrategy`` named as
    registered, so a plugin's mistake is its own one-line failure, not an error at search time."""

    def __init__(self) -> None:
        super().__init__("search strategy")

    def register(self, name: str, item: SearchStrategy, *, by: str | None = None) -> SearchStrategy:
        if not isinstance(item, SearchStrategy):
            raise PipelineDefinitionError(f"search strategy {name!r}: expected a SearchStrategy instance, "
                                          f"got {type(item).__name__}")
        if item.name != name:
            raise PipelineDefinitionError(f"search strategy {name!r}: the strategy is named {item.name!r}; "
                                          f"register it under its name")
        return super().register(name, item, by=by)

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
