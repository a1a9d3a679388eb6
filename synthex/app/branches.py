"""Branch commands: list, create, switch, diff, promote, delete (design doc §4.5, §5.2).

A branch is ``branches/<name>.py`` (its parent and the steps it overrides) plus the rows it owns in
the store: only the steps whose effective version differs from its parent's (an overridden step and
everything downstream of it). Every other step is read through the parent (copy-on-write), so
creating a branch writes no record, and promote copies rows instead of recomputing them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import BadInputError, PipelineDefinitionError, SynthexError
from synthex.core.naming import MAIN, check_branch_name
from synthex.core.periods import now_iso
from synthex.core.project import (
    branch_names,
    branch_path,
    create_branch_file,
    current_branch,
    load_branch,
    promotion_journal,
    promotion_journals,
    set_current_branch,
    write_promotion,
)
from synthex.core.record import Record

if TYPE_CHECKING:
    from synthex.app.services import AppServices

SAMPLE_CHARS = 160


@dataclass
class BranchInfo:
    name: str
    parent: str
    owned_steps: list[str]
    own_records: int
    current: bool = False
    defined: bool = True  # False: rows in the store, but branches/<name>.py is gone
    promoted: bool = False  # main applies its overrides (pipeline.py calls apply_branch)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class InterruptedPromotion:
    """A promote that was cut short: its journal (``promotion_journal``) is still there. pipeline.py may
    already apply the branch, so main looks stale; a run would recompute those steps (model calls)
    where the promote copies the branch's rows, and would leave the branch's own copies behind. Only
    promote finishes it."""

    branch: str
    steps: list[str]  # what the promote moves (some may be moved already)
    journal: Path
    problem: str = ""  # the journal cannot be read: why

    def command(self) -> str:
        return f"synthex branch promote {self.branch}"

    def describe(self) -> str:
        if self.problem:
            return f"{self.journal}: the journal of an interrupted promote cannot be read ({self.problem})"
        return (f"a promote of branch {self.branch!r} into main was interrupted before it finished (it moves "
                f"{', '.join(self.steps)}): run `{self.command()}` to finish it (it copies the branch's records; "
                "a run would recompute them)")

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "steps": self.steps, "journal": str(self.journal),
                "command": self.command(), "message": self.describe()}


def read_promotion_journal(path: Path) -> InterruptedPromotion:
    """The promote a journal file records; an unreadable one is reported (``problem``), never raised."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        branch, steps = data["branch"], data["steps"]
        if not isinstance(branch, str) or not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            raise ValueError("no branch name and step list")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return InterruptedPromotion(path.stem, [], path, problem=" ".join(str(exc).split()) or type(exc).__name__)
    return InterruptedPromotion(branch, steps, path)


@dataclass
class StepDiff:
    step: str
    added: int = 0  # records only the branch has
    removed: int = 0  # records only the parent has
    changed: int = 0  # the same input(s), another content
    samples: list[dict[str, str]] = field(default_factory=list)


@dataclass
class BranchDiff:
    branch: str
    parent: str
    changed_steps: list[str]
    steps: list[StepDiff]

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "parent": self.parent, "changed_steps": self.changed_steps,
                "steps": [vars(s) for s in self.steps]}


def _pair(parent: list[Record], branch: list[Record]) -> tuple[list[tuple[Record, Record]], list[Record], list[Record]]:
    """Match a step's records across two branches: same id (unchanged), else the same period and the
    same inputs, else the only record of a period on each side (an aggregate, a fold)."""
    by_id = {r.id for r in parent} & {r.id for r in branch}
    left = [r for r in parent if r.id not in by_id]
    right = [r for r in branch if r.id not in by_id]
    pairs: list[tuple[Record, Record]] = []
    index = {(r.period, tuple(sorted(r.source_ids))): r for r in left}
    unmatched = []
    for r in right:
        match = index.pop((r.period, tuple(sorted(r.source_ids))), None)
        if match is None:
            unmatched.append(r)
        else:
            pairs.append((match, r))
    left = list(index.values())
    per_period_left: dict[str, list[Record]] = defaultdict(list)
    per_period_right: dict[str, list[Record]] = defaultdict(list)
    for r in left:
        per_period_left[r.period].append(r)
    for r in unmatched:
        per_period_right[r.period].append(r)
    removed, added = [], []
    for period in sorted(set(per_period_left) | set(per_period_right)):
        a, b = per_period_left.get(period, []), per_period_right.get(period, [])
        if len(a) == 1 and len(b) == 1:
            pairs.append((a[0], b[0]))
        else:
            removed += a
            added += b
    return pairs, removed, added


