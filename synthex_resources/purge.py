"""Purge in the record store: the provenance cascade, and taking its content out of every LanceDB table
physically, old versions included.

A LanceDB delete only marks rows in a deletion file: the bytes stay in the fragment, in every older
version and in the FTS index until they are rewritten. ``compact_physically`` rewrites every fragment
that has deletions (``materialize_deletions_threshold=0``: LanceDB's own ``optimize`` leaves a fragment
with fewer than 10 % deleted rows as it is), rebuilds the FTS index, deletes tags (a tag pins its
version) and removes every version but the latest.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from synthex_resources.commits import with_commit_retry
from synthex_resources.record_store import RECORDS, RecordStore

if TYPE_CHECKING:
    from synthex_resources.residue import Needles

PURGED_TEXT = "[purged]"


@dataclass
class Cascade:
    """The rows a purge removes: the roots and everything made from them, on every branch."""

    roots: list[str]
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # (id, step, branch, period)

    @property
    def affected_records(self) -> list[str]:
        return sorted({r[0] for r in self.rows})

    @property
    def steps(self) -> dict[str, int]:
        per: dict[str, set[str]] = defaultdict(set)
        for rid, step, _, _ in self.rows:
            per[step].add(rid)
        return {s: len(ids) for s, ids in sorted(per.items())}

    @property
    def branches(self) -> list[str]:
        return sorted({r[2] for r in self.rows})

    def partitions(self) -> dict[str, dict[str, list[str]]]:
        """step -> branch -> periods that lose rows."""
        out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for _, step, branch, period in self.rows:
            out[step][branch].add(period)
        return {s: {b: sorted(ps) for b, ps in sorted(bs.items())} for s, bs in sorted(out.items())}

    def to_dict(self) -> dict[str, Any]:
        return {"roots": self.roots, "affected_records": self.affected_records, "steps": self.steps,
                "branches": self.branches, "partitions": self.partitions()}


def find_cascade(store: RecordStore, roots: list[str]) -> Cascade:
    """Every row (any branch) of the roots and of every record whose provenance reaches them.

    One scan of (id, step, branch, period, sources); the closure is walked in memory. Provenance is
    the same on every branch (an id is a content address of its inputs), so the edges of all branches
    are one graph."""
    ds = store.dataset(RECORDS)
    if ds is None:
        return Cascade(list(roots))
    table = ds.to_table(columns=["id", "step", "branch", "period", "sources"]).to_pydict()
    children: dict[str, set[str]] = defaultdict(set)
    rows_of: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)
    for rid, step, branch, period, sources in zip(table["id"], table["step"], table["branch"], table["period"],
                                                  table["sources"], strict=True):
        rows_of[rid].append((rid, step, branch, period))
        for src in sources or []:
            children[src].add(rid)
    seen: set[str] = set()
    todo = [r for r in roots if r in rows_of]
    while todo:
        rid = todo.pop()
        if rid in seen:
            continue
        seen.add(rid)
        todo.extend(children.get(rid, ()))
    rows = sorted((row for rid in seen for row in rows_of[rid]), key=lambda r: (r[1], r[2], r[3], r[0]))
    return Cascade(list(roots), rows)


def matching_records(store: RecordStore, pattern: str, steps: list[str], regex: bool = False) -> list[str]:
    """Ids of records of ``steps`` (any branch) whose content contains ``pattern`` (case-insensitive),
    or matches it as a regular expression."""
    if not steps:
        return []
    rx = re.compile(pattern if regex else re.escape(pattern), re.IGNORECASE)
    found = []
    for row in store.records.scan(["id", "content", "step", "branch", "sources", "materialization_key",
                                   "run_id", "created_at", "metadata", "audit", "period"], steps=steps):
        if rx.search(store.to_record(row).content):  # to_record: the readable text, whatever the storage
            found.append(row["id"])
    return sorted(set(found))


def lines_kept_elsewhere(store: RecordStore, needles: list[str], purged: set[str]) -> set[str]:
    """The needles (``residue.needles_of``: a line's first 80 characters) that begin a line of a record
    the purge keeps: conversations share lines ("user: What are the trade-offs?"), and a line another
    record holds stays on disk with it, so it is not purged text to sweep or to find."""
    wanted = set(needles)
    if not wanted:
        return set()
    kept: set[str] = set()
    for row in store.records.scan(["id", "content", "step", "branch", "sources", "materialization_key",
                                   "run_id", "created_at", "metadata", "audit", "period"]):
        if row["id"] in purged:
            continue
        for line in store.to_record(row).content.splitlines():  # to_record: readable, whatever the storage
            if (piece := line.strip()[:80]) in wanted:
                kept.add(piece)
    return kept


def delete_rows(store: RecordStore, ids: list[str]) -> int:
    """Delete every row (all branches) of ``ids``: one commit per 2,000 ids."""
    return store.records.delete_ids(ids, chunk=2000)


def text_digest(text: str) -> str:
    """How a purge's journal names a purged text it must recognize without keeping it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def drop_cached_responses(store: RecordStore, texts: set[str], raws: set[str],
                          needles: Needles | None = None) -> int:
    """Delete the LLM cache entries that produced purged records: a cached response equal to a purged
    record's content, or a raw body equal to one's ``audit.raw_response`` (a replay would write the
    purged text again), and any entry quoting a piece of the purged source text (``needles``)."""
    return drop_cached_by_digest(store, {text_digest(t) for t in texts}, {text_digest(r) for r in raws}, needles)


