"""Leaf-sum bookkeeping per search scope: which leaves (turns) each searched record stands for, the
turns' order and adjacency, speakers and times (search/strategies/conversational_fusion.py reads it).

Built once per table version and scope, from the rows. At 1M records a full build reads every row's
sources and metadata (tens of seconds here, docs/benchmarks.md), so a scope of ``INCREMENTAL_FROM``
leaves or more is *extended* after a write instead: when the new version only added fragments and
deleted rows (what an upsert does), the rows of the new fragments are read, the leaves they bring are
appended, and each new turn is linked after the last turn of its session when it is not older than
it. What an extension does not redo, and a full build would: rows deleted since keep their leaf (a
deleted record is not returned: the hits are read back from the table, and its legs' scores are
gone), a turn written into the middle of a session is not linked to its neighbours, and ties between
appended turns are broken by write order rather than by (time, id). A rewrite of fragments
(compaction, ``tbl.optimize()``) brings a full build.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from synthex.core.periods import parse_timestamp
from synthex.core.scope import BranchScope
from synthex_resources.search.indexes.dense_index import dense_index
from synthex_resources.search.indexes.id_lookup import GroupLookup, IdLookup, as_text, merged_order
from synthex_resources.search.indexes.sidecar import Entry, Sidecar
from synthex_resources.search.indexes.versioned import EXTEND, LOAD, VersionedStructure
from synthex_resources.search.tokenize import tokenize
from synthex_resources.store.filters import RecordFilter
from synthex_resources.store.pinned import PinnedDataset
from synthex_resources.store.schemas import LIGHT_COLUMNS, RECORDS

if TYPE_CHECKING:
    from synthex_resources.search.types import SearchBackend as SearchEngine  # the engine, as fusions see it

INCREMENTAL_FROM = 5_000  # leaves: below this a full build is quick (~0.5 s here) and exact
# A scope of at most this many leaves keeps its leaves' rows in memory once a search has read them all (one
# read), so the next searches of that table version read no rows for their hits: an eval's conversation
# asks ~200 questions of one version, and the per-search read was ~11 ms of ~40 (docs/benchmarks.md).
# Past ``ROWS_KEPT_CHARS`` of text (long leaves) nothing is kept and every search reads its hits' rows.
ROWS_KEPT_LEAVES = 2_000
ROWS_KEPT_CHARS = 16_000_000
_COLUMNS = ["id", "sources", "step", "metadata", "created_at"]


@dataclass
class Scope:
    leaf_ids: list[str]
    # Lookups over arrays (search/indexes/id_lookup.py), not dicts: at 1M leaves building the dicts was most of a new
    # process's first query. Their sort orders are persisted with the scope.
    index_of: IdLookup  # leaf id -> position
    leaves_of: GroupLookup  # searched record id -> positions of its leaves
    leaf_steps: list[str]
    prev: np.ndarray  # position of the previous turn in the same session, -1 if none
    next: np.ndarray
    times: np.ndarray  # epoch seconds of time.created_at (NaN when unknown)
    participants: set[str]  # lower-cased name tokens of the speakers
    tiebreak: np.ndarray  # rank of each leaf by (time, id): equal scores order the same whatever the ingest
    pairs: dict[str, tuple[np.ndarray, np.ndarray, bool]]  # dense scope -> (rows, leaf positions, 1:1?)
    fragments: frozenset[int] = frozenset()  # Lance fragments the rows were read from
    tails: dict[tuple[str, str], int] = field(default_factory=dict)  # (conversation, session) -> its last turn
    extended_from: list[str] | None = None  # the leaf_ids of the scope this one extends (None: a full build)
    # Identity of this bookkeeping and of the one it extends: a persisted multi-hop lexicon names the
    # scope it was made for (search/indexes/lexicon.py), across processes.
    token: str = field(default_factory=lambda: os.urandom(8).hex())
    base_token: str | None = None
    # The table version this bookkeeping was made of (None: no table), read by what is made from it (the
    # multi-hop lexicon, the word index): they key, read and save by this same version. Not persisted.
    read: PinnedDataset | None = field(default=None, repr=False, compare=False)
    # The leaves' light rows by the branch scope that read them (``None``: too long to keep), filled by
    # ``leaf_rows``; this object is one table version's, so the rows never go stale. Not persisted.
    kept_rows: dict[BranchScope, dict[str, dict[str, Any]] | None] = field(default_factory=dict, repr=False)
    _symmetric: bool | None = field(default=None, repr=False)  # ``links_symmetric``, once computed

    def links_symmetric(self) -> bool:
        """Whether every link goes both ways (``next[prev[i]] == i`` and ``prev[next[i]] == i``): then the
        turns next to a set of turns are their ``prev`` and ``next``, and neighbour credit can be given to
        them alone (search/strategies/conversational_fusion.py). Builds and extensions link both ways; checked once per scope."""
        if self._symmetric is None:
            back, ahead = np.flatnonzero(self.prev >= 0), np.flatnonzero(self.next >= 0)
            self._symmetric = bool((self.next[self.prev[back]] == back).all()
                                   and (self.prev[self.next[ahead]] == ahead).all())
        return self._symmetric

    def leaf_pairs(self, key: str, ids: np.ndarray, own: bool = False) -> tuple[np.ndarray, np.ndarray, bool]:
        """For a dense scope's ids (the same order every query at one table version): the leaf each row
        lends to, and whether every leaf gets at most one row (then plain assignment is exact)."""
        if key not in self.pairs:
            if own:
                found = self.index_of.rows(ids)
                rows = np.flatnonzero(found >= 0)
                positions = found[rows]
            else:
                rows, positions = self.leaves_of.pairs(ids)
            self.pairs[key] = (rows, positions, len(np.unique(positions)) == len(positions))
        return self.pairs[key]


def leaf_rows(engine: SearchEngine, scope: Scope, ids: list[str], reads: BranchScope) -> dict[str, dict[str, Any]]:
    """The light rows ``reads`` reads of the leaves ``ids`` (missing ids absent), as
    ``records.rows_by_id(ids, LIGHT_COLUMNS, scope=reads)`` gives them. A scope of at most
    ``ROWS_KEPT_LEAVES`` leaves reads all its leaves' rows at its first call and answers later calls from
    memory (the same rows: one table version, and rows_by_id keeps the first row of each id in table order
    whatever the id list)."""
    if len(scope.leaf_ids) > ROWS_KEPT_LEAVES or scope.extended_from is not None:
        return _rows_by_address(engine, ids, reads)

    def read_rows(wanted: list[str]) -> dict[str, dict[str, Any]]:
        if scope.read is None or reads.version is not None:  # no table, or a scope reading a version of its own
            return engine.store.records.rows_by_id(wanted, LIGHT_COLUMNS, scope=reads)
        # the version the scope was made of (the one the search reads): the rows kept on it never go stale
        return scope.read.rows_by_id(wanted, LIGHT_COLUMNS, within=RecordFilter(scope=reads))

    if reads not in scope.kept_rows:
        every = read_rows(scope.leaf_ids)
        chars = sum(len(row.get("content") or "") for row in every.values())
        scope.kept_rows[reads] = every if chars <= ROWS_KEPT_CHARS else None
        if scope.kept_rows[reads] is None:
            return {i: every[i] for i in ids if i in every}
    kept = scope.kept_rows[reads]
    if kept is None:
        return read_rows(ids)
    return {i: kept[i] for i in ids if i in kept}


def _rows_by_address(engine: SearchEngine, ids: list[str], reads: BranchScope) -> dict[str, dict[str, Any]]:
    """``records.rows_by_id(ids, LIGHT_COLUMNS, scope=reads)``, the rows the dense matrix can vouch for (an
    id's only row in the table, one ``reads`` reads: ``DenseIndex.row_addresses``) taken by their row
    addresses: at 1M records the filtered read of a query's ~10 hits cost ~30 ms of CPU, the take ~12
    (docs/benchmarks.md). The others are read as before."""
    version, addresses = dense_index(engine.store).row_addresses(ids, reads)
    rows: dict[str, dict[str, Any]] = {}
    ds = engine.store.dataset(RECORDS) if addresses else None
    if ds is not None and ds.version == version:  # the addresses are that version's (a search pins it)
        try:
            taken = ds._take_rows(list(addresses.values()), columns=LIGHT_COLUMNS).to_pylist()
        except (OSError, ValueError, AttributeError):  # an address this pylance cannot take: read them all
            taken = []
        rows = {r["id"]: r for r in taken if r["id"] in addresses}
    rest = [i for i in ids if i not in rows]
    if rest:
        rows |= engine.store.records.rows_by_id(rest, LIGHT_COLUMNS, scope=reads)
    return rows


def _natural(text: str) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


def _leaf_info(row: dict[str, Any]) -> tuple[str, str, dict, datetime | None]:
    meta = json.loads(row.get("metadata") or "{}")
    chat = meta.get("chat") or {}
    when = parse_timestamp((meta.get("time") or {}).get("created_at") or row.get("created_at"))
    return row["id"], row["step"], chat, when


def _order_key(x: tuple[str, str, dict, datetime | None]) -> tuple:
    # Turn order: by conversation and session, then time, then id with its numbers compared as numbers
    # (turns of one session often share a timestamp: "s_2" before "s_10"). Independent of ingest order.
    return (str(x[2].get("conversation_id", "")), str(x[2].get("session_id", "")),
            x[3].timestamp() if x[3] else 0.0, _natural(x[0]))


def _session_key(chat: dict) -> tuple[str, str] | None:
    return (str(chat["conversation_id"]), str(chat.get("session_id"))) if chat.get("conversation_id") else None


class _Resolved:
    """Record id -> leaf ids, for the records and leaves a scope already knows (looked up, not copied:
    a scope of 1M leaves would take a second to copy into a dict). ``prefetch`` looks a batch of ids up
    at once (one binary search each way); single lookups are cached."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.known: dict[str, list[str] | None] = {}  # id -> its leaves, None when the scope does not know it

    def prefetch(self, ids: list[str]) -> None:
        ids = [i for i in dict.fromkeys(ids) if i not in self.known]
        if not ids:
            return
        leaf_at = self.scope.index_of.rows(ids)
        group_at = self.scope.leaves_of.index.rows(ids)
        for rid, leaf, group in zip(ids, leaf_at.tolist(), group_at.tolist(), strict=True):
            if leaf >= 0:
                self.known[rid] = [rid]
            elif group >= 0:
                groups = self.scope.leaves_of  # the row ``rows`` found, not a second lookup by id
                self.known[rid] = [self.scope.leaf_ids[p] for p in groups.flat[groups.starts[group]:groups.starts[group + 1]]]
            else:
                self.known[rid] = None

    def __contains__(self, rid: str) -> bool:
        self.prefetch([rid])
        return self.known[rid] is not None

    def __getitem__(self, rid: str) -> list[str]:
        self.prefetch([rid])
        leaves = self.known[rid]
        if leaves is None:
            raise KeyError(rid)
        return leaves


def _walk(read: PinnedDataset, rows: dict[str, dict[str, Any]], searched: list[str],
          known: dict[str, list[str]] | _Resolved | None = None) -> dict[str, list[str]]:
    """Each searched record's leaves (ids), walking down ``sources`` (at ``read``'s version) until records
    without sources. ``known``: record id -> leaf ids already resolved (an extension's existing leaves and
    records)."""
    known = known or {}
    if isinstance(known, _Resolved):
        known.prefetch([*rows, *(s for r in rows.values() for s in r.get("sources") or [])])
    frontier = {s for r in rows.values() for s in r.get("sources") or [] if s not in rows and s not in known}
    while frontier:
        fetched = read.rows_by_id(sorted(frontier), _COLUMNS)  # any row of an id: same content
        rows |= fetched
        if isinstance(known, _Resolved):
            known.prefetch([s for r in fetched.values() for s in r.get("sources") or []])
        frontier = {s for r in fetched.values() for s in r.get("sources") or [] if s not in rows and s not in known}

    def leaves(rid: str, seen: set[str]) -> list[str]:
        if rid in known:
            return known[rid]
        srcs = [s for s in rows[rid].get("sources") or [] if (s in rows or s in known) and s not in seen]
        if not srcs:
            return [rid]
        seen.add(rid)
        return [leaf for s in srcs for leaf in leaves(s, seen)]

    return {rid: list(dict.fromkeys(leaves(rid, set()))) for rid in searched}


def build_scope(read: PinnedDataset | None, where: str) -> Scope:
    """The bookkeeping of ``where`` made of the rows of ``read`` (None: no table, an empty scope)."""
    ds = read.dataset if read is not None else None
    fragments = frozenset(f.fragment_id for f in ds.get_fragments()) if ds is not None else frozenset()
    found = ds.to_table(columns=_COLUMNS, filter=where).to_pylist() if ds is not None else []
    rows = {r["id"]: r for r in found}
    leaf_sets = _walk(read, rows, list(rows)) if read is not None else {}
    info = [_leaf_info(rows[x]) for x in sorted({x for v in leaf_sets.values() for x in v})]
    info.sort(key=_order_key)
    n = len(info)
    prev, nxt = np.full(n, -1), np.full(n, -1)
    tails: dict[tuple[str, str], int] = {}
    for i in range(n):
        key = _session_key(info[i][2])
        if key is not None and key in tails and tails[key] == i - 1:
            prev[i], nxt[i - 1] = i - 1, i
        if key is not None:
            tails[key] = i
    index_of = {x[0]: i for i, x in enumerate(info)}
    leaf_ids = [x[0] for x in info]
    participants = {t for x in info for t in tokenize(str(x[2].get("author", "")))}
    by_time = sorted(range(n), key=lambda i: (info[i][3].timestamp() if info[i][3] else 0.0, _natural(info[i][0])))
    tiebreak = np.empty(n, dtype=np.int64)
    tiebreak[by_time] = np.arange(n)
    return Scope(
        leaf_ids=leaf_ids, index_of=IdLookup(as_text(leaf_ids)),
        leaves_of=GroupLookup.of({rid: [index_of[x] for x in ls if x in index_of] for rid, ls in leaf_sets.items()}),
        leaf_steps=sorted({x[1] for x in info}), prev=prev, next=nxt,
        times=np.array([x[3].timestamp() if x[3] else np.nan for x in info], dtype=np.float64),
        participants=participants, tiebreak=tiebreak, pairs={}, fragments=fragments, tails=tails, read=read)


def extend_scope(read: PinnedDataset | None, old: Scope, where: str) -> Scope | None:
    """``old`` plus the rows of the fragments ``read`` added since it was built; None when fragments were
    rewritten (compaction), which only a full build can follow."""
    if read is None:
        return None
    ds = read.dataset
    now = {f.fragment_id: f for f in ds.get_fragments()}
    if not old.fragments <= set(now):
        return None
    added = [now[i] for i in sorted(set(now) - old.fragments)]
    found = ds.scanner(columns=_COLUMNS, filter=where, fragments=added).to_table().to_pylist() if added else []
    seen = old.leaves_of.index.rows([r["id"] for r in found]) >= 0 if found else np.zeros(0, dtype=bool)
    rows = {r["id"]: r for r, kept in zip(found, seen.tolist(), strict=True) if not kept}  # rewritten: keep their leaves
    leaf_sets = _walk(read, rows, list(rows), _Resolved(old))
    candidates = sorted({x for v in leaf_sets.values() for x in v})
    old_at = dict(zip(candidates, old.index_of.rows(candidates).tolist(), strict=True))  # -1: a new leaf
    fresh = [x for x in candidates if old_at[x] < 0]
    info = sorted((_leaf_info(rows[x]) for x in fresh), key=_order_key)
    n, m = len(old.leaf_ids), len(info)
    prev = np.concatenate([old.prev, np.full(m, -1)])
    nxt = np.concatenate([old.next, np.full(m, -1)])
    times = np.concatenate([old.times, [x[3].timestamp() if x[3] else np.nan for x in info]])
    tails = dict(old.tails)
    for j, x in enumerate(info):
        pos, key = n + j, _session_key(x[2])
        if key is None:
            continue
        tail = tails.get(key)
        if tail is not None and nxt[tail] < 0 and not times[tail] > times[pos]:  # NaN times link too
            prev[pos], nxt[tail] = tail, pos
        if tail is None or not times[tail] > times[pos]:
            tails[key] = pos
    fresh_ids = as_text([x[0] for x in info])
    index_of = IdLookup(np.concatenate([old.index_of.ids, fresh_ids]),
                        merged_order(old.index_of.ids, old.index_of.order, fresh_ids))
    new_position = {x[0]: n + j for j, x in enumerate(info)}

    def position(leaf: str) -> int | None:
        return new_position[leaf] if leaf in new_position else (old_at[leaf] if old_at.get(leaf, -1) >= 0 else None)

    leaves_of = old.leaves_of.appended({rid: [p for p in map(position, ls) if p is not None]
                                        for rid, ls in leaf_sets.items()})
    by_time = sorted(range(m), key=lambda j: (info[j][3].timestamp() if info[j][3] else 0.0, _natural(info[j][0])))
    tiebreak_new = np.empty(m, dtype=np.int64)
    tiebreak_new[by_time] = n + np.arange(m)
    return Scope(
        leaf_ids=old.leaf_ids + [x[0] for x in info], index_of=index_of, leaves_of=leaves_of,
        leaf_steps=sorted(set(old.leaf_steps) | {x[1] for x in info}), prev=prev, next=nxt, times=times,
        participants=old.participants | {t for x in info for t in tokenize(str(x[2].get("author", "")))},
        tiebreak=np.concatenate([old.tiebreak, tiebreak_new]), pairs={}, fragments=frozenset(now),
        tails=tails, extended_from=old.leaf_ids, base_token=old.token, read=read)


def _to_entry(scope: Scope) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The scope as a sidecar entry: arrays for what grows with the leaves, a description for the rest."""
    groups = scope.leaves_of
    meta = {"leaf_steps": scope.leaf_steps, "participants": sorted(scope.participants),
            "tails": [[c, s, int(p)] for (c, s), p in scope.tails.items()],
            "extended": scope.extended_from is not None, "token": scope.token, "base_token": scope.base_token}
    arrays = {"leaf_ids": scope.index_of.ids, "records": groups.records,
              "sizes": groups.sizes, "positions": groups.flat, "prev": scope.prev, "next": scope.next,
              "times": scope.times, "tiebreak": scope.tiebreak,
              # the lookups' sort orders (search/indexes/id_lookup.py): a new process searches them instead of sorting
              "leaf_order": scope.index_of.order, "record_order": groups.index.order}
    return meta, arrays


def _from_entry(entry: Entry, read: PinnedDataset | None) -> Scope:
    """The saved scope; ``read``: the version it is served at (None: a base, to be extended to one)."""
    a, meta = entry.arrays, entry.meta
    # an entry saved before the orders were persisted has none: they are then sorted at the first lookup
    return Scope(
        leaf_ids=a["leaf_ids"].tolist(), index_of=IdLookup(as_text(a["leaf_ids"]), a.get("leaf_order")),
        leaves_of=GroupLookup(as_text(a["records"]), a["sizes"], a["positions"], a.get("record_order")),
        leaf_steps=list(meta["leaf_steps"]), prev=a["prev"], next=a["next"], times=a["times"],
        participants=set(meta["participants"]), tiebreak=a["tiebreak"], pairs={},
        fragments=frozenset(fid for fid, _, _ in entry.state.files),
        tails={(c, s): int(p) for c, s, p in meta["tails"]},
        # a loaded extension: deleted leaves may remain, as in the process that extended it
        extended_from=[] if meta["extended"] else None, token=meta["token"], base_token=meta["base_token"],
        read=read)


class LeafScopes(VersionedStructure[str, Scope]):
    """Leaf-sum bookkeeping per (table version, scope filter); the store's ``search_state.scopes``. An older
    version's scope of ``incremental_from`` leaves or more is extended, a smaller one rebuilt."""

    kind = "leaf_scope"

    def __init__(self, sidecar: Callable[[], Sidecar] | None = None, incremental_from: int = INCREMENTAL_FROM) -> None:
        super().__init__(sidecar)
        self.incremental_from = incremental_from

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> Scope:
        return build_scope(read, key)

    def extend(self, read: PinnedDataset | None, key: str, previous: Scope, context: Any) -> tuple[Scope, str] | None:
        scope = extend_scope(read, previous, key) if len(previous.leaf_ids) >= self.incremental_from else None
        return (scope, EXTEND) if scope is not None else None

    def from_entry(self, read: PinnedDataset, key: str, entry: Entry, context: Any) -> tuple[Scope, str] | None:
        """As saved when ``read`` holds the same rows; extended when rows were only appended or deleted since
        (and it is large enough to be extended at all)."""
        if entry.state.same_rows(read.state):
            return _from_entry(entry, read), LOAD
        if read.state.grew_from(entry.state) and len(entry.arrays["leaf_ids"]) >= self.incremental_from:
            scope = extend_scope(read, _from_entry(entry, None), key)
            if scope is not None:
                return scope, EXTEND
        return None

    def to_entry(self, value: Scope, context: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return _to_entry(value)


def scope_for(engine: SearchEngine, where: str) -> Scope:
    """The bookkeeping of ``where`` at the table version the search reads (built, extended or cached)."""
    return engine.store.search_state.scopes.get(engine.store.read_dataset(), where)
