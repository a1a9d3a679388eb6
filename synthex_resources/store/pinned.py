"""The records table at one version, as one search reads it (``PinnedDataset``), and which rows that is
(``TableState``).

Every structure search keeps per table version (leaf bookkeeping, multi-hop lexicon, word index, postings,
dense matrix, drill-down keys) is keyed by ``PinnedDataset.version``, reads its rows from
``PinnedDataset.dataset`` and is saved beside the table with ``PinnedDataset.state``: three views of one
opened dataset, so a structure cannot be keyed by one version and made of, or saved as, another
(``LanceTables.read_dataset`` hands out one per search: the one its pin holds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from synthex_resources.store import filters
from synthex_resources.store.filters import RecordFilter


@dataclass(frozen=True)
class TableState:
    """Which rows a structure was built from: the version and, per fragment, its data and deletion files."""

    version: int
    files: tuple[tuple[int, str, str], ...]  # (fragment id, first data file, deletion file or "")

    @staticmethod
    def of(ds: Any) -> TableState:
        files = []
        for f in ds.get_fragments():
            data = f.metadata.files
            files.append((int(f.fragment_id), data[0].path if data else "", str(f.metadata.deletion_file or "")))
        return TableState(int(ds.version), tuple(sorted(files)))

    def data_files(self) -> dict[int, str]:
        return {fid: path for fid, path, _ in self.files}

    def same_rows(self, other: TableState) -> bool:
        """The same fragments with the same deletions (the version may differ: an index update)."""
        return self.files == other.files

    def grew_from(self, older: TableState) -> bool:
        """Every fragment of ``older`` is still here with the same data file (appends and deletions only)."""
        mine = self.data_files()
        return all(mine.get(fid) == path for fid, path, _ in older.files)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "files": [list(f) for f in self.files]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> TableState:
        return TableState(int(data["version"]), tuple((int(a), str(b), str(c)) for a, b, c in data["files"]))


@dataclass(frozen=True, eq=False)
class PinnedDataset:
    """The records table opened at ``version``. Invariant: ``dataset.version == version`` and ``state`` is
    ``TableState.of(dataset)``, so whatever is keyed by ``version`` and read through this object is made of
    that version's rows and saved as that version."""

    version: int
    dataset: Any = field(repr=False)  # a pylance ``LanceDataset`` at ``version``

    @staticmethod
    def of(ds: Any) -> PinnedDataset:
        return PinnedDataset(int(ds.version), ds)

    @cached_property
    def state(self) -> TableState:
        """The fragments this version holds (asked once: a fragment listing per ask)."""
        return TableState.of(self.dataset)

    def rows(self, where: str | None, columns: list[str] | None = None) -> list[dict[str, Any]]:
        """This version's rows matching ``where`` (built by ``store.filters``)."""
        return self.dataset.to_table(columns=columns, filter=where).to_pylist()

    def rows_by_id(self, ids: Iterable[str], columns: list[str] | None = None,
                   within: RecordFilter | None = None) -> dict[str, dict[str, Any]]:
        """This version's rows of ``ids`` as ``Records.rows_by_id`` reads them: read in chunks, the first row
        of each id in table order, missing ids absent; ``within``: rows matching that filter too (its scope's
        own version, if any, is not read here), else any row of each id (rows of one id hold the same
        content: ids are content addresses)."""
        base = within if within is not None else RecordFilter()
        found: dict[str, dict[str, Any]] = {}
        for chunk in filters.chunks(ids):
            for row in self.rows(filters.where(base.with_ids(chunk)), columns):
                found.setdefault(row["id"], row)
        return found
