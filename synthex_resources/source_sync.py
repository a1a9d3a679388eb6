"""One sync pass over a pipeline's sources: pull what must be fetched, detect what changed (CDC state),
judge what each source would delete (``synthex.core.deletions``), and plan which (branch, period) partitions
that makes dirty. The CLI (``synthex run`` / ``synthex sync``), the sensors, the reconcile schedule and
the step op of a UI-launched run share it; they differ only in how they run the work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synthex.core.definition import PipelineDefinition
from synthex.core.deletions import DeletionConsent, DeletionGuard, DeletionVerdict, enforce
from synthex.core.naming import check_branch_name
from synthex.core.project import branch_names
from synthex.core.purges import PurgeLedger
from synthex.core.sources.base import LineReader, SetsAside
from synthex.core.sources.bounded import BoundedOrigin
from synthex_resources.cdc_state import CdcState, SourceChanges, TokenSnapshot
from synthex_resources.planner import compute_partition_plan
from synthex_resources.record_store import RecordStore

WAITING_MARK = ":lines-waiting"  # on a stored token: whole lines were left beyond the read's batch
HELD_MARK = ":items-held"  # on a stored token: items were held back for their date (they enter later)


def detect_changes(pipeline: PipelineDefinition, cdc: CdcState | TokenSnapshot, sources: list[str] | None = None,
                   pull: bool = True) -> list[SourceChanges]:
    """Per source (main's definition): fetch API pages into the landing stream, then compare the
    source with its stored CDC state. Nothing is committed: commit once the records are written.
    With a ``TokenSnapshot`` only the unchanged sources are answered (a run's fast path, ``pull=False``)."""
    root = pipeline.root()
    purged = PurgeLedger(root.data_dir).load()
    out = []
    for name in root.source_steps(sources):
        origin = root.steps[name].reader()  # type: ignore[attr-defined]
        pulled = origin.pull() if pull else 0
        hidden = (lambda key, name=name: purged.hides_item(name, key)) if purged.per_source.get(name) else None
        changes = cdc.detect(name, origin, hidden)
        changes.pulled = pulled
        changes.empty = origin.why_empty()  # also when unchanged: said until the source is read right
        if isinstance(origin, SetsAside):
            # Also when the token is unchanged: a line or note set aside is said until it is fixed or removed.
            changes.quarantine = origin.quarantine()
        if isinstance(origin, LineReader):
            changes.waiting, changes.position = origin.waiting(), origin.read_position()
            if changes.waiting:  # stored so, the next detect never takes the unchanged-token shortcut: it reads on
                changes.token += WAITING_MARK
        if not changes.token_unchanged and isinstance(origin, BoundedOrigin) and origin.holds_back():
            changes.token += HELD_MARK  # likewise: the held items are looked at again until they enter
        out.append(changes)
    return out


def commit_changes(pipeline: PipelineDefinition, cdc: CdcState, changes: list[SourceChanges]) -> None:
    """Make ``changes`` the sources' stored state, then move each stream's checkpoint to where it was read
    (a crash in between re-reads those lines: the next batch starts no later than it should)."""
    root = pipeline.root()
    for change in changes:
        cdc.commit(change)
        origin = root.steps[change.source].reader()  # type: ignore[attr-defined]
        if change.position is not None and isinstance(origin, LineReader):
            origin.commit_position(change.position)


def deletion_verdicts(pipeline: PipelineDefinition, store: RecordStore, branch: str,
                      sources: list[str] | None = None, guard: DeletionGuard | None = None) -> list[DeletionVerdict]:
    """The deletion guard's verdict on every source step (``sources``: these) that ``branch`` owns: its
    items now against the branch's records of it. A source the branch inherits is judged on the branch
    that owns it (a run of this branch does not write it)."""
    definition = pipeline.for_branch(branch)  # from this definition up its ancestors, as the app resolves it
    scope = definition.scope()
    names = [s for s in definition.source_steps() if scope.owns(s) and (sources is None or s in sources)]
    if not names:
        return []
    guard = guard or DeletionGuard()
    stored = store.records.counts(scope)
    out = []
    for name in names:
        origin = definition.steps[name].reader()  # type: ignore[attr-defined]
        out.append(guard.judge(name, origin.describe(), branch, now=len(origin.items()),
                               before=stored.get(name, 0), empty=origin.is_empty(), reporting=origin.deletions))
    return out


def enforce_for_step(pipeline: PipelineDefinition, store: RecordStore, step: str, branches: list[str],
                     consent: DeletionConsent | None) -> None:
    """The guard in a step's op (a run launched from the UI, a sensor or the schedule): when ``step`` is
    a source step the branches own and no door judged already (``consent``), a held-back verdict raises
    ``DeletionsHeldBack``, the same line the CLI says."""
    if consent is None:
        enforce([v for branch in branches for v in deletion_verdicts(pipeline, store, branch, [step])])


def held_back(pipeline: PipelineDefinition, store: RecordStore, sources: list[str] | None = None,
              branches: list[str] | None = None) -> list[DeletionVerdict]:
    """Sources whose deletions the guard holds back, on every branch (main and the branch files)."""
    names = branches if branches is not None else all_branches(pipeline)
    return [v for branch in names for v in deletion_verdicts(pipeline, store, branch, sources) if v.held_back]


def all_branches(pipeline: PipelineDefinition) -> list[str]:
    return ["main", *branch_names(pipeline.root().project_dir)]


@dataclass
class BranchWork:
    """Dirty partitions of one branch: the steps to run and the periods (``branch|period`` keys)."""

    branch: str
    steps: list[str]
    periods: list[str]
    all_periods: list[str] = field(default_factory=list)  # every period the plan looked at (to register)
    records_read: int = 0  # stored records its plan loaded


def pending_work(pipeline: PipelineDefinition, store: RecordStore, branches: list[str] | None = None,
                 from_: str | None = None, periods: list[str] | None = None) -> list[BranchWork]:
    """What runs would bring every branch (main and the project's branch files) up to date; ``periods``:
    only what is dirty in these (a sensor tick: the periods its source's change touched; the nightly
    reconcile plans every period), see ``compute_partition_plan``."""
    root = pipeline.root()
    names = branches if branches is not None else all_branches(root)
    out = []
    for branch in names:
        check_branch_name(branch)
        definition = root.for_branch(branch)
        plan = compute_partition_plan(definition, store, branch, definition.select(None, from_), periods=periods)
        steps = [s for s in definition.order() if any(step == s for step, _ in plan.work)]
        if steps:
            out.append(BranchWork(branch, steps, sorted({p for _, p in plan.work}), plan.periods, plan.records_read))
    return out
