"""Record and Run: the runtime entities of design doc §3.2; a run's status and its checks' outcomes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class RecordResolver(Protocol):
    """What a record needs to follow its provenance (the record store implements it)."""

    def get_many(self, ids: list[str]) -> list[Record]: ...

RESERVED_META_NAMESPACES = ("time", "chat", "source", "step", "custom")


@dataclass
class Record:
    """One piece of content with provenance.

    ``source_ids`` is the §3.2 ``sources`` field (input record ids); ``sources()`` resolves
    them to records. ``to_dict()`` uses the §3.2 field names.
    """

    id: str
    content: str
    step: str
    branch: str = "main"
    source_ids: list[str] = field(default_factory=list)
    materialization_key: str = ""
    run_id: str = ""
    created_at: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict)
    embedding: list[float] | None = None
    period: str = ""
    _resolver: RecordResolver | None = field(default=None, repr=False, compare=False)

    # -- metadata ---------------------------------------------------------------------------
    def meta(self, dotted: str, default: Any = None) -> Any:
        """``record.meta("time.created_at")`` reads a reserved key of §3.4."""
        node: Any = self.metadata
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    # -- provenance ---------------------------------------------------------------------------
    def _need_resolver(self) -> RecordResolver:
        if self._resolver is None:
            raise RuntimeError(f"record {self.id} is not attached to a store; load it via Pipeline.get()")
        return self._resolver

    def sources(self) -> list[Record]:
        """The input records this record was made from."""
        return self._need_resolver().get_many(self.source_ids)

    def leaves(self, resolver: RecordResolver | None = None) -> list[Record]:
        """The source-step records at the bottom of this record's provenance. ``resolver``: read through
        another resolver than the record's own (a cache that serves many drill-downs: evals' ``LeafCache``)."""
        resolver = resolver or self._need_resolver()
        if not self.source_ids:
            return [self]
        seen: dict[str, Record] = {}
        frontier = [self]
        while frontier:
            next_frontier: list[Record] = []
            for rec in resolver.get_many([s for r in frontier for s in r.source_ids]):
                if rec.id in seen:
                    continue
                seen[rec.id] = rec
                if rec.source_ids:
                    next_frontier.append(rec)
            frontier = next_frontier
        return sorted((r for r in seen.values() if not r.source_ids), key=lambda r: (r.created_at, r.id))

    def lineage(self) -> dict[str, Any]:
        """``{"id", "step", "content", "sources": [same shape...]}`` down to the source records."""
        resolver = self._need_resolver()

        def build(rec: Record, depth: int) -> dict[str, Any]:
            node: dict[str, Any] = {"id": rec.id, "step": rec.step, "content": rec.content, "sources": []}
            if depth < 64:
                node["sources"] = [build(src, depth + 1) for src in resolver.get_many(rec.source_ids)]
            return node

        return build(self, 0)

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self, with_embedding: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "content": self.content,
            "step": self.step,
            "branch": self.branch,
            "sources": list(self.source_ids),
            "materialization_key": self.materialization_key,
            "run_id": self.run_id,
            "created_at": self.created_at,
            "metadata": self.metadata,
            "audit": self.audit,
            "period": self.period,
        }
        if with_embedding:
            out["embedding"] = None if self.embedding is None else [float(x) for x in self.embedding]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)


@dataclass
class RunStats:
    input: int = 0
    output: int = 0
    skipped: int = 0
    errors: int = 0
    tokens: int = 0
    duration: float = 0.0
    reused: int = 0  # copied from another branch that already held the same record (no model call)

    def add(self, other: RunStats) -> None:
        self.input += other.input
        self.output += other.output
        self.skipped += other.skipped
        self.reused += other.reused
        self.errors += other.errors
        self.tokens += other.tokens
        self.duration += other.duration

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "output": self.output,
            "skipped": self.skipped,
            "reused": self.reused,
            "errors": self.errors,
            "tokens": self.tokens,
            "duration": round(self.duration, 4),
        }


class RunStatus(StrEnum):
    """Where a run is. The values are what the runs table and ``--json`` output hold (unchanged)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class CheckName(StrEnum):
    """The asset checks every step asset carries (``synthex_assets.checks`` describes them). Defined here,
    below the Dagster adapter, so the application decides on them without loading Dagster."""

    PROVENANCE = "provenance_complete"
    RECORDS_PLANNED = "records_planned"
    UP_TO_DATE = "up_to_date"
    HOOKS = "hooks_delivered"


@dataclass(frozen=True)
class CheckOutcome:
    """One asset check's verdict on one step asset. ``check`` is a ``CheckName`` for the built-in checks; a
    plugin's own asset check on a step asset keeps its name as it is."""

    check: str
    passed: bool
    detail: str
    asset: str = ""  # the step asset it was evaluated on, when it came back from a Dagster run
    partitions: tuple[str, ...] = ()  # the ``branch|period`` partitions where it found a problem

    def __str__(self) -> str:
        return f"{self.asset}:{self.check}: {self.detail}"


@dataclass
class Run:
    """An execution of one or more steps (§3.2)."""

    id: str
    pipeline: str
    branch: str
    steps: list[str]
    status: RunStatus = RunStatus.PENDING
    started_at: str = ""
    completed_at: str = ""
    stats: RunStats = field(default_factory=RunStats)
    step_stats: dict[str, RunStats] = field(default_factory=dict)
    error: str = ""
    dagster_run_ids: list[str] = field(default_factory=list)
    wall_s: float = 0.0  # start to finish, beside ``stats.duration`` (the steps' own time)

    def __post_init__(self) -> None:
        self.status = RunStatus(self.status)  # a stored or passed-in string: one of the enum's values

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pipeline": self.pipeline,
            "branch": self.branch,
            "steps": list(self.steps),
            "status": str(self.status),
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "stats": self.stats.to_dict(),
            "step_stats": {k: v.to_dict() for k, v in self.step_stats.items()},
            "error": self.error,
            "dagster_run_ids": list(self.dagster_run_ids),
            "wall_s": round(self.wall_s, 3),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        return cls(
            id=data["id"],
            pipeline=data["pipeline"],
            branch=data["branch"],
            steps=list(data.get("steps", [])),
            status=RunStatus(data.get("status", RunStatus.PENDING)),
            started_at=data.get("started_at", ""),
            completed_at=data.get("completed_at", ""),
            stats=RunStats(**data.get("stats", {})),
            step_stats={k: RunStats(**v) for k, v in data.get("step_stats", {}).items()},
            error=data.get("error", ""),
            dagster_run_ids=list(data.get("dagster_run_ids", [])),
            wall_s=float(data.get("wall_s", 0.0)),
        )
