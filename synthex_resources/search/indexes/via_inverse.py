"""The via inverse of a leaf-sum scope: leaf position -> the searched records standing for it, per (table
version of the scope, scope filter), on the versioned base; search/via.py names a hit's ``via`` from it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from synthex_resources.search.indexes.versioned import VersionedStructure
from synthex_resources.store.pinned import PinnedDataset


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
