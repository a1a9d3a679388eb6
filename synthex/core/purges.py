"""The purge ledger: what ``synthex purge`` removed, so the next run does not bring it back.

A purged source item is remembered by a hash of (source step, item key), a purged record by its id.
The planner and the executor drop work items that match (``visible_work``), so re-running an unchanged
export skips the purged conversation and ``import_warnings`` says so. The ledger holds no content:
record ids are content addresses (hashes), item keys are stored hashed (a folder source's key is a
file path, which can itself be personal).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synthex.core.atomic_file import write_file_atomic

LEDGER_FILE = "purged.json"


def source_key_hash(step: str, key: str) -> str:
    """The ledger's name for source item ``key`` of step ``step``."""
    return hashlib.sha256(f"purge/v1\0{step}\0{key}".encode()).hexdigest()


@dataclass(frozen=True)
class PurgedSet:
    """Ids and source items a plan must not produce again."""

    ids: frozenset[str] = frozenset()
    source_keys: frozenset[str] = frozenset()
    per_source: dict[str, int] = field(default_factory=dict, compare=False)  # step -> items remembered

    def __bool__(self) -> bool:
        return bool(self.ids or self.source_keys)

    def hides_item(self, step: str, key: str) -> bool:
        return bool(self.source_keys) and source_key_hash(step, key) in self.source_keys


@dataclass(frozen=True)
class LedgerEntry:
    record_id: str
    step: str
    purged_at: str
    source_key: str = ""  # source_key_hash of the item, for source records

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "step": self.step, "purged_at": self.purged_at,
                "source_key": self.source_key}


class PurgeLedger:
    """``<data dir>/purged.json``: a JSON list of entries, rewritten atomically (tmp file + rename)."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / LEDGER_FILE

    def entries(self) -> list[LedgerEntry]:
        if not self.path.exists():
            return []
        try:
            rows = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{self.path}: not a purge ledger ({exc}); it lists what `synthex purge` removed "
                             f"and must not be edited by hand") from exc
        return [LedgerEntry(**row) for row in rows]

    def load(self) -> PurgedSet:
        entries = self.entries()
        per_source: dict[str, int] = {}
        for e in entries:
            if e.source_key:
                per_source[e.step] = per_source.get(e.step, 0) + 1
        return PurgedSet(frozenset(e.record_id for e in entries),
                         frozenset(e.source_key for e in entries if e.source_key), per_source)

    def add(self, new: list[LedgerEntry]) -> int:
        """Append entries not already present (by record id); returns how many were added."""
        current = self.entries()
        known = {e.record_id for e in current}
        fresh = [e for e in new if e.record_id not in known]
        if not fresh:
            return 0
        write_file_atomic(self.path, json.dumps([e.to_dict() for e in current + fresh], indent=1), fsync=True)
        return len(fresh)
