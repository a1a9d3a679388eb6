"""The lexical leg of a large plaintext store: BM25 over postings persisted beside the table.

Why: LanceDB's FTS query is the measured bottleneck of bm25 and hybrid search at 1M records: its tail
on common words (a word in half the rows) was 78 ms p95 for bm25 alone (docs/benchmarks.md). The
in-memory BM25 of search/indexes/memory_lexical.py answered the same queries in 5.7 / 14-16 ms p50/p95 with
identical top 10s, but cost a 39 s build (a Python object per text) and 2 GB, in every process.
This index is built with Arrow compute and numpy (no Python object per text), saved in the store's
sidecar (search/indexes/sidecar.py) with its large arrays mapped, not read, by the next process, and brought
up to date after a write by indexing only the fragments the write added.

Scoring is LanceDB's BM25 in its own float32 arithmetic (search/indexes/bm25.py: the same floats), with corpus
statistics over every live row of the table; a repeated query term counts again. Terms are the FTS
index's own (search/tokenize.py ``IndexAnalyzer``: LanceDB's analyzer with the index's parameters, its
Snowball stemmer when the index stems, tokens of 40 characters or more dropped). Rows of ASCII text are
split by Arrow (lower-case, split on anything but ``[a-z0-9]``: the split of the index's ``simple``
tokenizer) and each distinct word is analyzed once; a row with other characters is analyzed whole by
LanceDB's analyzer (it keeps ``café`` whole and folds it to ``cafe``).

Which stores use it (``usable``): plaintext stores whose FTS index has the project's tokenizer (stemmed or
not), and either (a) at least ``POSTINGS_FROM`` rows (built at ``ensure_index``: their first build takes
seconds), or (b) an index that holds exactly the live rows (built at the first lexical search, then
saved). In (b) LanceDB's statistics are the live rows' and both rank alike to the float (tests/test_stem.py;
on LoCoMo dev7 the eval's 1,345 lexical queries: ~8 ms each through LanceDB, ~1 ms here). An index that
lags (rows outside it; rows deleted since it was built, which LanceDB keeps counting) leaves a small store
to LanceDB; a large store is served anyway, its statistics over the live rows.

Layout: two levels of CSR postings (term -> rows, with term frequencies), like a two-level LSM tree.
The *base* covers the rows present at the last full build; the *delta* every row appended since, rebuilt
from the added fragments after each write (cheap while small); when the delta reaches a quarter of the
base, the next update is a full build. Rows deleted since (an upsert deletes the old row) are masked
out, and the corpus statistics count live rows only. A compaction (fragments rewritten) brings a full
build. Row masks of search filters are evaluated by Lance on the same table version (the SQL the FTS
path prefilters with) and cached per filter. Saved as two sidecar entries: the base (written at a build; its
large arrays mapped by the next process, or read below ``READ_BELOW`` rows) and the delta (the appended rows,
the terms they added and the live-row mask, written after each update: a small write no longer rewrites the
base). The delta names the base it extends; one of another base (a kill between saves) is ignored.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synthex_resources.search.indexes import bm25
from synthex_resources.search.indexes.lru import LRU, MASKS_KEPT
from synthex_resources.search.indexes.sidecar import Entry, SaveGuard, Sidecar, TableState, sidecar
from synthex_resources.search.indexes.versioned import BUILD, REUSE, VersionedStructure
from synthex_resources.search.tokenize import PROJECT_INDEX, IndexAnalyzer
from synthex_resources.store.pinned import PinnedDataset

if TYPE_CHECKING:  # type hints only: the store builds this structure (no import cycle)
    from synthex_resources.record_store import RecordStore

POSTINGS_FROM = 200_000  # rows from which the postings answer even for rows the FTS index has not taken in yet
INDEX_NAME = "content_idx"
PARTS_KEPT = 4_000_000  # (row, score part) pairs cached per table version (~48 MB)
READ_BELOW = 100_000  # rows below which saved postings are read into memory rather than mapped
DELTA_SHARE = 0.25  # a delta this share of the base rows: the next update is a full build
_COLUMNS = ["id", "content"]
POSTINGS = "postings"  # the one key: the postings hold every row of the table


@dataclass
class _Level:
    """CSR postings of some rows: term t's rows are ``rows[offsets[t]:offsets[t + 1]]`` (ascending)."""

    offsets: np.ndarray  # int64 (terms known at its build + 1)
    rows: np.ndarray  # int32 global row positions
    tf: np.ndarray  # float32 occurrences

    def slice(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        if term + 1 >= len(self.offsets):
            return self.rows[:0], self.tf[:0]
        start, end = int(self.offsets[term]), int(self.offsets[term + 1])
        return self.rows[start:end], self.tf[start:end]


@dataclass
class _Postings:
    state: TableState
    version: int
    dataset: Any  # the Lance dataset at ``version`` (filters are evaluated on it)
    addr: np.ndarray  # uint64 row address of each row position, ascending
    ids: np.ndarray  # record id of each row position (a fixed-width str array, mapped when loaded)
    lengths: np.ndarray  # float32 tokens per row
    base: _Level
    delta: _Level
    base_rows: int  # rows [0, base_rows) are the base's, the rest the delta's
    alive: np.ndarray | None  # None: every row is live; else False for rows deleted since they were indexed
    analyzer: IndexAnalyzer  # the terms' analyzer (the FTS index's parameters)
    base_id: str  # names the base's build: a saved delta names the saved base it extends
    base_vocab: int  # terms known at the base's build (the vocabulary's first ones)
    live: int = 0
    norms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    masks: LRU[str, np.ndarray] = field(default_factory=lambda: LRU(MASKS_KEPT))
    # term -> (rows, its part of their scores): fixed for these rows, so a term asked again costs one addition
    parts: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=OrderedDict)
    parts_size: int = 0
    # term -> id, as numbered for these levels: a search maps its words through the postings it holds, never
    # through a newer build's numbering (an extension only appends ids, so it shares its predecessor's dict)
    vocab: dict[str, int] = field(default_factory=dict)

    def term(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """The live-row statistics' part of ``term`` in the score of each row holding it (cached)."""
        hit = self.parts.get(term)
        if hit is not None:
            self.parts.move_to_end(term)
            return hit
        pieces = [level.slice(term) for level in (self.base, self.delta)]
        rows = np.concatenate([r for r, _ in pieces])
        tf = np.concatenate([t for _, t in pieces])
        df = len(rows) if self.alive is None else int(np.count_nonzero(self.alive[rows]))
        if not df:
            rows = rows[:0]
        made = (rows, bm25.term_parts(rows, tf[:len(rows)], bm25.idf(df, self.live), self.norms))
        self.parts[term] = made
        self.parts_size += len(rows)
        while self.parts_size > PARTS_KEPT and len(self.parts) > 1:
            _, (gone, _) = self.parts.popitem(last=False)
            self.parts_size -= len(gone)
        return made

    def __post_init__(self) -> None:
        alive_lengths = self.lengths if self.alive is None else self.lengths[self.alive]
        self.live = len(alive_lengths)
        self.norms = bm25.doc_norms(self.lengths, int(alive_lengths.sum(dtype=np.int64)), self.live)


def _tokens(table: pa.Table, first_row: int, vocab: dict[str, int],
            analyzer: IndexAnalyzer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row positions, term ids) of every term occurrence of ``table``'s content as the FTS index has it
    (``analyzer``), and terms per row. ``vocab`` is extended with new terms."""
    content = table.column("content").combine_chunks() if table.num_rows else pa.array([], pa.string())
    n = len(content)
    content = pc.fill_null(content, "")
    ascii_rows = pc.string_is_ascii(content).to_numpy(zero_copy_only=False)
    row_parts, term_parts = [], []
    picked = np.flatnonzero(ascii_rows)
    if len(picked):
        text = pc.ascii_lower(pc.take(content, pa.array(picked)))
        text = pc.replace_substring_regex(text, pattern="[^a-z0-9]+", replacement=" ")
        lists = pc.split_pattern(pc.utf8_trim(text, characters=" "), pattern=" ")
        words = pc.list_flatten(lists)
        parents = picked[pc.list_parent_indices(lists).to_numpy()]
        keep = pc.greater(pc.utf8_length(words), 0)
        words, parents = pc.filter(words, keep), parents[keep.to_numpy(zero_copy_only=False)]
        encoded = pc.dictionary_encode(words)
        # each distinct word analyzed once (stemmed, or dropped when too long): -1 for a dropped word
        lut = np.fromiter((-1 if t is None else vocab.setdefault(t, len(vocab))
                           for t in analyzer.terms(encoded.dictionary.to_pylist())), np.int64, len(encoded.dictionary))
        terms = lut[encoded.indices.to_numpy()] if len(lut) else np.zeros(0, np.int64)
        kept = terms >= 0
        row_parts.append(parents.astype(np.int64)[kept])
        term_parts.append(terms[kept])
    others = np.flatnonzero(~ascii_rows)
    if len(others):  # split by the index's own tokenizer (a handful of rows in most corpora)
        texts = content.to_pylist()
        for i in others.tolist():
            terms = [vocab.setdefault(t, len(vocab)) for t in analyzer.text_terms(texts[i])]
            row_parts.append(np.full(len(terms), i, np.int64))
            term_parts.append(np.asarray(terms, np.int64))
    rows = np.concatenate(row_parts) if row_parts else np.zeros(0, np.int64)
    terms = np.concatenate(term_parts) if term_parts else np.zeros(0, np.int64)
    lengths = np.bincount(rows, minlength=n).astype(np.float32)
    return rows + first_row, terms, lengths


def _level(rows: np.ndarray, terms: np.ndarray, vocab_size: int) -> _Level:
    """CSR postings from token occurrences (one sort of the (term, row) keys; counts are the term frequencies)."""
    span = np.int64(int(rows.max()) + 1 if len(rows) else 1)
    keys, counts = np.unique(terms * span + rows, return_counts=True)
    post_terms, post_rows = np.divmod(keys, span)
    offsets = np.zeros(vocab_size + 1, np.int64)
    np.cumsum(np.bincount(post_terms, minlength=vocab_size), out=offsets[1:])
    return _Level(offsets, post_rows.astype(np.int32), counts.astype(np.float32))


_EMPTY = _Level(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32))


def _read(ds: Any, fragments: list[Any] | None) -> pa.Table:
    if fragments is not None and not fragments:
        return ds.scanner(columns=_COLUMNS, with_row_address=True, limit=0).to_table()
    return ds.scanner(columns=_COLUMNS, with_row_address=True, fragments=fragments).to_table()


def _sorted_by_address(table: pa.Table) -> pa.Table:
    order = np.argsort(table.column("_rowaddr").to_numpy(), kind="stable")
    return table.take(pa.array(order)) if len(order) and (np.diff(order) != 1).any() else table


def fts_stats(ds: Any) -> dict[str, Any] | None:
    """The FTS index's statistics (None: no index)."""
    try:
        return ds.stats.index_stats(INDEX_NAME)
    except Exception:  # noqa: BLE001 - no FTS index yet (Lance raises several kinds)
        return None


def holds_live_rows(ds: Any, stats: dict[str, Any] | None) -> bool:
    """Whether the FTS index holds exactly the live rows of ``ds``: none waits outside it, and it counts no
    deleted row. Only then are its BM25 statistics the live rows' (LanceDB's include the rows deleted since
    it was built, and score the rows outside it otherwise), i.e. the postings'."""
    if stats is None or int(stats.get("num_unindexed_rows", 1)) != 0:
        return False
    return sum(int(part.get("num_docs", -1)) for part in stats["indices"]) == ds.count_rows()


class PostingsBM25(VersionedStructure[str, _Postings]):
    """The persisted postings of one store (``search_state.postings``): one entry (key ``POSTINGS``) per
    table version, asked with the analyzer of that version's FTS index, saved as two sidecar entries."""

    def __init__(self, store: RecordStore, rows_from: int = POSTINGS_FROM, enabled: bool = True) -> None:
        super().__init__(lambda: sidecar(store))
        self.store = store
        self.rows_from = rows_from
        self.enabled = enabled  # False: LanceDB's FTS answers every query (a reference in tests and benches)
        self.analyzer: IndexAnalyzer | None = None  # of the FTS index at the last version asked about
        self._usable: tuple[int, bool] | None = None  # (table version, whether these postings answer for it)
        self.searches = 0  # queries these postings answered (tests watch it: the eval's lexical leg is here)

    @property
    def last_update(self) -> str:
        """How the current version was reached: "build" / "delta" / "persisted" / "persisted+delta"."""
        return self.last

    # -- which stores ---------------------------------------------------------------------------------
    def usable(self, ds: Any) -> bool:
        """Whether the lexical leg of this table version should search these postings (see the module doc)."""
        if not self.enabled or self.store.cipher is not None or ds is None:
            return False
        if (ds.version, POSTINGS) in self.entries:
            return True
        with self.lock:
            if self._usable is None or self._usable[0] != ds.version:  # asked once per table version
                self._usable = (ds.version, self._decide(ds))
            return self._usable[1]

    def _decide(self, ds: Any) -> bool:
        stats = fts_stats(ds)
        if stats is None:  # a large store before its first index: the project's is built unstemmed by default
            params = {**PROJECT_INDEX, "stem": False} if ds.count_rows() >= self.rows_from else None
        else:
            params = stats["indices"][0]["params"]
        analyzer = IndexAnalyzer.of_index(params)
        if analyzer is None or (ds.count_rows() < self.rows_from and not holds_live_rows(ds, stats)):
            return False
        if self.analyzer is None or self.analyzer.key() != analyzer.key():
            self.analyzer = analyzer  # else the same one, its analyzed words kept
        return True

    # -- upkeep ---------------------------------------------------------------------------------------
    def build(self, read: PinnedDataset | None, key: str, context: Any) -> _Postings:
        assert read is not None  # ``current`` asks only of a table
        ds, state, analyzer = read.dataset, read.state, context
        vocab: dict[str, int] = {}
        table = _sorted_by_address(_read(ds, None))
        rows, terms, lengths = _tokens(table, 0, vocab, analyzer)
        ids = np.asarray(table.column("id").to_numpy(zero_copy_only=False).astype(str))
        return _Postings(state=state, version=ds.version, dataset=ds, addr=table.column("_rowaddr").to_numpy(),
                         ids=ids, lengths=lengths, base=_level(rows, terms, len(vocab)), delta=_EMPTY,
                         base_rows=len(ids), alive=None, analyzer=analyzer, base_id=os.urandom(8).hex(),
                         base_vocab=len(vocab), vocab=vocab)

    def _extend(self, ds: Any, state: TableState, old: _Postings) -> _Postings | None:
        """``old`` at ``state``: rows deleted since masked, the appended fragments in a rebuilt delta; None when
        only a full build fits (fragments rewritten, or the delta grew past ``DELTA_SHARE`` of the base)."""
        if not state.grew_from(old.state):
            return None
        now = {f.fragment_id: f for f in ds.get_fragments()}
        base_fragments = set(np.unique(old.addr[:old.base_rows] >> np.uint64(32)).astype(np.int64).tolist())
        added = [now[i] for i in sorted(now) if i not in base_fragments]
        delta_rows = sum(f.count_rows() for f in added)
        if delta_rows > DELTA_SHARE * max(old.base_rows, 1):
            return None
        known = {fid: deletion for fid, _, deletion in old.state.files}
        changed = [now[fid] for fid in base_fragments if fid in now and str(now[fid].metadata.deletion_file or "")
                   != known.get(fid, "")]
        alive = old.alive[:old.base_rows].copy() if old.alive is not None else None
        if changed:
            live = ds.scanner(columns=["id"], with_row_address=True, fragments=changed).to_table()
            live_addr = live.column("_rowaddr").to_numpy()
            base_addr = old.addr[:old.base_rows]
            touched = np.isin((base_addr >> np.uint64(32)).astype(np.int64), [f.fragment_id for f in changed])
            if alive is None:
                alive = np.ones(old.base_rows, dtype=bool)
            alive[touched] = np.isin(base_addr[touched], live_addr)
        table = _sorted_by_address(_read(ds, added))  # the delta: every fragment appended since the base
        rows, terms, lengths = _tokens(table, old.base_rows, old.vocab, old.analyzer)
        delta_alive = np.ones(table.num_rows, dtype=bool)  # their deletions are in the scan already
        ids = old.ids[:old.base_rows]
        new_ids = np.asarray(table.column("id").to_numpy(zero_copy_only=False).astype(str))
        all_ids = np.concatenate([ids, new_ids]) if len(new_ids) else ids
        if alive is not None:
            alive = np.concatenate([alive, delta_alive])
        return _Postings(state=state, version=ds.version, dataset=ds,
                         addr=np.concatenate([old.addr[:old.base_rows], table.column("_rowaddr").to_numpy()]),
                         ids=all_ids, lengths=np.concatenate([old.lengths[:old.base_rows], lengths]),
                         base=old.base, delta=_level(rows, terms, len(old.vocab)) if len(rows) else _EMPTY,
                         base_rows=old.base_rows, alive=alive, analyzer=old.analyzer, base_id=old.base_id,
                         base_vocab=old.base_vocab, vocab=old.vocab)

    def extend(self, read: PinnedDataset | None, key: str, previous: _Postings,
               context: Any) -> tuple[_Postings, str] | None:
        """The same rows (an index update): ``previous`` as it is; rows appended or deleted: a new delta;
        None when the FTS index was rebuilt with another tokenizer or only a full build fits."""
        if read is None or previous.analyzer is not context:
            return None
        if read.state.same_rows(previous.state):
            previous.version, previous.dataset, previous.masks = read.version, read.dataset, LRU(MASKS_KEPT)
            return previous, REUSE
        new = self._extend(read.dataset, read.state, previous)
        return (new, "delta") if new is not None else None

    def load_saved(self, sidecar: Sidecar, read: PinnedDataset, key: str, context: Any) -> tuple[_Postings, str] | None:
        """The saved base and the saved delta that names it, at ``read`` as they are ("persisted") or with the
        rows appended since in a new delta ("persisted+delta")."""
        ds, state, analyzer = read.dataset, read.state, context
        base = sidecar.load("lexical", "postings-base")
        if base is None or base.meta.get("analyzer") != analyzer.key():
            return None
        delta = sidecar.load("lexical", "postings-delta")
        if delta is not None and delta.meta.get("base_id") != base.meta.get("base_id"):
            delta = None  # the delta of an earlier base (a build since): the base alone
        entry = delta or base
        if not state.grew_from(entry.state):
            return None
        old, vocab = _from_entries(base, delta, ds, analyzer)
        old.vocab = dict(zip(vocab, range(len(vocab)), strict=True))
        if state.same_rows(entry.state):
            old.version, old.dataset = ds.version, ds
            return old, "persisted"
        new = self._extend(ds, state, old)
        return (new, "persisted+delta") if new is not None else None

    def save(self, saving: SaveGuard, read: PinnedDataset, key: str, value: _Postings, how: str,
             context: Any) -> None:
        """The base (its arrays are the bulk) is written once per build; each update writes the delta only."""
        if how in ("persisted", REUSE):
            return
        vocab = list(value.vocab)
        if how == BUILD:
            saving.save("lexical", "postings-base", read.state, lambda: _base_entry(value, vocab),
                        mapped=("base_rows_arr", "base_tf", "ids"))
        else:
            saving.save("lexical", "postings-delta", read.state, lambda: _delta_entry(value, vocab))

    def current(self) -> _Postings | None:
        """The postings at the version the search reads (brought up to date first when it changed): keyed by
        it, built from its rows, saved with its state."""
        read = self.store.read_dataset()
        if read is None:
            return None
        with self.lock:
            analyzer = self.analyzer  # ``usable`` set it from the FTS index of this version
            return self.get(read, POSTINGS, analyzer) if analyzer is not None else None

    # -- search ---------------------------------------------------------------------------------------
    def _mask(self, p: _Postings, where: str) -> np.ndarray | None:
        """Row positions matching ``where`` as a bool mask (None: every live row)."""
        if where == "TRUE" and p.alive is None:
            return None

        def made() -> np.ndarray:
            found = p.dataset.to_table(columns=[], filter=None if where == "TRUE" else where,
                                       with_row_address=True).column("_rowaddr").to_numpy()
            mask = np.zeros(len(p.addr), dtype=bool)
            pos = np.searchsorted(p.addr, found)
            ok = pos < len(p.addr)
            pos = pos[ok]
            mask[pos[p.addr[pos] == found[ok]]] = True
            return mask

        return p.masks.get_or_make(where, made)

    def search(self, tokens: list[str], where: str, n: int) -> list[tuple[str, float]]:
        """BM25 top ``n`` (id, score) among the rows matching ``where``, best first, ties by id."""
        p = self.current()
        if p is None or not tokens or n <= 0 or not p.live:
            return []
        scores = np.zeros(len(p.addr), dtype=np.float32)
        with self.lock:
            mask = self._mask(p, where)
            terms = [p.term(t) for t in (p.vocab.get(w) for w in p.analyzer.terms(tokens) if w is not None)
                     if t is not None]
        self.searches += 1
        for rows, parts in terms:  # in query order; a repeated query term counts again, as in LanceDB
            scores[rows] += parts
        hit = scores > 0
        if mask is not None:
            hit &= mask
        candidates = np.flatnonzero(hit)
        return bm25.top(candidates, scores[candidates], p.ids, n)


def _base_entry(p: _Postings, vocab: list[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The base's sidecar entry: its rows and postings, and the vocabulary it was built with."""
    n = p.base_rows
    arrays = {"vocab": np.asarray(vocab[:p.base_vocab], dtype=str), "addr": p.addr[:n], "ids": p.ids[:n],
              "lengths": p.lengths[:n], "base_offsets": p.base.offsets, "base_rows_arr": p.base.rows,
              "base_tf": p.base.tf}
    return {"base_rows": n, "base_id": p.base_id, "analyzer": p.analyzer.key()}, arrays


def _delta_entry(p: _Postings, vocab: list[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The delta's sidecar entry: the rows appended since the base, their postings, the terms they added, and
    which rows are live; it names the base it extends."""
    n = p.base_rows
    arrays = {"vocab_added": np.asarray(vocab[p.base_vocab:], dtype=str), "addr": p.addr[n:], "ids": p.ids[n:],
              "lengths": p.lengths[n:], "delta_offsets": p.delta.offsets, "delta_rows": p.delta.rows,
              "delta_tf": p.delta.tf}
    if p.alive is not None:
        arrays["alive"] = p.alive
    return {"base_rows": n, "base_id": p.base_id, "analyzer": p.analyzer.key()}, arrays


def _from_entries(base: Entry, delta: Entry | None, ds: Any,
                  analyzer: IndexAnalyzer) -> tuple[_Postings, list[str]]:
    """The postings a saved base and its saved delta (None: none since the base) make, and their vocabulary."""
    a = base.arrays
    d = delta.arrays if delta is not None else {
        "vocab_added": a["vocab"][:0], "addr": a["addr"][:0], "ids": a["ids"][:0], "lengths": a["lengths"][:0],
        "delta_offsets": _EMPTY.offsets, "delta_rows": _EMPTY.rows, "delta_tf": _EMPTY.tf}
    if len(a["ids"]) < READ_BELOW:  # a small store's arrays are read: each access to a mapped one costs more
        a = {name: np.array(value) for name, value in a.items()}

    def joined(name: str) -> np.ndarray:
        return np.concatenate([a[name], d[name]]) if len(d[name]) else a[name]

    vocab = a["vocab"].tolist() + d["vocab_added"].tolist()
    state = (delta or base).state
    p = _Postings(state=state, version=state.version, dataset=ds, addr=joined("addr"), ids=joined("ids"),
                  lengths=joined("lengths"), base=_Level(a["base_offsets"], a["base_rows_arr"], a["base_tf"]),
                  delta=_Level(d["delta_offsets"], d["delta_rows"], d["delta_tf"]),
                  base_rows=int(base.meta["base_rows"]), alive=d.get("alive"), analyzer=analyzer,
                  base_id=str(base.meta["base_id"]), base_vocab=len(a["vocab"]))
    return p, vocab


def postings_bm25(store: RecordStore) -> PostingsBM25:
    """The store's persisted postings (one per store object)."""
    return store.search_state.postings