def drop_cached_by_digest(store: RecordStore, text_digests: set[str], raw_digests: set[str],
                          needles: Needles | None = None) -> int:
    """``drop_cached_responses`` with the purged texts given by ``text_digest`` (what a purge's journal
    keeps once the records are deleted)."""
    rows = store.llm_cache.entries()  # readable text, whatever the storage
    quoting = needles.holding([f"{row['response'] or ''}\0{row['raw'] or ''}" for row in rows]) if needles else set()
    doomed = []
    for i, row in enumerate(rows):
        response, raw = row["response"] or "", row["raw"] or ""
        if (text_digest(response) in text_digests or (raw and text_digest(raw) in raw_digests)
                or i in quoting):
            doomed.append(row["key"])
    return store.llm_cache.drop(doomed)


def scrub_bookkeeping(store: RecordStore, needles: Needles, tables: list[str]) -> int:
    """Replace purged text inside the small bookkeeping tables (run records and their error text, hook
    delivery state): rows are kept, the text is ``[purged]``. Returns rows rewritten."""
    if not needles.prints:
        return 0
    rewritten = 0
    for name in tables:
        tbl = store.tables.table(name)
        if tbl is None:
            continue
        schema = tbl.schema
        key = "key" if "key" in schema.names else "id"
        changed = []
        for row in store.tables.read(name):
            new = {k: needles.scrub(v) if isinstance(v, str) else v for k, v in row.items()}
            if new != row:
                changed.append(new)
        if changed:
            store.tables.upsert_rows(name, schema, changed, key=key)
            rewritten += len(changed)
    return rewritten


@dataclass
class Compaction:
    tables: list[str] = field(default_factory=list)
    tags_removed: list[str] = field(default_factory=list)
    fragments_rewritten: int = 0
    versions_removed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"tables": self.tables, "tags_removed": self.tags_removed,
                "fragments_rewritten": self.fragments_rewritten, "versions_removed": self.versions_removed}


def compact_physically(store: RecordStore, stem: bool = False,
                       on_table: Callable[[str], None] | None = None) -> Compaction:
    """Rewrite every fragment holding deleted rows, rebuild the FTS index, drop tags and every version but
    the latest, in every table of the store. Readers holding an older version (a UI, an MCP server)
    fail their next read of it and reopen the latest. ``on_table``: told each table's name once it is
    done (each table is done on its own; running this again redoes only what is left)."""
    import lance

    from synthex_resources.search.engine import FTS_COLUMN, SearchEngine
    from synthex_resources.search.indexes.sidecar import sidecar

    report = Compaction()
    for name in store.tables.table_names():
        path = store.tables.dataset_path(name)
        ds = lance.dataset(path, storage_options=store.storage_options)
        report.tables.append(name)
        for tag in sorted(ds.tags.list()):
            ds.tags.delete(tag)
            report.tags_removed.append(f"{name}:{tag}")
        if any(f.metadata.deletion_file is not None for f in ds.get_fragments()):
            metrics = with_commit_retry(lambda ds=ds: ds.optimize.compact_files(
                materialize_deletions=True, materialize_deletions_threshold=0.0))
            report.fragments_rewritten += metrics.fragments_removed
        if name == RECORDS:
            tbl = store.records_table()
            if tbl is not None and any(i.name == f"{FTS_COLUMN}_idx" for i in tbl.list_indices()):
                # Rebuilt, not remapped: a remapped inverted index keeps the purged words in its dictionary.
                with_commit_retry(lambda tbl=tbl: tbl.drop_index(f"{FTS_COLUMN}_idx"))
                SearchEngine(store).ensure_index(optimize=False, stem=stem, warm_postings=False)
        ds = lance.dataset(path, storage_options=store.storage_options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "removes every version except the latest": that is the point
            stats = ds.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True,
                                            error_if_tagged_old_versions=False)
        report.versions_removed += stats.old_versions
        if on_table is not None:
            on_table(name)
    # The search structures persisted beside the table name the purged records (and their rare words); the
    # fragments they were read from are gone anyway. Run again after a kill: removing is idempotent.
    sidecar(store).clear()
    store.close()  # cached table handles point at removed versions
    return report
