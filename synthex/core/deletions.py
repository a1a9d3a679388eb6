"""The deletion policy: which of a source's deletions a run applies, one rule for every door.

A source kind says how it reports that an item is gone (``SourceOrigin.deletions``): a table's primary
key gone, a stream's ``{"id": ..., "deleted": true}`` line, an API's delete row are *explicit* and
propagate; an export file or folder is a *snapshot*, so an item missing from it is only inferred. The
guard stops a suspicious shrink only: a source that suddenly holds nothing (an export or folder
emptied, a table returning no rows, a stream file gone), or a snapshot that lost more than
``SHRINK_SHARE`` of at least ``SHRINK_MIN_ITEMS`` items. ``allow_deletions`` (``--allow-deletions``,
the run tag ``synthex/deletions=allowed``) proceeds anyway.

``synthex run``, ``synthex sync``, ``Pipeline.run/sync``, the source sensors, the reconcile schedule
and the step op of a run launched from the UI all judge through ``DeletionGuard`` (numbers gathered by
``synthex_resources.source_sync.deletion_verdicts``) and say the same line, ``refusal_line``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from synthex.core.errors import BadInputError, SynthexError

SHRINK_SHARE = 0.2  # a snapshot may lose up to this share of its items before a run asks first...
SHRINK_MIN_ITEMS = 10  # ...once it held at least this many (2 -> 1 of a small export is no signal)
DELETIONS_TAG = "synthex/deletions"  # a run tag (synthex_assets): DeletionConsent's values


class DeletionReporting(Enum):
    """How a source kind tells that an item is gone."""

    SNAPSHOT = "snapshot"  # the source is its whole current content; a missing item is inferred deleted
    EXPLICIT = "explicit"  # the source names each deletion (a primary key gone, a `deleted` line)


class DeletionOutcome(Enum):
    """What the guard decided for one source."""

    NONE = "none"  # nothing would be deleted
    EXPLICIT = "explicit"  # the source reported its deletions: they propagate
    SMALL = "small"  # a snapshot lost a few items: they propagate
    EMPTIED = "emptied"  # the source holds nothing while memory holds its items: held back
    SHRUNK = "shrunk"  # a snapshot lost more than SHRINK_SHARE of at least SHRINK_MIN_ITEMS items: held back

    @property
    def held_back(self) -> bool:
        return self in (DeletionOutcome.EMPTIED, DeletionOutcome.SHRUNK)


class DeletionConsent(Enum):
    """The ``synthex/deletions`` run tag: why a step op need not judge again (absent: it judges)."""

    ALLOWED = "allowed"  # the user allowed deletions (--allow-deletions, allow_deletions=True, the UI tag)
    GUARDED = "guarded"  # the door that launched the run judged under the branch's lock (a CLI run)


def consent_tag(consent: DeletionConsent, run_id: str) -> str:
    """The tag value a launching door sets, bound to its run: a re-execution from the UI copies a run's
    tags, and must be judged again, not inherit the judgement."""
    return f"{consent.value}:{run_id}"


def consent_from_tags(tags: Mapping[str, str], run_id: str) -> DeletionConsent | None:
    """The consent run ``run_id``'s tags carry; None (the step op judges) when there is none, or it was
    given to another run (copied by a re-execution). A bare ``allowed`` is a user's tag on this launch."""
    value = tags.get(DELETIONS_TAG)
    if value is None:
        return None
    name, _, bound_to = value.partition(":")
    try:
        consent = DeletionConsent(name)
    except ValueError:
        raise BadInputError(f"run tag {DELETIONS_TAG}={value!r}: expected "
                            f"{DELETIONS_TAG}={DeletionConsent.ALLOWED.value}") from None
    if bound_to != run_id and not (consent is DeletionConsent.ALLOWED and not bound_to):
        return None
    return consent


