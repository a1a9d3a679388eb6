"""Dates named in a query ("in July 2023", "on 13 October, 2023", "in 2022") as a time window.

Embeddings and BM25 cannot do calendar matching: "What did Maria donate in December 2023?" shares
no word with the turn "I donated my old car yesterday" written on 2023-12-08. The window lets
search prefer records whose ``time.created_at`` falls in it (retaining notes: temporal date matching
was one of the signals that carried their LongMemEval gains). A window is generous on the late
side, because people report an event some days after it happened.

Relative expressions ("last week", "two months ago") need the date the question is asked on: with
``as_of`` they are resolved by ``synthex.core.enrich.dates.resolve_dates`` (the same resolver enrichment
uses on the records), as are spans it places without an anchor ("the summer of 2022").
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from synthex.core.enrich.dates import parse_anchor, resolve_dates

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + ")"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s*((?:19|20)\d\d))?"
_DAY_MONTH = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b{_YEAR}")
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+{_DAY}\b{_YEAR}")
_MONTH_ONLY = re.compile(rf"\b{_MONTH}\b{_YEAR}")
_YEAR_ONLY = re.compile(r"\b((?:19|20)\d\d)\b")
LATE_DAYS_AFTER_DATE = 10  # "on 3 June" also matches what was said up to 10 days later
LATE_DAYS_AFTER_MONTH = 14


@dataclass(frozen=True)
class TimeWindow:
    month: int | None = None
    day: int | None = None
    year: int | None = None  # None with a month: that month in any year
    span: tuple[date, date] | None = None  # a resolved span of days (inclusive), instead of the above
    late_days: int = 0  # with ``span``: also what was said this many days after it

    def intervals(self, years: list[int]) -> list[tuple[datetime, datetime]]:
        """Half-open [start, end) spans the window covers, for records written in ``years``."""
        if self.span is not None:
            start, end = (datetime(d.year, d.month, d.day, tzinfo=UTC) for d in self.span)
            return [(start, end + timedelta(days=1 + self.late_days))]
        if self.month is None:
            return [(datetime(self.year, 1, 1, tzinfo=UTC), datetime(self.year + 1, 1, 1, tzinfo=UTC))] \
                if self.year else []
        spans = []
        for year in sorted({self.year} if self.year else set(years) | {y - 1 for y in years}):
            if self.day:
                try:
                    start = datetime(year, self.month, self.day, tzinfo=UTC)
                except ValueError:
                    continue
                spans.append((start - timedelta(days=2), start + timedelta(days=LATE_DAYS_AFTER_DATE + 1)))
            else:
                start = datetime(year, self.month, 1, tzinfo=UTC)
                days = calendar.monthrange(year, self.month)[1] + LATE_DAYS_AFTER_MONTH
                spans.append((start, start + timedelta(days=days)))
        return spans

    def contains(self, when: datetime) -> bool:
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        return any(start <= when < end for start, end in self.intervals([when.year]))


def _year(text: str | None) -> int | None:
    return int(text) if text else None


_LATE_DAYS = {"day": LATE_DAYS_AFTER_DATE, "week": LATE_DAYS_AFTER_DATE, "month": LATE_DAYS_AFTER_MONTH, "year": 0}


def time_window(query: str, as_of: datetime | date | str | None = None, relative: bool = True) -> TimeWindow | None:
    """The first date the query names, most specific form first; None when it names none.

    A bare "may" is a verb far more often than a month, so it only counts with a day or a year. With
    ``relative``, what the forms below miss goes to ``resolve_dates`` before a bare year: relative
    expressions resolved against ``as_of`` (the question's date; skipped without one) and spans such as
    "the summer of 2022".
    """
    text = query.lower()
    window = _absolute(text)
    if window is not None and (window.month is not None or not relative):
        return window
    if relative:
        for found in resolve_dates(query, parse_anchor(as_of) if as_of is not None else None):
            if found.granularity != "year":
                return TimeWindow(span=(found.start, found.end), late_days=_LATE_DAYS[found.granularity])
    return window


def _absolute(text: str) -> TimeWindow | None:
    if m := _DAY_MONTH.search(text):
        return TimeWindow(month=_MONTHS[m.group(2)], day=int(m.group(1)), year=_year(m.group(3)))
    if (m := _MONTH_DAY.search(text)) and 1 <= int(m.group(2)) <= 31:
        return TimeWindow(month=_MONTHS[m.group(1)], day=int(m.group(2)), year=_year(m.group(3)))
    for m in _MONTH_ONLY.finditer(text):
        if m.group(1) != "may" or m.group(2):
            return TimeWindow(month=_MONTHS[m.group(1)], year=_year(m.group(2)))
    if m := _YEAR_ONLY.search(text):
        return TimeWindow(year=int(m.group(1)))
    return None
