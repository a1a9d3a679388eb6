"""The bounds every source's items meet, whatever their kind: text length and date (issue 20).

A source step reads its origin through ``BoundedOrigin``, so the planner, the runs, the CDC state and the
deletion guard all see the same items. Left out, each with a one-line warning naming the item:

- an item whose text is over ``Limits.record_chars`` characters;
- an item dated more than ``Limits.future_days`` after now (a year-9999 date, a clock gone wrong). It
  is refused rather than kept with a flag: kept, it would be the newest record of its source and of
  every aggregate and fold above it, the record ``projection("context")`` returns, and a stored flag
  would go stale once its date is no longer in the future. Refused, it never enters memory; it is still
  in its source, and enters at the first run or sync after its date comes within ``future_days`` (the
  item list is filtered again then).

Only this view is filtered: the origin's own parse and offsets are untouched, and the other items keep
their ids.

While an item is held back for its date, the source is never "unchanged" to a sync (``holds_back``: the
CDC state stores its token marked, so the next sync or sensor tick reads the source again and finds the
item once its date comes near), and a watermarked table's watermark does not move: it would pass the
held row (and a row whose ``updated_at`` is past the horizon would make every later change look old, so
a table with one year-9999 row would never sync again).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from synthex.core.deletions import DeletionReporting
from synthex.core.importers import SourceItem
from synthex.core.importers.base import label
from synthex.core.limits import Limits
from synthex.core.periods import iso, to_timestamp
from synthex.core.sources.base import SourceOrigin

_CANONICAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z\Z")


def _later_than(created_at: str, horizon: str) -> bool:
    """``created_at`` (any timestamp an importer wrote) is after ``horizon`` (``iso``: canonical UTC)."""
    if _CANONICAL.match(created_at):  # what importers write: compares as text, no parse per item
        return created_at[:19] > horizon[:19]
    try:
        ts = to_timestamp(created_at)
    except ValueError:
        return False  # not a date this check can judge (a plugin's): its period says what it is
    return ts is not None and iso(ts) > horizon


def future_refusal(limits: Limits, what: str, created_at: str, horizon: str | None = None) -> str | None:
    """The one line refusing ``what`` (an item) dated ``created_at``, more than ``limits.future_days`` after
    now; None when the date is within the bound. ``remember`` and the reader ask the same question."""
    horizon = horizon or iso(datetime.now(UTC) + timedelta(days=limits.future_days))
    if not _later_than(created_at, horizon):
        return None
    return (f"{what}: skipped: dated {created_at}, more than the future_days bound of {limits.future_days:g} "
            f"day(s) after now (raise it with Pipeline(limits=Limits(future_days=...)))")


class BoundedOrigin(SourceOrigin):
    """``origin`` with the items over the bounds of ``limits`` left out (see the module docstring);
    everything else is the origin's own (``path``, ``pull``, a table's ``changed_since``...)."""

    def __init__(self, origin: SourceOrigin, limits: Limits) -> None:
        self.origin, self.limits = origin, limits
        # The last filtering: (the origin's list it was made from, kept items, warnings, when it expires).
        self._view: tuple[list[SourceItem] | None, list[SourceItem], list[str], str] = (None, [], [], "")
        self._table_held = False  # the last ``changed_since`` held a row back (its date, or its watermark)

    # -- what is filtered -----------------------------------------------------------------------------
    def _horizon(self) -> str:
        return iso(datetime.now(UTC) + timedelta(days=self.limits.future_days))

    def _filter(self, items: list[SourceItem], where: str) -> tuple[list[SourceItem], list[str], str]:
        """(kept, warnings, expiry): the expiry is the earliest refused date less ``future_days``, the
        moment the filtering must be done again ("" when nothing was refused for its date)."""
        horizon, bound = self._horizon(), self.limits.record_chars
        kept: list[SourceItem] = []
        warnings: list[str] = []
        earliest = ""
        for item in items:
            if len(item.content) > bound:
                warnings.append(self.limits.over("record_chars", f"{where}: item {label(item.key)}: skipped: its text",
                                                 len(item.content)))
            elif refusal := future_refusal(self.limits, f"{where}: item {label(item.key)}", item.created_at, horizon):
                warnings.append(refusal)
                earliest = min(earliest or item.created_at, item.created_at)
            else:
                kept.append(item)
        if not warnings:
            kept = items  # the origin's own list: callers cache on its identity
        expiry = ""
        if earliest:
            ts = to_timestamp(earliest)
            expiry = iso(ts - timedelta(days=self.limits.future_days)) if ts is not None else ""
        return kept, warnings, expiry

    def _filtered(self, items: list[SourceItem]) -> tuple[list[SourceItem], list[str]]:
        source, kept, warnings, expiry = self._view
        if source is not items or (expiry and iso(datetime.now(UTC)) >= expiry):
            kept, warnings, expiry = self._filter(items, self.origin.describe())
            self._view = (items, kept, warnings, expiry)
        return kept, warnings

    def items(self) -> list[SourceItem]:
        return self._filtered(self.origin.items())[0]

    def warnings(self) -> list[str]:
        """The origin's warnings (what its reader left out or repaired), then one per item left out here."""
        own = self.origin.warnings()
        return [*own, *self._filtered(self.origin.items())[1]]

    def changed_since(self, watermark: str | None) -> tuple[list[SourceItem], list[str], str | None]:
        """A watermarked table's changed rows, with the same items left out as ``items()``. The watermark
        stays where it was while a row is held back for its date, or when the table's newest ``updated_at``
        is past the horizon: the next read takes those rows again (``>=``), and every later change too."""
        candidates, keys, new_watermark = self.origin.changed_since(watermark)  # type: ignore[attr-defined]
        kept, _, expiry = self._filter(candidates, self.origin.describe())
        ahead = new_watermark is not None and _later_than(new_watermark, self._horizon())
        self._table_held = bool(expiry) or ahead
        return kept, keys, watermark if self._table_held else new_watermark

    def holds_back(self) -> bool:
        """The last read held an item back for its date (or a table's watermark at the horizon): a sync must
        read the source again even if its token has not changed, to take the item once its date comes near."""
        return self._table_held or bool(self._view[3])

    # -- the origin's own -------------------------------------------------------------------------------
    @property  # type: ignore[override]
    def kind(self) -> str:  # noqa: D102 - the origin's
        return self.origin.kind

    @property  # type: ignore[override]
    def deletions(self) -> DeletionReporting:
        return self.origin.deletions

    def is_empty(self) -> bool:
        return self.origin.is_empty()

    def why_empty(self) -> str | None:
        return self.origin.why_empty()

    def token(self) -> str:
        return self.origin.token()

    def describe(self) -> str:
        return self.origin.describe()

    def config(self) -> dict[str, Any]:
        return self.origin.config()

    def toml_config(self) -> dict[str, Any]:
        return self.origin.toml_config()

    def pull(self) -> int:
        return self.origin.pull()

    def __getattr__(self, name: str) -> Any:
        # Only called for names this class lacks: a kind's own attributes (a stream's ``path``...).
        if name in ("origin", "limits", "_view"):
            raise AttributeError(name)
        return getattr(self.origin, name)
