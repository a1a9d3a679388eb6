"""The purge journal: what an unfinished ``synthex purge`` still has to do, so a killed purge is finished by
the next ``synthex purge`` (same arguments, or ``--resume``), ``synthex run`` / ``sync`` or ``synthex
doctor --repair``.

Why it exists: a purge deletes the rows first and sweeps their text out of the data directory after
(``synthex.app.purge``). Once the rows are gone nothing in the store says what is left to sweep, or
which text the raw-byte scan must look for: a purge killed between the two could never finish, and
the text stayed in old LanceDB fragments for good. So before anything is deleted the journal records
the purge's targets, and each step is recorded as done once it has happened; every step is safe to run
again.

Two files under ``<data dir>/purge-journal/``:

- ``progress.json``: the steps in order and those done, with their counts. No purged text (record ids
  are content hashes, the ledger lists them too): ``synthex status`` reads it without opening the store.
- ``targets.json``: the cascade, the ledger entries, the purged items (by the ledger's hash of their
  keys), digests of the purged texts, and the prints of the needles (pieces of the purged source text,
  a ``--match`` text) the sweep and the scan look for (``synthex.core.needle_prints``): no purged text,
  so a purge killed before its sweep ended leaves none of it here (the final scan reads this folder
  too). It is encrypted with the store's cipher when the store is encrypted, and overwritten and
  deleted when the purge completes. A journal written by an older version (``synthex-purge-journal/1``:
  needles and item keys as text) is read and finished as it is.

``progress.json`` is written first, ``targets.json`` second; a journal exists when ``targets.json``
does (a folder without it is what a purge killed before its first delete left: nothing to finish, and
it is removed).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from synthex.core.atomic_file import write_file_atomic
from synthex.core.errors import SynthexError
from synthex.core.needle_prints import NeedlePrint, prints_of
from synthex.core.periods import now_iso
from synthex.core.purges import source_key_hash

JOURNAL_DIR = "purge-journal"
TARGETS_FILE = "targets.json"
PROGRESS_FILE = "progress.json"
FORMAT = "synthex-purge-journal/2"
RESUME_HINT = "`synthex purge --resume` finishes it (so does any `synthex run` or `synthex doctor --repair`)"


class PurgeStepError(SynthexError):
    """A step of a purge failed (a file it could not rewrite, a store error): one line naming the step and
    what failed; the journal keeps what is left to do."""


class TextCipher(Protocol):
    """The store's cipher as the journal uses it (``synthex_resources.encryption.StoreCipher``)."""

    def encrypt(self, text: str) -> str: ...

    def decrypt(self, value: str) -> str: ...


class PurgePhase(StrEnum):
    """The steps of a purge, in order (``synthex.app.purge``). The stored values are these strings."""

    JOURNALED = "journaled"  # targets recorded; nothing deleted yet
    LEDGER = "ledger"  # purged.json learned the ids and items
    DELETE = "delete"  # one branch's rows deleted
    RERUN = "rerun"  # one branch re-run without them
    CACHE = "cache"  # LLM cache entries that produced purged text dropped
    BOOKKEEPING = "bookkeeping"  # run and hook bookkeeping text scrubbed
    CDC = "cdc"  # the CDC state forgot the purged items
    COMPACTION = "compaction"  # LanceDB fragments rewritten, old versions removed
    FILES = "files"  # SQLite / DuckDB / text files under the data dir scrubbed
    CDC_REBUILD = "cdc-rebuild"  # the CDC DuckDB file copied into a fresh one
    SCAN = "scan"  # the raw-byte scan of the data dir


PER_BRANCH = frozenset({PurgePhase.DELETE, PurgePhase.RERUN})
SWEEP = (PurgePhase.CACHE, PurgePhase.BOOKKEEPING, PurgePhase.CDC, PurgePhase.COMPACTION, PurgePhase.FILES,
         PurgePhase.CDC_REBUILD, PurgePhase.SCAN)