class Branches:
    """The branches of one project, through its app (store, locks, Dagster instance)."""

    def __init__(self, app: AppServices) -> None:
        self.app = app
        self.main = app.pipeline.root()

    def _own_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for row in self.app.store.records.scan(["branch"]):
            counts[row["branch"]] += 1
        return counts

    def list(self) -> list[BranchInfo]:
        counts = self._own_counts()
        here = current_branch(self.main)
        out = [BranchInfo(MAIN, "", self.main.order(), counts.get(MAIN, 0), current=here == MAIN)]
        names = branch_names(self.main.project_dir)
        for name in names:
            try:
                definition = self.main.for_branch(name)
                parent, owned = definition.parent.branch_name, definition.owned_steps()  # type: ignore[union-attr]
            except PipelineDefinitionError:
                parent, owned = "?", []
            out.append(BranchInfo(name, parent, owned, counts.get(name, 0), current=here == name,
                                  promoted=name in self.main.applied_branches))
        for name in sorted(set(counts) - set(names) - {MAIN}):
            out.append(BranchInfo(name, "?", [], counts[name], current=here == name, defined=False))
        return out

    def create(self, name: str, parent: str = MAIN) -> BranchInfo:
        check_branch_name(name)
        if parent != MAIN:
            self.main.for_branch(parent)  # the parent must exist (one line if not)
        create_branch_file(self.main.project_dir, name, parent)
        self._register_partition(name)
        return BranchInfo(name, parent, [], 0)

    def switch(self, name: str) -> None:
        if name != MAIN:
            self.main.for_branch(name)  # refuses a branch without a definition, in one line
        set_current_branch(self.main, name)

    def diff(self, name: str) -> BranchDiff:
        definition = self._branch(name)
        parent = definition.parent
        assert parent is not None
        changed = definition.owned_steps()
        steps = []
        for step in changed:
            theirs = self.app.records(step, branch=parent.branch_name)
            ours = self.app.records(step, branch=name)
            pairs, removed, added = _pair(theirs, ours)
            differing = [(a, b) for a, b in pairs if a.content != b.content]
            samples = [{"period": b.period, "parent": a.content[:SAMPLE_CHARS], "branch": b.content[:SAMPLE_CHARS]}
                       for a, b in differing[:3]]
            steps.append(StepDiff(step, added=len(added), removed=len(removed), changed=len(differing),
                                  samples=samples))
        return BranchDiff(name, parent.branch_name, changed, steps)

    def promote(self, name: str) -> dict[str, int]:
        """Main takes the branch's definition (pipeline.py applies its overrides) and its records for
        the steps it owns (rows copied, no model call); the branch then reads them through main.

        Resumable: the steps being moved are written to a journal first (``.synthex/promotions``);
        a promote cut short finishes when run again, even though pipeline.py already applies the branch
        (``interrupted_promotions`` finds it for `synthex status` and `synthex doctor`).
        """
        from synthex.core.atomic_file import write_file_atomic
        from synthex_resources.branch_lock import BranchLock

        journal = promotion_journal(self.main, name)
        if journal.exists():
            pending = read_promotion_journal(journal)
            if pending.problem:
                raise SynthexError(pending.describe())
            owned = pending.steps
        else:
            owned = self._promotable_steps(name)
        copied: dict[str, int] = {}
        marker = f"promote:{name}"  # the same on a re-run, so a promote cut short converges
        with ExitStack() as held:
            # Every branch: main and the promoted branch change, and any branch may read them.
            for branch in [MAIN, *branch_names(self.main.project_dir)]:
                held.enter_context(BranchLock(self.main.data_dir, branch, marker).acquire())
            write_file_atomic(journal, json.dumps({"branch": name, "steps": owned}), fsync=True)
            # 1. main's definition becomes the branch's: pipeline.py applies its overrides.
            write_promotion(self.main, name, now_iso())
            if name not in self.main.applied_branches:
                self.main.apply_branch(name)  # this process's main too, not only pipeline.py
            # 2. per step: main's rows become the branch's (same ids: same definition over the same
            #    inputs; copied with their vectors), then the branch's own copies go.
            for step in owned:
                copied[step] = self.app.store.records.move_step_rows(step, name, MAIN, marker)
            journal.unlink()
        return copied

    def interrupted_promotions(self) -> list[InterruptedPromotion]:
        """Promotes cut short (their journals are still there), in journal-file order."""
        return [read_promotion_journal(path) for path in promotion_journals(self.main)]

    def _promotable_steps(self, name: str) -> list[str]:
        """The steps a promote of ``name`` moves, after checking it can be promoted without computing."""
        definition = self._branch(name)
        if definition.parent is None or definition.parent.branch_name != MAIN:
            raise SynthexError(f"branch {name!r} branches off {definition.parent.branch_name!r}, not main; "
                               f"promote that branch first")  # type: ignore[union-attr]
        if not branch_path(self.main.project_dir, name).exists():
            raise SynthexError(f"branch {name!r} is defined only in this process; put its overrides in "
                               f"branches/{name}.py (`synthex branch create {name}`) to promote it")
        if load_branch(self.main, name).effective_versions() != definition.effective_versions():
            raise SynthexError(f"branch {name!r}: the overrides made in this process differ from "
                               f"branches/{name}.py; promote what the file defines, or update the file")
        owned = definition.owned_steps()
        if not owned:
            raise SynthexError(f"branch {name!r} overrides nothing main does not already do; nothing to promote")
        pending = self.app.plan(branch=name).steps
        if pending:  # promote copies what the branch computed; it never computes
            raise SynthexError(f"branch {name!r} has work pending ({', '.join(pending)}); run "
                               f"`synthex run --branch {name}` first, then promote")
        return owned

    def delete(self, name: str) -> dict[str, Any]:
        """Remove the branch's own rows and its partition key; main cannot be deleted. The file goes
        too, unless main applies it (a promoted branch)."""
        from synthex_resources.branch_lock import BranchLock

        check_branch_name(name)
        if name == MAIN:
            raise SynthexError("main cannot be deleted")
        known = self.list()
        if not any(b.name == name for b in known):
            raise BadInputError(f"no branch {name!r}; branches: {', '.join(b.name for b in known)}")
        children = [b.name for b in known if b.parent == name]
        if children:
            raise SynthexError(f"branch {name!r} is the parent of {', '.join(children)}; delete those first")
        store = self.app.store
        with BranchLock(self.main.data_dir, name, f"delete-{name}").acquire():
            own = store.records.ids_on_branch(name)
            store.records.delete_ids(own, branch=name)
            path = branch_path(self.main.project_dir, name)
            promoted = name in self.main.applied_branches
            if path.exists() and not promoted:
                path.unlink()
        if current_branch(self.main) == name:
            set_current_branch(self.main, MAIN)
        self._unregister_partition(name)
        return {"records_deleted": len(own), "file_kept": promoted}

    # -- helpers ------------------------------------------------------------------------------------
    def _branch(self, name: str) -> PipelineDefinition:
        check_branch_name(name)
        if name == MAIN:
            raise SynthexError("main is the trunk; name a branch")
        return self.app.use_branch(name)

    def _register_partition(self, name: str) -> None:
        """The UI shows each branch as a key of the ``branch`` partition dimension."""
        if self.app._has_instance():
            from synthex_assets.naming import DagsterNames
            from synthex_assets.partitions import register
            from synthex_assets.served import record_served_partitions

            register(self.app.instance, name, [], DagsterNames.of(self.main))
            # Every partition the parent has shows on the new branch as materialized, "served by" it.
            record_served_partitions(self.app.instance, self.main.for_branch(name))

    def _unregister_partition(self, name: str) -> None:
        if self.app._has_instance():
            from synthex_assets.naming import DagsterNames
            from synthex_assets.partitions import unregister_branch

            unregister_branch(self.app.instance, name, DagsterNames.of(self.main))
