"""What the application's parts (branches, purge, doctor) ask of the project they work on.

``ProjectApp`` provides it; the parts depend on this protocol, not on the facade that creates them, so
the application layer has no import cycle (the facade imports the parts, the parts import this)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from synthex.core.definition import PipelineDefinition, Plan
from synthex.core.progress import ProgressReporter
from synthex.core.record import Record, Run

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from synthex_resources.record_store import RecordStore


class AppServices(Protocol):
    pipeline: PipelineDefinition

    @property
    def store(self) -> RecordStore: ...

    @property
    def instance(self) -> DagsterInstance: ...

    def close(self) -> None: ...

    def plan(self, step: str | None = None, from_: str | None = None, full: bool = False,
             branch: str | None = None) -> Plan: ...

    def run(self, step: str | None = None, from_: str | None = None, full: bool = False, branch: str | None = None,
            progress: ProgressReporter | None = None, wait: bool = False,
            on_wait: Callable[[str], None] | None = None, allow_deletions: bool = False,
            verbose: bool = False, resume_purge: bool = True, say: Callable[[str], None] | None = None,
            track_changes: bool = True, workers: int | None = None) -> Run: ...

    def finish_interrupted_purge(self, say: Callable[[str], None] | None = None,
                                 on_event: Callable[[Any], None] | None = None,
                                 wait: bool = False) -> Any: ...

    def use_branch(self, branch: str | None) -> PipelineDefinition: ...

    def get(self, record_id: str, branch: str | None = None) -> Record | None: ...

    def records(self, step: str, branch: str | None = None) -> list[Record]: ...

    def runs(self, limit: int = 20) -> list[Run]: ...

    def mark_failed(self, run: Run, reason: str) -> None: ...

    def stats(self, branch: str | None = None) -> dict[str, Any]: ...
