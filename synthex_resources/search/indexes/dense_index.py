"""Dense search from an in-memory matrix of the records' vectors.

LanceDB's flat vector scan measured ~290 ms at 100k records here, and its ANN indexes took 55-93 s
to build at 100k (docs/benchmarks.md). A matrix-vector product over the cached vectors is exact and
takes a few ms at 100k. Memory: 4 bytes x dim per record (1.5 GB at 1M records of 384 dims).

Three modes (``DenseIndex(store, mode=...)``):

- ``auto`` (default): exact below ``ann_from`` records in scope (200k: ~25 ms to scan here); at or
  above it, a faiss IVF index of 8-bit codes (search/indexes/ann.py) gives a shortlist of ``8 x n`` (at least
  200) rows that is re-scored exactly in float32. The IVF index is built in a background thread the
  first time a scope reaches ``ann_from``; until it is ready, searches scan exactly.
- ``float32``: always exact; one BLAS matrix-vector product over the records in scope.
- ``binary``: the sign bits of each vector (48 bytes at 384 dims) are scanned by Hamming distance for
  a shortlist (``shortlist`` rows, at least 8 x the wanted number), which is re-scored exactly in
  float32. Approximate and not the default: on the bench's random unit vectors a 20k shortlist found
  0.98 of the exact top 10 at 100k records (and was slower than the float32 scan) and 0.86 at 1M (for
  0.72x of its time). ``scores`` (every record's similarity, used by the leaf-sum fusion) is exact in
  both modes, so the float32 matrix stays in memory either way.

int8 was measured and not kept: numpy has no SIMD int8 dot product (``int8 @ int8`` overflows and
took 1.8x the float32 BLAS product at 1M; casting chunks to float32 for BLAS took 3x).

State is keyed by the table version. After a write the matrix is updated, not reloaded, when the new
version only added fragments or deleted rows (upserts): the new fragments are read and appended, rows
that disappeared from changed fragments are marked dead. Anything else (compaction) reloads it.
The rows in a scope (step/branch/period masks) are cached per matrix.

Appends to a saved matrix (issue 24): a matrix loaded from the sidecar maps its vectors' ``.npy`` file
read-only. Copying it into a writable buffer to append rows took ~8 s at 1M records (1.5 GB), and as the
appended matrix was not saved, every new process paid it again until the next full reload. Instead the
new rows are written to the end of that same file (the tail) and its header's row count is rewritten
in place (numpy pads the header so its first axis can grow without moving the data); the matrix is then
a new read-only mapping of base + tail, with no copy. Rows below the header's count are never rewritten
(other processes map them), so a writer only writes past it, under an exclusive lock on the file, and
rows another process already appended there are compared byte for byte with the rows this process read
from the table: equal, they are mapped as they are; different (another version's rows), the old copy
path is taken. A kill before the header rewrite leaves the old count (the bytes past it are ignored and
overwritten by the next append); the header rewrite is one write of its 128 bytes. A new process maps
the file by its header (base + tail), reads only the new fragments' small columns from the table, finds
their vectors already in the tail, and extends the saved IVF index by the tail rows. Deletions still
mark rows dead and a compaction still reloads and saves the whole matrix (a new file).
"""

from __future__ import annotations

import fcntl
import io
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synthex.core.scope import BranchScope
from synthex_resources.search.indexes.id_lookup import IdLookup, as_text, merged_order
from synthex_resources.search.indexes.sidecar import Entry, SaveGuard, Sidecar, TableState, sidecar
from synthex_resources.search.indexes.versioned import BUILD, VersionedStructure
from synthex_resources.store.pinned import PinnedDataset

if TYPE_CHECKING:  # type hints only: the store builds this structure (no import cycle)
    from synthex_resources.record_store import RecordStore

MODES = ("auto", "float32", "binary")
ANN_FROM = 200_000  # records in scope from which ``auto`` searches the IVF index
SAMPLE_ROWS = 4096  # rows whose similarities estimate a scope's median for a shortlist's scores
_COLUMNS = ["id", "step", "branch", "period", "vector"]
MATRIX = "matrix"  # the one key: the matrix holds every row of the table