_REASONS = {
    (DeletionOutcome.EXPLICIT, DeletionReporting.EXPLICIT): "deleted at the source",
    (DeletionOutcome.SMALL, DeletionReporting.SNAPSHOT): "a small shrink, applied",
    (DeletionOutcome.EMPTIED, DeletionReporting.SNAPSHOT): "the source became empty",
    (DeletionOutcome.EMPTIED, DeletionReporting.EXPLICIT): "the source suddenly returns nothing",
    (DeletionOutcome.SHRUNK, DeletionReporting.SNAPSHOT):
        f"more than {100 * SHRINK_SHARE:.0f} % of at least {SHRINK_MIN_ITEMS} items gone",
}


@dataclass(frozen=True)
class DeletionVerdict:
    """One source step on one branch: its items now, its records in the store, and the decision."""

    source: str
    where: str  # the origin's description (a path; a dsn and table; a stream file)
    branch: str
    now: int  # items the source holds
    before: int  # records of the source step the branch holds
    reporting: DeletionReporting
    outcome: DeletionOutcome

    @property
    def lost(self) -> int:
        return max(self.before - self.now, 0)

    @property
    def held_back(self) -> bool:
        return self.outcome.held_back

    @property
    def reason(self) -> str:
        return _REASONS.get((self.outcome, self.reporting), "")

    def __str__(self) -> str:
        share = f"{100 * self.lost / self.before:.0f} %" if self.before else "0 %"
        reason = f": {self.reason}" if self.reason else ""
        return (f"{self.source}: {self.where} holds {self.now} item(s), the store {self.before} "
                f"({self.lost} would be deleted, {share}){reason}")

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "where": self.where, "branch": self.branch, "now": self.now,
                "before": self.before, "deleted": self.lost, "reporting": self.reporting.value,
                "outcome": self.outcome.value, "held_back": self.held_back}


@dataclass(frozen=True)
class DeletionGuard:
    share: float = SHRINK_SHARE
    min_items: int = SHRINK_MIN_ITEMS

    def judge(self, source: str, where: str, branch: str, *, now: int, before: int, empty: bool,
              reporting: DeletionReporting) -> DeletionVerdict:
        """``empty``: the source holds nothing at all (a stream whose every line was deleted by a
        ``deleted`` line is not empty: it said so)."""
        lost = before - now
        if lost <= 0:
            outcome = DeletionOutcome.NONE
        elif empty:
            outcome = DeletionOutcome.EMPTIED
        elif reporting is DeletionReporting.EXPLICIT:
            outcome = DeletionOutcome.EXPLICIT
        elif before >= self.min_items and lost / before > self.share:
            outcome = DeletionOutcome.SHRUNK
        else:
            outcome = DeletionOutcome.SMALL
        return DeletionVerdict(source, where, branch, now, before, reporting, outcome)


def refusal_line(verdicts: Sequence[DeletionVerdict]) -> str:
    """The one line every door says for the held-back sources among ``verdicts``."""
    held = [str(v) for v in verdicts if v.held_back]
    return ("refusing to delete memory: " + "; ".join(held) + "; re-run with --allow-deletions (Python: "
            f"allow_deletions=True; UI: run tag {DELETIONS_TAG}={DeletionConsent.ALLOWED.value}) if that is intended")


class DeletionsHeldBack(SynthexError):
    """A run would apply a suspicious shrink; nothing was written."""

    def __init__(self, verdicts: Sequence[DeletionVerdict]) -> None:
        self.verdicts = [v for v in verdicts if v.held_back]
        super().__init__(refusal_line(self.verdicts))

    def __reduce__(self) -> tuple[type, tuple[list[DeletionVerdict]]]:  # pickled with its verdicts
        return DeletionsHeldBack, (self.verdicts,)


def enforce(verdicts: Sequence[DeletionVerdict], allow_deletions: bool = False) -> None:
    """Raise ``DeletionsHeldBack`` when a verdict holds deletions back and they are not allowed."""
    if not allow_deletions and any(v.held_back for v in verdicts):
        raise DeletionsHeldBack(verdicts)
