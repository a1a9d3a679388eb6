"""The drill-down keys: each altitude record's key tokens and key function (``group.key``, ``group.by`` of a
key aggregate), per (table version, scope filter), on the versioned base; search/strategies/hierarchical_drill_down.py reads them
(a question naming a record's key, the named speaker)."""

from __future__ import annotations

import json
from typing import Any

from synthex_resources.search.indexes.versioned import VersionedStructure
from synthex_resources.search.tokenize import tokenize
from synthex_resources.store.pinned import PinnedDataset


class DrillDownKeys(VersionedStructure[str, dict[str, tuple[frozenset[str], str]]]):
    """Each altitude record's key tokens and key function (``group.key``, ``group.by`` of a key
    aggregate), per (table version, scope filter); the store's ``search_state.drill_down_keys``. Kept in
    memory only (one read of ``id, metadata``)."""

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> dict[str, tuple[frozenset[str], str]]:
        rows = read.rows(key, ["id", "metadata"]) if read is not None else []  # the version keyed by
        found = {}
        for row in rows:
            group = json.loads(row["metadata"] or "{}").get("group") or {}
            name = group.get("key")
            tokens = frozenset(tokenize(str(name))) if name else frozenset()
            if tokens:
                found[row["id"]] = (tokens, str(group.get("by") or ""))
        return found