@dataclass
class _Matrix:
    version: int
    ids: np.ndarray  # object array of ids
    codes: dict[str, dict[Any, int]]  # column -> value -> integer code (masks compare integers, not strings)
    steps: np.ndarray
    branches: np.ndarray
    periods: np.ndarray
    vectors: np.ndarray  # (n, dim) float32, L2-normalized (a view of a buffer with spare capacity, or a
    # read-only mapping of the saved file: base + tail, see ``_VectorFile``)
    addr: np.ndarray  # uint64 Lance row address of each row (fragment id << 32 | offset)
    alive: np.ndarray | None  # None: every row; else False for rows deleted since the load
    blank: np.ndarray  # True for records with no text (the zero vector, store/vectors.py): never in a scope
    bare: dict[int, tuple[str, str]]  # row address -> (step, branch) of records written without a vector
    fragments: dict[int, str]  # fragment id -> its deletion file at this version ("" when none)
    bits: np.ndarray | None = None  # (n, words) uint64 sign bits (binary mode)
    # id -> row by binary search over the ids as text (search/indexes/id_lookup.py): a dict of 1M ids took 1-3 s to
    # build in a new process's first query. The ids' sort order is persisted with the matrix.
    id_text: np.ndarray | None = None  # the ids as a numpy unicode array (None: made from ``ids`` when needed)
    id_order: np.ndarray | None = None  # their stable sort order, when known
    _lookup: IdLookup | None = None
    _scopes: dict[tuple, tuple[np.ndarray, np.ndarray, bool]] = field(default_factory=dict)
    _samples: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # id(scope rows) -> sample
    unembedded: set[tuple[str, str]] = field(default_factory=set)  # (step, branch) of the ``bare`` records

    def __post_init__(self) -> None:
        self.unembedded = set(self.bare.values())

    def row_of(self) -> IdLookup:
        """id -> row of the live rows (the last row of an id written twice, as a dict of them would)."""
        if self._lookup is None:
            text = self.id_text if self.id_text is not None and len(self.id_text) == len(self.ids) else as_text(self.ids)
            order = self.id_order if self.id_order is not None and len(self.id_order) == len(self.ids) else None
            self._lookup = IdLookup(text, order, self.alive)
        return self._lookup


@dataclass(frozen=True)
class _VectorFile:
    """The ``.npy`` file a saved matrix's vectors are mapped from (search/indexes/sidecar.py), which rows appended to
    the table since are written to the end of (see the module doc)."""

    path: Path
    offset: int  # bytes before row 0 (the npy header)
    dim: int

    @staticmethod
    def of(vectors: np.ndarray) -> _VectorFile | None:
        if (not isinstance(vectors, np.memmap) or not vectors.filename or vectors.ndim != 2
                or vectors.dtype != np.float32 or not vectors.flags.c_contiguous):
            return None
        return _VectorFile(Path(vectors.filename), int(vectors.offset), int(vectors.shape[1]))

    def map(self, rows: int) -> np.ndarray:
        return np.memmap(self.path, dtype=np.float32, mode="r", offset=self.offset, shape=(rows, self.dim))

    def append(self, new: np.ndarray, keep: int) -> tuple[np.ndarray, int] | None:
        """Rows [0, ``keep``) of the file followed by ``new``, mapped, and how many rows this call wrote; None
        when the file cannot take them (rows past ``keep`` hold other vectors, a read-only disk, another
        header layout): the caller copies instead."""
        if new.ndim != 2 or new.shape[1] != self.dim:
            return None
        new = np.ascontiguousarray(new, dtype=np.float32)
        row_bytes = 4 * self.dim
        need = keep + len(new)
        fmt = np.lib.format
        try:
            with open(self.path, "r+b") as f:
                fcntl.flock(f, fcntl.LOCK_EX)  # one writer at a time; readers map committed rows only
                version = fmt.read_magic(f)
                if version not in ((1, 0), (2, 0)):
                    return None
                read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, fortran, dtype = read_header(f)
                if (f.tell() != self.offset or fortran or dtype != np.float32 or len(shape) != 2
                        or shape[1] != self.dim or shape[0] < keep):
                    return None
                committed = int(shape[0])
                there = min(committed, need) - keep  # rows already appended by another process (or an earlier run)
                if there > 0:
                    f.seek(self.offset + keep * row_bytes)
                    on_disk = np.frombuffer(f.read(there * row_bytes), dtype=np.uint32)
                    if not np.array_equal(on_disk, new[:there].view(np.uint32).ravel()):
                        return None  # another version's rows: never rewritten (they may be mapped elsewhere)
                written = max(0, need - committed)
                if written:
                    f.seek(self.offset + committed * row_bytes)
                    f.write(new[len(new) - written:].data)  # contiguous rows: written without a copy
                    f.flush()
                    header = io.BytesIO()
                    write_header = fmt.write_array_header_1_0 if version == (1, 0) else fmt.write_array_header_2_0
                    write_header(header, {"descr": fmt.dtype_to_descr(np.dtype(np.float32)),
                                          "fortran_order": False, "shape": (need, self.dim)})
                    if len(header.getvalue()) != self.offset:
                        return None  # the count outgrew the header's padding: the rows written past it are ignored
                    os.pwrite(f.fileno(), header.getvalue(), 0)  # the commit: one write of the header
            return self.map(need), written
        except (OSError, ValueError):
            return None


