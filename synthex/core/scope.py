"""The scope of one command: which branch it reads and writes, and which branch's rows serve each step.

A branch is copy-on-write (docs/architecture.md, "Branches"): a step it does not override is read from
its parent's rows. Which branch serves which step follows from the definitions, so it is resolved once
per command (``PipelineDefinition.scope``) and handed, immutable, to every read, search and write. No
store keeps a "current view" that a caller must remember to set: the records' scoped reads take the scope
as an argument (only id lookups may go without one: any branch's row of a content address), the search
engine defaults to main's own rows when given none, and two doors resolving the same branch get equal
scopes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from synthex.core.naming import MAIN, check_branch_name


@dataclass(frozen=True)
class BranchScope:
    """A branch and, per step, the branch whose rows it reads (a step not listed: its own rows).

    ``version`` pins the records table's version a read sees (None: the latest at each read).
    """

    branch: str = MAIN
    serving: tuple[tuple[str, str], ...] = field(default=())
    version: int | None = None

    def __post_init__(self) -> None:
        check_branch_name(self.branch)
        # Sorted, so equal views give equal (and equally hashed) scopes. A view that reads every step from
        # the branch itself is dropped: it reads exactly what the bare branch reads.
        pairs = tuple(sorted(dict(self.serving).items()))
        object.__setattr__(self, "serving", pairs if any(b != self.branch for _, b in pairs) else ())

    @classmethod
    def own(cls, branch: str = MAIN) -> BranchScope:
        """A branch that reads only its own rows (main, or a branch that overrides every step)."""
        return cls(branch)

    @classmethod
    def of(cls, branch: str, serving: Mapping[str, str]) -> BranchScope:
        """``serving``: step -> the branch whose rows serve it, for every step of the branch's definition."""
        return cls(branch, tuple(serving.items()))

    def serves(self, step: str) -> str:
        """The branch whose rows this scope reads for ``step``."""
        return dict(self.serving).get(step, self.branch)

    def owns(self, step: str) -> bool:
        return self.serves(step) == self.branch

    def groups(self, steps: Iterable[str] | None = None) -> dict[str, list[str] | None]:
        """serving branch -> the steps read from it (None: every step), for a read of ``steps`` (None:
        every step of the definition). A scope that inherits nothing reads one branch."""
        wanted = list(steps) if steps else None
        if not self.serving:
            return {self.branch: wanted}
        grouped: dict[str, list[str] | None] = {}
        for step in wanted or [s for s, _ in self.serving]:
            grouped.setdefault(self.serves(step), []).append(step)  # type: ignore[union-attr]
        return grouped