@dataclass(frozen=True)
class PurgeStep:
    phase: PurgePhase
    branch: str | None = None  # for DELETE and RERUN

    @property
    def key(self) -> str:
        return f"{self.phase.value}:{self.branch}" if self.branch is not None else self.phase.value

    @classmethod
    def parse(cls, key: str) -> PurgeStep:
        phase, _, branch = key.partition(":")
        return cls(PurgePhase(phase), branch or None)

    def describe(self) -> str:
        return self.phase.value + (f" on branch {self.branch}" if self.branch is not None else "")


@dataclass(frozen=True)
class PurgeEvent:
    """What a purge reports to its ``on_event`` hook: a step recorded done (``done``), or progress inside
    one (a re-run's step writing records, a table compacted: ``detail``). Tests kill a purge at a known
    point from this hook."""

    step: PurgeStep
    done: bool
    detail: str = ""


def plan_steps(delete_branches: list[str], rerun_branches: list[str]) -> list[PurgeStep]:
    return [PurgeStep(PurgePhase.JOURNALED), PurgeStep(PurgePhase.LEDGER),
            *(PurgeStep(PurgePhase.DELETE, b) for b in delete_branches),
            *(PurgeStep(PurgePhase.RERUN, b) for b in rerun_branches),
            *(PurgeStep(p) for p in SWEEP)]


@dataclass
class PurgeTargets:
    """What the purge removes and looks for; written before the first delete (``targets.json``). No field
    holds purged text: ids are content hashes, texts and item keys are known by digests and prints."""

    roots: list[str]
    rows: list[tuple[str, str, str, str]]  # the cascade: (id, step, branch, period)
    ledger: list[dict[str, str]]  # synthex.core.purges.LedgerEntry dicts
    source_key_hashes: dict[str, list[str]]  # source step -> source_key_hash of the items the CDC state forgets
    text_digests: list[str]  # sha256 of each purged record's content (LLM cache responses equal to one go)
    raw_digests: list[str]  # sha256 of each purged record's raw model response
    needle_prints: list[list[Any]]  # NeedlePrint.to_list() of each piece the sweep removes and the scan looks for
    id_prefixes: list[str]  # purged ids' first 8 characters (Dagster previews name records by them)

    def prints(self) -> list[NeedlePrint]:
        return [NeedlePrint.from_list(n) for n in self.needle_prints]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PurgeTargets:
        data = dict(data)
        data["rows"] = [tuple(r) for r in data["rows"]]
        if "needles" in data:  # synthex-purge-journal/1 kept the text itself
            data["needle_prints"] = [n.to_list() for n in prints_of(list(data.pop("needles")))]
        if "source_keys" in data:
            data["source_key_hashes"] = {s: sorted(source_key_hash(s, k) for k in keys)
                                         for s, keys in data.pop("source_keys").items()}
        return cls(**data)


@dataclass
class PurgeProgress:
    """``progress.json``: the purge's steps, those done and their counts; no purged text."""

    purge_id: str
    started_at: str
    roots: list[str]
    records: int  # records the cascade removes (all branches)
    steps: list[PurgeStep]
    done: list[str] = field(default_factory=list)  # PurgeStep keys
    results: dict[str, Any] = field(default_factory=dict)  # step key -> what it counted

    def is_done(self, step: PurgeStep) -> bool:
        return step.key in self.done

    def pending(self) -> list[PurgeStep]:
        return [s for s in self.steps if not self.is_done(s)]

    def describe(self) -> str:
        """One line: which purge, where it stopped, how to finish it."""
        left = self.pending()
        where = f"next step: {left[0].describe()}" if left else "all steps done, journal not yet removed"
        return (f"unfinished purge {self.purge_id[:8]} of {self.records} record(s) (roots "
                f"{', '.join(r[:8] for r in self.roots)}; started {self.started_at}); {where}; {RESUME_HINT}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "purge_id": self.purge_id, "started_at": self.started_at, "roots": self.roots,
                "records": self.records, "steps": [s.key for s in self.steps], "done": self.done,
                "results": self.results}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PurgeProgress:
        return cls(purge_id=data["purge_id"], started_at=data["started_at"], roots=list(data["roots"]),
                   records=int(data["records"]), steps=[PurgeStep.parse(k) for k in data["steps"]],
                   done=list(data.get("done", [])), results=dict(data.get("results", {})))