def _sign_bits(vectors: np.ndarray) -> np.ndarray:
    packed = np.packbits(vectors > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


def _deletions(ds: Any) -> dict[int, str]:
    return {f.fragment_id: str(f.metadata.deletion_file or "") for f in ds.get_fragments()}


def _to_entry(m: _Matrix) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The matrix as a sidecar entry (search/indexes/sidecar.py); the vectors go to their own mapped file."""
    meta = {"codes": {col: [[k, v] for k, v in table.items()] for col, table in m.codes.items()},
            "bare": [[int(a), s, b] for a, (s, b) in m.bare.items()], "fragments": [[int(f), d] for f, d in m.fragments.items()]}
    lookup = m.row_of()
    arrays = {"ids": lookup.ids, "id_order": lookup.order, "steps": m.steps, "branches": m.branches,
              "periods": m.periods, "addr": m.addr, "blank": m.blank, "vectors": m.vectors}
    if m.alive is not None:
        arrays["alive"] = m.alive
    return meta, arrays


def _from_entry(entry: Entry, version: int) -> _Matrix:
    a, meta = entry.arrays, entry.meta
    return _Matrix(
        version=version, ids=np.asarray(a["ids"].tolist(), dtype=object),
        codes={col: {k: int(v) for k, v in pairs} for col, pairs in meta["codes"].items()},
        steps=a["steps"], branches=a["branches"], periods=a["periods"], addr=a["addr"],
        vectors=a["vectors"][:len(a["ids"])],  # the file may hold rows appended since (its tail): mapped when read
        blank=a["blank"],
        alive=a.get("alive"), bare={int(x): (s, b) for x, s, b in meta["bare"]},
        fragments={int(f): d for f, d in meta["fragments"]},
        id_text=a["ids"], id_order=a.get("id_order"))  # an entry saved before orders were persisted has none


def _encode(column: pa.ChunkedArray | pa.Array, table: dict[Any, int]) -> np.ndarray:
    """Integer codes of a string column, extending ``table`` with values it has not seen."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    enc = pc.dictionary_encode(arr)
    lut = np.fromiter((table.setdefault(v, len(table)) for v in enc.dictionary.to_pylist()), dtype=np.int32,
                      count=len(enc.dictionary))
    if enc.indices.null_count:
        lut = np.append(lut, table.setdefault(None, len(table))).astype(np.int32)
        idx = pc.fill_null(enc.indices, len(enc.dictionary)).to_numpy()
    else:
        idx = enc.indices.to_numpy()
    return lut[idx] if len(lut) else np.zeros(len(arr), np.int32)


class SavedMatrix(NamedTuple):
    """The matrix as saved beside the table: the rows it was read from, how many, and the save guard of the
    build that read them (the IVF index saved with it takes the same guard: a purge in between drops it)."""

    state: TableState
    rows: int
    saving: SaveGuard


class DenseIndex(VersionedStructure[str, _Matrix]):
    """The store's matrix (``search_state.dense``): one entry (key ``MATRIX``) per table version; after a
    write it is appended to ("append"), else loaded from the sidecar ("persisted", "persisted+append"), else
    read whole ("load")."""

    kind = "dense"

    def __init__(self, store: RecordStore, mode: str = "auto", shortlist: int = 20_000,
                 ann_from: int = ANN_FROM) -> None:
        if mode not in MODES:
            raise ValueError(f"dense index mode must be one of {MODES}, not {mode!r}")
        super().__init__(lambda: sidecar(store))
        self.store = store
        self.mode = mode
        self.shortlist = shortlist
        self.ann_from = ann_from
        self._buffer: np.ndarray | None = None  # vectors with spare rows for appends
        self._file: _VectorFile | None = None  # the saved file ``_buffer`` maps, appended to in place
        self.base_copies = 0  # times a mapped matrix was copied into memory to append rows (tests watch it)
        self.tail_rows_written = 0  # rows this object appended to the saved file
        self._lock = self.lock  # the IVF index and the matrix share one lock (a load bumps the generation)
        self._generation = 0  # bumped by every full load: row numbers change, an IVF index goes stale
        self._ann: tuple[int, Any] | None = None  # (generation, IvfIndex) once built
        self._ann_thread: threading.Thread | None = None
        # (table state, rows) of the matrix as saved beside the table, rows [0, rows) of the current
        # generation: an IVF index over exactly those rows is saved with it and loaded by the next process
        self._saved: SavedMatrix | None = None
        self.ivf_source = ""  # "built" / "loaded": how the last IVF index came to be (tests, benchmarks)

    # -- loading ------------------------------------------------------------------------------------
    @staticmethod
    def _read(ds: Any, fragments: list[Any] | None) -> pa.Table:
        """The rows of ``fragments`` (None: every fragment) with their row addresses."""
        if fragments is not None and not fragments:
            return ds.scanner(columns=_COLUMNS, with_row_address=True, limit=0).to_table()
        return ds.scanner(columns=_COLUMNS, with_row_address=True, fragments=fragments).to_table()

    def _store_vectors(self, new: np.ndarray, keep: int) -> np.ndarray:
        """Rows [0, keep) of the buffer followed by ``new``; grows the buffer by 1.25x when full (a copy:
        appends are cheap until then). Rows below ``keep`` are never written, so a search on an older
        matrix (a view of the same buffer) stays consistent."""
        need = keep + len(new)
        if keep and not len(new) and self._buffer is not None and self._buffer.shape[0] >= keep:
            return self._buffer[:keep]  # nothing appended (the buffer may be a read-only mapped file)
        if keep and len(new) and self._file is not None and self._buffer is not None \
                and not self._buffer.flags.writeable and self._buffer.shape[0] == keep:
            appended = self._file.append(new, keep)  # the saved file's tail: no copy of its rows
            if appended is not None:
                self._buffer, written = appended
                self.tail_rows_written += written
                return self._buffer
            self._file = None  # copied below, into memory: appended there from now on
        buf = self._buffer if keep else None  # a full load starts a buffer with 1/8 spare rows
        if buf is None and not keep:
            buf = self._buffer = np.empty((need + max(1024, need // 8), new.shape[1]), np.float32)
        if buf is None or buf.shape[1] != new.shape[1] or buf.shape[0] < need:
            grown = np.empty((int(need * 1.25), new.shape[1]), np.float32)
            if buf is not None:
                if not buf.flags.writeable:
                    self.base_copies += 1
                grown[:keep] = buf[:keep]
            buf = self._buffer = grown
        buf[keep:need] = new
        return buf[:need]

    def _load(self, version: int, ds: Any, base: _Matrix | None, fragments: list[Any] | None,
              dead: np.ndarray | None, gone: set[int]) -> _Matrix:
        """A matrix for ``version``: ``base`` plus the rows of ``fragments`` (all of them when no base)."""
        data = self._read(ds, fragments)
        has_vector = pc.is_valid(data.column("vector"))
        bare_rows = data.filter(pc.invert(has_vector))
        bare = dict(base.bare) if base is not None else {}
        for a in gone:
            bare.pop(a, None)
        bare.update(zip(bare_rows.column("_rowaddr").to_pylist(),
                        zip(bare_rows.column("step").to_pylist(), bare_rows.column("branch").to_pylist(), strict=True),
                        strict=True))
        data = data.filter(has_vector)
        vec_col = data.column("vector").combine_chunks()
        dim = vec_col.type.list_size
        flat = vec_col.flatten().to_numpy(zero_copy_only=False)
        new_vectors = np.asarray(flat, dtype=np.float32).reshape(-1, dim)
        keep = len(base.ids) if base is not None else 0
        codes = {k: dict(v) for k, v in base.codes.items()} if base is not None else {"step": {}, "branch": {}, "period": {}}
        columns = {name: _encode(data.column(name), codes[name]) for name in ("step", "branch", "period")}
        ids = np.asarray(data.column("id").to_numpy(zero_copy_only=False), dtype=object)
        addr = data.column("_rowaddr").to_numpy()

        def cat(old: np.ndarray | None, new: np.ndarray) -> np.ndarray:
            return np.concatenate([old, new]) if old is not None and len(old) else new

        blank = ~new_vectors.any(axis=1)  # the zero vector: a record with no text (store/vectors.py)

        alive = None
        if base is not None and (base.alive is not None or dead is not None):
            alive = np.ones(keep + len(ids), dtype=bool)
            if base.alive is not None:
                alive[:keep] = base.alive
            if dead is not None:
                alive[:keep] &= ~dead
        m = _Matrix(
            version=version,
            ids=cat(base.ids if base else None, ids),
            codes=codes,
            steps=cat(base.steps if base else None, columns["step"]),
            branches=cat(base.branches if base else None, columns["branch"]),
            periods=cat(base.periods if base else None, columns["period"]),
            vectors=self._store_vectors(new_vectors, keep),
            addr=cat(base.addr if base else None, addr),
            alive=alive,
            blank=cat(base.blank if base else None, blank),
            bare=bare,
            fragments=_deletions(ds),
        )
        if base is not None and (base._lookup is not None or base.id_order is not None):
            prior = base.row_of()  # its order known (persisted or computed): extended, not sorted again
            new_text = as_text(ids)
            m.id_text = np.concatenate([prior.ids, new_text]) if len(new_text) else prior.ids
            m.id_order = merged_order(prior.ids, prior.order, new_text) if len(new_text) else prior.order
        if self.mode == "binary":
            m.bits = cat(base.bits if base is not None and base.bits is not None else None, _sign_bits(new_vectors))
        return m

    def _update(self, version: int, ds: Any, base: _Matrix) -> _Matrix | None:
        """``base`` brought to ``version`` when it only gained fragments and deletions; None otherwise."""
        now = {f.fragment_id: f for f in ds.get_fragments()}
        if not set(base.fragments) <= set(now):
            return None  # fragments rewritten (compaction): reload
        changed = [i for i, d in base.fragments.items() if str(now[i].metadata.deletion_file or "") != d]
        added = [now[i] for i in sorted(set(now) - set(base.fragments))]
        dead = None
        gone: set[int] = set()
        if changed:
            live = ds.scanner(columns=["id"], with_row_address=True,
                              fragments=[now[i] for i in changed]).to_table().column("_rowaddr").to_numpy()
            frag_of = (base.addr >> np.uint64(32)).astype(np.int64)
            touched = np.isin(frag_of, changed)
            dead = np.zeros(len(base.addr), dtype=bool)
            dead[touched] = ~np.isin(base.addr[touched], live)
            if base.bare:
                changed_set, live_set = set(changed), set(live.tolist())
                gone = {a for a in base.bare if (a >> 32) in changed_set and a not in live_set}
        return self._load(version, ds, base, added, dead, gone)

    @property
    def last_update(self) -> str:
        """How the current version was reached: "load" / "append" / "persisted" / "persisted+append"."""
        return "load" if self.last == BUILD else self.last

    def build(self, read: PinnedDataset | None, key: str, context: Any) -> _Matrix:
        assert read is not None and self.guard is not None  # ``_current`` asks only of a table, ``get`` guards
        self._buffer = self._file = None
        new = self._load(read.version, read.dataset, None, None, None, set())
        self._generation += 1
        self._saved = SavedMatrix(read.state, len(new.ids), self.guard)
        return new

    def extend(self, read: PinnedDataset | None, key: str, previous: _Matrix,
               context: Any) -> tuple[_Matrix, str] | None:
        if read is None:
            return None
        try:
            new = self._update(read.version, read.dataset, previous)
        except Exception:  # noqa: BLE001 - an unexpected layout: a full reload is always right
            new = None
        return (new, "append") if new is not None else None

    def load_saved(self, sidecar: Sidecar, read: PinnedDataset, key: str, context: Any) -> tuple[_Matrix, str] | None:
        """The matrix an earlier process saved beside the table (its vectors mapped, not read), brought up to
        ``read``'s version when rows were only appended or deleted since; None when there is none or it no
        longer fits (a compaction rewrote fragments)."""
        entry = sidecar.load("dense", "matrix")
        if entry is None:
            return None
        version, ds, state = read.version, read.dataset, read.state
        if not state.grew_from(entry.state):
            return None
        base = _from_entry(entry, entry.state.version)
        if self.mode == "binary":
            base.bits = _sign_bits(base.vectors)
        self._buffer = base.vectors  # read-only: appends go to the file's tail (``_VectorFile``)
        self._file = _VectorFile.of(base.vectors)
        self._generation += 1
        assert self.guard is not None  # taken by ``get`` before any row was read
        self._saved = SavedMatrix(entry.state, len(base.ids), self.guard)
        if state.same_rows(entry.state):
            base.version = version
            return base, "persisted"
        try:
            new = self._update(version, ds, base)
        except Exception:  # noqa: BLE001 - an unexpected layout: a full reload is always right
            new = None
        return (new, "persisted+append") if new is not None else None

    def save(self, saving: SaveGuard, read: PinnedDataset, key: str, value: _Matrix, how: str,
             context: Any) -> None:
        """Saved at a full load only: an append writes its rows to the saved file's tail (``_VectorFile``)."""
        if how == BUILD:
            saving.save("dense", "matrix", read.state, lambda: _to_entry(value), mapped=("vectors",))

    def _current(self) -> _Matrix | None:
        read = self.store.read_dataset()  # through pylance: a search never imports lancedb
        if read is None:
            return None
        with self.lock:  # the matrix is keyed by its version, made of its rows, saved with its state
            m = self.get(read, MATRIX)
            if self.mode == "binary" and m.bits is None:
                m.bits = _sign_bits(m.vectors)
            return m

    def _ready(self, steps: list[str] | None, scope: BranchScope) -> _Matrix | None:
        """The matrix, after embedding any record in scope that was written without a vector."""
        m = self._current()
        groups = scope.groups(steps)
        if m is not None and any(b in groups and (not groups[b] or s in groups[b]) for s, b in m.unembedded):
            self.store.vectors.ensure(scope, steps)
            m = self._current()
        return m

    # -- scopes -------------------------------------------------------------------------------------
    def _scope(self, m: _Matrix, steps: list[str] | None, scope: BranchScope,
               periods: list[str] | None) -> tuple[np.ndarray, np.ndarray, bool]:
        """(rows in scope, their ids, whether that is every row), cached per matrix and scope."""
        groups = scope.groups(steps)  # copy-on-write: inherited steps read the serving branch's rows
        key = (tuple(sorted((b, tuple(n) if n else None) for b, n in groups.items())),
               tuple(periods) if periods else None)
        hit = m._scopes.get(key)
        if hit is not None:
            return hit
        mask = np.zeros(len(m.ids), dtype=bool)
        for served_by, names in groups.items():
            part = m.branches == m.codes["branch"].get(served_by, -1)
            if names:
                part &= np.isin(m.steps, [m.codes["step"].get(s, -1) for s in names])
            mask |= part
        if periods:
            mask &= np.isin(m.periods, [m.codes["period"].get(p, -1) for p in periods])
        if m.alive is not None:
            mask &= m.alive
        mask &= ~m.blank  # no text, no meaning: it takes no part in dense ranking
        rows = np.flatnonzero(mask)
        entry = (rows, m.ids[rows], len(rows) == len(m.ids))
        if len(m._scopes) >= 64:
            m._scopes.clear()
        m._scopes[key] = entry
        return entry

    # -- approximate search -------------------------------------------------------------------------
    def _ivf(self, m: _Matrix) -> Any | None:
        """The IVF index over ``m``'s rows when ready (with rows appended since added); else None, after
        starting its build in the background."""
        with self._lock:
            generation = self._generation
            ann = self._ann
            if ann is not None and ann[0] == generation:
                index = ann[1]
            else:
                # saved beside the table with this matrix: loaded now (a copy of ~400 MB at 1M records, under
                # a second), so even a new process's first search takes the IVF shortlist
                index = self._saved_ivf(self._saved) if self._ann_thread is None else None
                if index is not None:
                    self._ann = (generation, index)
                elif self._ann_thread is None or not self._ann_thread.is_alive():
                    vectors = m.vectors  # rows below len(m.ids) are never rewritten (see _store_vectors)
                    self._ann_thread = threading.Thread(target=self._build_ivf, args=(generation, vectors, self._saved),
                                                        name="synthex-ivf-build", daemon=True)
                    self._ann_thread.start()
        if index is not None:
            index.extend(m.vectors)
        return index

    def _saved_ivf(self, saved: SavedMatrix | None) -> Any | None:
        """The IVF index saved with the matrix ``saved`` describes, or None (none saved, or saved for other rows)."""
        if saved is None:
            return None
        entry = sidecar(self.store).load("dense_ivf", "ivf")
        if entry is None or entry.state != saved.state or int(entry.meta.get("rows", -1)) != saved.rows:
            return None
        from synthex_resources.search.indexes.ann import IvfIndex

        try:
            index = IvfIndex.loaded(entry.arrays["index"], saved.rows)
        except RuntimeError:  # an unreadable save: built again
            return None
        self.ivf_source = "loaded"
        return index

    def _build_ivf(self, generation: int, vectors: np.ndarray, saved: SavedMatrix | None) -> None:
        """The IVF index of this matrix generation: the one saved with the matrix when there is one (a
        write since only appended rows, which ``_ivf`` adds), else built over the saved rows and saved."""
        from synthex_resources.search.indexes.ann import IvfIndex

        index = self._saved_ivf(saved)
        if index is None:
            index = IvfIndex(vectors[:saved.rows] if saved is not None else vectors)
            self.ivf_source = "built"
            if saved is not None:
                data, rows = index.to_bytes()
                saved.saving.save("dense_ivf", "ivf", saved.state, lambda: ({"rows": rows}, {"index": data}),
                                  background=False, mapped=("index",))
        with self._lock:
            if self._generation == generation:
                self._ann = (generation, index)

    def wait_for_ann(self, timeout: float | None = None) -> bool:
        """Block until a background IVF build ends (benchmarks, tests); True if an index is ready."""
        thread = self._ann_thread
        if thread is not None:
            thread.join(timeout)
        return self._ann is not None and self._ann[0] == self._generation

    def _approximate_rows(self, m: _Matrix, rows: np.ndarray, everything: bool, q: np.ndarray,
                          n: int) -> np.ndarray | None:
        """A shortlist of matrix rows from the IVF index, or None when the scope is scanned exactly."""
        if self.mode != "auto" or len(rows) < self.ann_from:
            return None
        index = self._ivf(m)
        if index is None:
            return None
        allowed = None
        if not everything:
            allowed = np.zeros(len(m.ids), dtype=bool)
            allowed[rows] = True
        found = index.search(q, n, allowed, share=len(rows) / max(1, len(m.ids)))
        # The index is shared: another search may have extended it past this (older) matrix's rows.
        return found[found < len(m.ids)]

    def approximate_scores(self, query_vector: np.ndarray, steps: list[str] | None, scope: BranchScope,
                  periods: list[str] | None, n: int) -> tuple[np.ndarray, np.ndarray, float] | None:
        """For a scope large enough for the IVF index: (ids, exact similarities) of about the ``n``
        nearest records, and the scope's median similarity estimated from a fixed sample of its rows.
        None when the scope is scanned exactly (``scores`` then gives every similarity)."""
        m = self._ready(steps, scope)
        if m is None or not len(m.ids):
            return None
        rows, _, everything = self._scope(m, steps, scope, periods)
        q = np.asarray(query_vector, dtype=np.float32)
        found = self._approximate_rows(m, rows, everything, q, n)
        if found is None:
            return None
        cached = m._samples.get(id(rows))
        if cached is None or cached[0] is not rows:
            sample = rows[np.linspace(0, len(rows) - 1, min(SAMPLE_ROWS, len(rows))).astype(np.int64)]  # evenly spaced
            cached = m._samples[id(rows)] = (rows, np.ascontiguousarray(m.vectors[sample]))  # a copy: 6 MB at 4,096
        median = float(np.median(cached[1] @ q))
        return m.ids[found], m.vectors[found] @ q, median

    # -- queries ------------------------------------------------------------------------------------
    def vectors_of(self, ids: list[str]) -> dict[str, np.ndarray]:
        m = self._current()
        if m is None:
            return {}
        rows = m.row_of().rows(ids)  # one batch lookup
        found = np.flatnonzero(rows >= 0)
        # one gather, then rows of the copy: a row of the mapped matrix is a memmap view (~25 us each)
        block = np.asarray(m.vectors[rows[found]])
        return {ids[i]: block[j] for j, i in enumerate(found.tolist())}

    def similarities_of(self, ids: list[str], query_vector: np.ndarray) -> tuple[list[str], np.ndarray]:
        """The ids of ``ids`` the matrix holds (in ``ids`` order) and their cosine similarity to
        ``query_vector``: one gather and one product (the vectors as ``vectors_of`` gives them)."""
        m = self._current()
        if m is None or not ids:
            return [], np.zeros(0, np.float32)
        rows = m.row_of().rows(ids)
        found = np.flatnonzero(rows >= 0)
        if not len(found):
            return [], np.zeros(0, np.float32)
        vectors = np.asarray(m.vectors[rows[found]])  # a copy (rows gathered), as np.stack of them was
        return [ids[i] for i in found.tolist()], vectors @ np.asarray(query_vector, dtype=np.float32)

    def row_addresses(self, ids: list[str], scope: BranchScope) -> tuple[int | None, dict[str, int]]:
        """The table version the matrix holds and the Lance row addresses (at that version) of those ``ids``
        whose row is the only row of its id in the table and one ``scope`` reads: what
        ``records.rows_by_id(ids, scope=scope)`` would find for them, to be taken by address instead of a
        filtered scan (search/indexes/leaf_scope.py, ``leaf_rows``). Ids it cannot vouch for are absent (the caller
        reads them as before): all of them when rows without a vector exist (the matrix does not hold them)
        or ``scope`` pins a version of its own."""
        m = self._current()
        if m is None or not ids or m.bare or scope.version is not None:
            return None, {}
        rows = m.row_of().single_rows(ids)
        found = np.flatnonzero(rows >= 0)
        if not len(found):
            return m.version, {}
        at = rows[found]
        read = np.zeros(len(at), dtype=bool)
        for served_by, names in scope.groups(None).items():
            part = m.branches[at] == m.codes["branch"].get(served_by, -1)
            if names:
                part &= np.isin(m.steps[at], [m.codes["step"].get(s, -1) for s in names])
            read |= part
        return m.version, {ids[i]: int(a) for i, a, ok in zip(found.tolist(), m.addr[at].tolist(), read.tolist(),
                                                            strict=True) if ok}

    def without_text(self) -> set[str]:
        """Ids of the live records with no text (their zero vector, store/vectors.py); empty for most stores."""
        m = self._current()
        if m is None or not m.blank.any():
            return set()
        rows = np.flatnonzero(m.blank if m.alive is None else m.blank & m.alive)
        return set(m.ids[rows].tolist())

    def scores(self, query_vector: np.ndarray, steps: list[str] | None, scope: BranchScope,
               periods: list[str] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact cosine similarity of every record in scope: (ids, similarities, matrix rows). For one
        table version and scope, ``ids`` is the same array object every call."""
        m = self._ready(steps, scope)
        if m is None or not len(m.ids):
            return np.zeros(0, object), np.zeros(0, np.float32), np.zeros(0, np.int64)
        rows, ids, everything = self._scope(m, steps, scope, periods)
        return ids, self._exact(m, rows, everything, query_vector), rows

    @staticmethod
    def _exact(m: _Matrix, rows: np.ndarray, everything: bool, query_vector: np.ndarray) -> np.ndarray:
        q = np.asarray(query_vector, dtype=np.float32)
        if everything:
            return m.vectors @ q
        if not len(rows):
            return np.zeros(0, np.float32)
        if len(rows) * 4 < len(m.ids):  # a small scope: copy its rows out
            return m.vectors[rows] @ q
        return (m.vectors @ q)[rows]  # multiply all rows, then select: cheaper than copying most of them

    def search(self, query_vector: np.ndarray, steps: list[str] | None, scope: BranchScope,
               periods: list[str] | None, n: int, exact: bool | None = None) -> list[tuple[str, float, np.ndarray]]:
        """Top ``n`` (id, cosine similarity, vector), ties broken by id. Every row tied with the n-th
        similarity is a candidate before the cut, so which of a tie group makes it does not depend on
        the matrix's row order (the order records were written in). ``exact`` overrides the mode
        (True: the float32 scan, False: the binary shortlist)."""
        m = self._ready(steps, scope)
        if m is None or not len(m.ids) or n <= 0:
            return []
        rows, _, everything = self._scope(m, steps, scope, periods)
        if not len(rows):
            return []
        q = np.asarray(query_vector, dtype=np.float32)
        want = max(self.shortlist, 8 * n)
        approximate = self.mode != "float32" if exact is None else not exact
        found = self._approximate_rows(m, rows, everything, q, max(200, 8 * n)) if approximate else None
        if found is not None:
            rows = found
            sims = m.vectors[rows] @ q
        elif approximate and self.mode == "binary" and len(rows) > want and m.bits is not None:
            qbits = _sign_bits(q[None, :])[0]
            bits = m.bits if everything else m.bits[rows]
            hamming = np.bitwise_count(bits ^ qbits).sum(axis=1, dtype=np.uint16)
            rows = rows[np.argpartition(hamming, want - 1)[:want]]
            sims = m.vectors[rows] @ q
        else:
            sims = self._exact(m, rows, everything, q)
        if len(rows) > n:
            kth = np.partition(sims, len(sims) - n)[len(sims) - n]  # the n-th largest similarity
            top = np.flatnonzero(sims >= kth)
        else:
            top = np.arange(len(rows))
        ranked = sorted(((m.ids[rows[i]], float(sims[i]), rows[i]) for i in top), key=lambda p: (-p[1], p[0]))
        return [(rid, sim, m.vectors[row]) for rid, sim, row in ranked[:n]]


def dense_index(store: RecordStore) -> DenseIndex:
    """The store's matrix (one per store object; it lives and dies with the store)."""
    return store.search_state.dense
