"""One sync pass over a pipeline's sources: pull what must be fetched, detect what changed (CDC state),
and plan which (branch, period) partitions that makes dirty. The CLI (``synthex sync``), the sensors
and the reconcile schedule share it; they differ only in how they run the work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synthex.core.definition import PipelineDefinition
from synthex.core.project import branch_names
from synthex.core.purges import PurgeLedger
from synthex_resources.cdc_state import CdcState, SourceChanges
from synthex_resources.planner import plan_pipeline
from synthex_resources.record_store import RecordStore


def detect_changes(pipeline: PipelineDefinition, cdc: CdcState, sources: list[str] | None = None,
                   pull: bool = True) -> list[SourceChanges]:
    """Per source (main's definition): fetch API pages into the landing stream, then compare the
    source with its stored CDC state. Nothing is committed: commit once the records are written."""
    root = pipeline.root()
    purged = PurgeLedger(root.data_dir).load()
    out = []
    for name in root.source_steps(sources):
        origin = root.steps[name].reader()  # type: ignore[attr-defined]
        pulled = origin.pull() if pull else 0
        hidden = (lambda key, name=name: purged.hides_item(name, key)) if purged.per_source.get(name) else None
        changes = cdc.detect(name, origin, hidden)
        changes.pulled = pulled
        out.append(changes)
    return out


@dataclass
class BranchWork:
    """Dirty partitions of one branch: the steps to run and the periods (``branch|period`` keys)."""

    branch: str
    steps: list[str]
    periods: list[str]
    all_periods: list[str] = field(default_factory=list)  # every period the data has (to register)


def pending_work(pipeline: PipelineDefinition, store: RecordStore, branches: list[str] | None = None,
                 from_: str | None = None) -> list[BranchWork]:
    """What runs would bring every branch (main and the project's branch files) up to date."""
    root = pipeline.root()
    names = branches if branches is not None else ["main", *branch_names(root.project_dir)]
    out = []
    for branch in names:
        plan = plan_pipeline(root, branch=branch, from_=from_, store=store)
        if plan.steps:
            periods = sorted({p for ps in plan.partitions.values() for p in ps})
            out.append(BranchWork(branch, plan.steps, periods, plan.periods))
    return out
