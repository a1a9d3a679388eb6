"""What every source kind answers: its items, a cheap change token, and how to name it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol, runtime_checkable

from synthex.core.deletions import DeletionReporting
from synthex.core.importers import SourceItem
from synthex.core.sources.quarantine import Quarantine


class SourceOrigin(ABC):
    """Where a source step's items come from: an export file or folder, a table, a stream, an API.

    ``items()`` is the source's whole current content (the planner compares it with the stored
    records, so a run is idempotent whatever the kind). ``token()`` is the cheap "did anything
    change?" test sensors make every tick; equal tokens mean nothing changed.
    """

    kind: str = ""
    # How this kind says an item is gone (synthex.core.deletions): a snapshot (an export) only by leaving it
    # out, so the deletion guard judges how much went; a kind that names each deletion says EXPLICIT.
    deletions: DeletionReporting = DeletionReporting.SNAPSHOT

    @abstractmethod
    def items(self) -> list[SourceItem]: ...

    @abstractmethod
    def token(self) -> str: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the data is, for messages and for the source's identity (a path, a dsn and table...)."""

    def is_empty(self) -> bool:
        """The source holds nothing at all (the deletion guard's "suddenly empty")."""
        return not self.items()

    def warnings(self) -> list[str]:
        return [w for item in self.items() for w in item.warnings]

    def why_empty(self) -> str | None:
        """One line saying why the source yields no item although it holds data (a folder whose files are no
        notes, an export split into parts read as notes); None otherwise. Never an empty memory without a word."""
        return None

    def config(self) -> dict[str, Any]:
        """What belongs in the step's version: how items are read, never where from."""
        return {"kind": self.kind}

    def toml_config(self) -> dict[str, Any]:
        return {self.kind: self.describe()}

    def pull(self) -> int:
        """Fetch what the origin cannot be asked for again (API pages) into local storage; returns the
        number of new items fetched. Files, tables and streams are read where they are: 0."""
        return 0


@runtime_checkable
class SetsAside(Protocol):
    """An origin that sets aside what cannot become an item and reads on: a stream's lines, a notes
    folder's notes (``synthex.core.sources.quarantine``). A protocol, not ``SourceOrigin`` methods: a
    wrapper of origins (one that delegates what it does not define) passes it through."""

    def quarantine(self) -> Quarantine:
        """What is set aside now (malformed, undatable, too long, unreadable), by file and reason."""
        ...


@runtime_checkable
class LineReader(SetsAside, Protocol):
    """An origin that reads a file line by line (a stream, an API's landing stream): it sets aside the
    lines that cannot become items, and reads at most a batch of lines beyond its checkpoint."""

    def waiting(self) -> bool:
        """Whole lines exist beyond this read's batch (``Limits.stream_batch_lines``): the next sync reads on."""
        ...

    def read_position(self) -> int:
        """How many lines were read (what ``commit_position`` records)."""
        ...

    def commit_position(self, position: int) -> None:
        """The lines up to ``position`` are in memory: the next read may take a batch beyond them."""
        ...
