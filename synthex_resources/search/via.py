"""Which searched records a drilled-down hit was reached through (``SearchHit.via``).

A strategy that ranks leaves (``conversational``, ``hierarchical``: search/leaf_fusion.py,
search/drill_down.py) scores the records of the searched steps (summaries, monthly reflections, key
aggregates, turns in context) and returns the leaves they stand for: a hit's own step is then not one
of the searched steps. So that a hit still says at which altitude it was found, it names, per searched
step (in the order searched), the records of that step that stand for it: ``Via(id, step, leaves)``,
the most specific first (fewest leaves, then id), at most ``PER_STEP`` per step. Hits of the searched
steps themselves (hybrid, bm25, dense) have none.

Read from the same per-scope bookkeeping the fusions use (search/indexes/leaf_scope.py, cached per table version);
the leaf -> records inversion is built once per (version, scope) and kept beside it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from synthex.core.scope import BranchScope
from synthex_resources.search.indexes.leaf_scope import scope_for
from synthex_resources.search.indexes.versioned import VersionedStructure
from synthex_resources.search.types import SearchHit, Via
from synthex_resources.store.pinned import PinnedDataset

if TYPE_CHECKING:
    from synthex_resources.search.types import SearchBackend

PER_STEP = 3  # a turn can sit in dozens of topic aggregates; the most specific few say where it was found


class ViaInverses(VersionedStructure[str, dict[int, list[tuple[int, str]]]]):
    """Per (table version of the scope, scope filter): leaf position -> [(leaves of the record, record id)],
    sorted; the store's ``search_state.via``. The context of each ask is the scope's bookkeeping (one per
    version and filter in ``search_state.scopes``, so the version names it)."""

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> dict[int, list[tuple[int, str]]]:
        inverse: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for rid, positions in context.leaves_of.items():
            for pos in positions:
                inverse[pos].append((len(positions), rid))
        for entries in inverse.values():
            entries.sort()
        return dict(inverse)


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