class PurgeJournal:
    """``<data dir>/purge-journal/``: at most one unfinished purge per project (purges hold the purge
    lock, ``synthex_resources.branch_lock.PurgeLock``, while they write it)."""

    def __init__(self, data_dir: str | Path) -> None:
        self.dir = Path(data_dir) / JOURNAL_DIR

    @property
    def targets_path(self) -> Path:
        return self.dir / TARGETS_FILE

    @property
    def progress_path(self) -> Path:
        return self.dir / PROGRESS_FILE

    def exists(self) -> bool:
        """An unfinished purge is journaled (a stat; no store, no import)."""
        return self.targets_path.exists()

    def progress(self) -> PurgeProgress | None:
        if not self.exists():
            return None
        try:
            return PurgeProgress.from_dict(json.loads(self.progress_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SynthexError(f"{self.progress_path}: not a purge journal ({exc}); it is what an unfinished "
                               f"`synthex purge` still has to do and must not be edited by hand") from None

    def targets(self, cipher: TextCipher | None) -> PurgeTargets:
        data = json.loads(self.targets_path.read_text(encoding="utf-8"))
        if "sealed" in data:
            if cipher is None:
                raise SynthexError(f"{self.targets_path} is encrypted: set SYNTHEX_ENCRYPTION_KEY to the store's "
                                   f"key to finish the purge")
            data = json.loads(cipher.decrypt(data["sealed"]))
        return PurgeTargets.from_dict(data)

    def begin(self, targets: PurgeTargets, steps: list[PurgeStep], cipher: TextCipher | None) -> PurgeProgress:
        """Record a new purge (before its first delete); JOURNALED is done once this returns."""
        self.discard_stale()
        if self.exists():
            raise SynthexError(f"an unfinished purge is journaled in {self.dir}; {RESUME_HINT}")
        progress = PurgeProgress(purge_id=str(uuid.uuid4()), started_at=now_iso(), roots=list(targets.roots),
                                 records=len({r[0] for r in targets.rows}), steps=steps)
        progress.done.append(PurgeStep(PurgePhase.JOURNALED).key)
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self._write(self.progress_path, progress.to_dict())
        body: dict[str, Any] = targets.to_dict()
        if cipher is not None:
            body = {"format": FORMAT, "sealed": cipher.encrypt(json.dumps(body))}
        self._write(self.targets_path, body)
        return progress

    def mark_done(self, progress: PurgeProgress, step: PurgeStep, result: Any = None) -> None:
        if step.key not in progress.done:
            progress.done.append(step.key)
        if result is not None:
            progress.results[step.key] = result
        self._write(self.progress_path, progress.to_dict())

    def finish(self) -> None:
        """Remove the journal: its text is overwritten in place first (the folder holds nothing else)."""
        if self.targets_path.exists():
            # Renamed first: from here on there is no journal, whatever happens before the folder is gone.
            doomed = self.targets_path.with_name(TARGETS_FILE + ".tmp")
            os.replace(self.targets_path, doomed)
            with open(doomed, "r+b") as fh:
                fh.write(b"\0" * doomed.stat().st_size)
                fh.flush()
                os.fsync(fh.fileno())
        shutil.rmtree(self.dir, ignore_errors=True)

    def discard_stale(self) -> None:
        """A folder without ``targets.json`` (a purge killed while journaling, before any delete) or with
        leftover temp files: removed, so no half-written copy of purged text stays."""
        if not self.dir.exists():
            return
        if not self.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        for tmp in self.dir.glob("*.tmp"):
            tmp.unlink(missing_ok=True)

    @staticmethod
    def _write(path: Path, data: dict[str, Any]) -> None:
        write_file_atomic(path, json.dumps(data), fsync=True, mode=0o600)
