"""The migration-format registry: ``MigrationFormat``, ``Sniff`` and ``MigrationFormats`` (the catalogue of
built-ins is ``synthex.core.importers.migrate.catalogue``)."""


from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synthex.core.importers.base import Intake, SourceItem, binary_kind, loads, open_regular

HEAD_BYTES = 64 * 1024  # what sniffing reads of a file: enough for a JSON file's first object or a JSONL line
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass
class Sniff:
    """What detection knows of a file: its first ``HEAD_BYTES``, and (read once, on demand, within the
    source bound) its whole JSON value. A format's sniff must not fail: a file it cannot read is not its."""

    path: Path
    head: bytes
    max_bytes: int
    _json: tuple[bool, Any] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, path: Path, max_bytes: int) -> Sniff | None:
        try:
            fd, st = open_regular(path)
        except OSError:
            return None
        try:
            head = os.read(fd, HEAD_BYTES)
        finally:
            os.close(fd)
        return cls(path, head, min(max_bytes, st.st_size) if st.st_size <= max_bytes else -1)

    @property
    def is_sqlite(self) -> bool:
        return self.head.startswith(SQLITE_MAGIC)

    def first_line(self) -> Any:
        """The JSON value on the first non-blank line (None when it is not JSON)."""
        if binary_kind(self.head[:8]) or self.is_sqlite:
            return None
        for raw in self.head.split(b"\n"):
            if raw.strip():
                try:
                    return loads(raw.decode("utf-8-sig"))
                except (ValueError, UnicodeDecodeError):
                    return None
        return None

    def json(self) -> Any:
        """The file's JSON value, unwrapped when it is a JSON string holding JSON (some published Letta
        agent files are); None when it is not JSON or is over the bound."""
        if self._json is None:
            self._json = (True, None)
            if self.max_bytes >= 0 and not self.is_sqlite and not binary_kind(self.head[:8]):
                from synthex.core.importers.base import read_json

                try:
                    self._json = (True, unwrap_json_string(read_json(self.path, self.max_bytes)))
                except Exception:  # noqa: BLE001 - a sniff: a file this cannot read is not this format's
                    self._json = (True, None)
        return self._json[1]


def unwrap_json_string(value: Any, depth: int = 2) -> Any:
    """A JSON string whose text is a JSON object or list, decoded (at most ``depth`` times)."""
    while depth and isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            value = json.loads(value)
        except ValueError:
            break
        depth -= 1
    return value


@dataclass(frozen=True)
class MigrationFormat:
    """One format of another memory system (or Synthex's export).

    ``step``: the name ``synthex init`` gives the source step reading it; ``views``: the ``migrated`` steps
    init puts over that source, ``(step name, item kinds, searched)`` each: what is searched as current
    memory, what stays history (in the source's records, visible through lineage). ``turn_kind``: the kind
    of item a conversation's turn is in this format (a Letta agent's ``message``, a Mem0 ``memory`` added
    with ``infer=False``), so ``synthex eval`` feeds a benchmark's turns through an imported project's
    steps as that (``synthex.core.importers.migrate.turns``); None: the format holds no conversation turns
    (archival passages, an MCP entity graph)."""

    name: str
    system: str
    description: str
    sniff: Callable[[Sniff], bool]
    parse: Callable[[Path, Intake], list[SourceItem]]
    step: str
    views: tuple[tuple[str, tuple[str, ...], bool], ...] = ()
    turn_kind: str | None = None


class MigrationFormats:
    """The registry of migration formats, in detection order (the first whose sniff says yes)."""

    def __init__(self) -> None:
        self._formats: dict[str, MigrationFormat] = {}

    def register(self, fmt: MigrationFormat) -> None:
        if fmt.name in self._formats:
            raise ValueError(f"migration format {fmt.name!r} is registered already")
        self._formats[fmt.name] = fmt

    def get(self, name: str) -> MigrationFormat | None:
        return self._formats.get(name)

    def names(self) -> list[str]:
        return list(self._formats)

    def __iter__(self):
        return iter(self._formats.values())

    def detect(self, path: Path, max_bytes: int) -> MigrationFormat | None:
        if path.is_dir():
            return None
        sniff = Sniff.of(path, max_bytes)
        if sniff is None:
            return None
        return next((f for f in self if f.sniff(sniff)), None)


