"""Which searched records a drilled-down hit was reached through (``SearchHit.via``).

A strategy that ranks leaves (``conversational``, ``hierarchical``: search/strategies/conversational_fusion.py,
search/strategies/hierarchical_drill_down.py) scores the records of the searched steps (summaries, monthly reflections, key
aggregates, turns in context) and returns the leaves they stand for: a hit's own step is then not one
of the searched steps. So that a hit still says at which altitude it was found, it names, per searched
step (in the order searched), the records of that step that stand for it: ``Via(id, step, leaves)``,
the most specific first (fewest leaves, then id), at most ``PER_STEP`` per step. Hits of the searched
steps themselves (hybrid, bm25, dense) have none.

Read from the same per-scope bookkeeping the fusions use (search/indexes/leaf_scope.py, cached per table version);
the leaf -> records inversion is built once per (version, scope) and kept beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from synthex.core.scope import BranchScope
from synthex_resources.search.indexes.leaf_scope import scope_for
from synthex_resources.search.types import SearchHit, Via

if TYPE_CHECKING:
    from synthex_resources.search.types import SearchBackend

PER_STEP = 3  # a turn can sit in dozens of topic aggregates; the most specific few say where it was found


def annotate_via(engine: SearchBackend, hits: list[SearchHit], steps: list[str] | None, reads: BranchScope,
                 periods: list[str] | None) -> None:
    """Set ``via`` on each hit that is not a record of the searched ``steps`` (a leaf a fusion drilled to)."""
    searched = list(steps or [])
    drilled = [h for h in hits if h.step not in searched]
    if not drilled or not searched:
        return
    inverses = engine.store.search_state.via
    for step in searched:
        where = engine.where([step], reads, periods)
        scope = scope_for(engine, where)
        if not scope.leaves_of:
            continue
        inverse = inverses.get(scope.read, where, scope)
        for hit in drilled:
            pos = scope.index_of.get(hit.id)
            if pos is None:
                continue
            hit.via.extend(Via(id=rid, step=step, leaves=n) for n, rid in inverse.get(pos, [])[:PER_STEP])
