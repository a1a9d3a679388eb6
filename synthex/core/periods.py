"""Periods: how a timestamp maps to the pipeline's period partition and to aggregate groups.

The pipeline's partition grain is the calendar month ("YYYY-MM"). Aggregates group inside a
month partition by month, ISO week or day; a week that straddles two months yields one group
per month part, keyed "YYYY-Www/YYYY-MM", so every group lives in exactly one partition.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

PERIOD_KINDS = ("month", "week", "day")
# The period partition of a step whose records span every period (a key aggregate without period=): it
# sorts after every month ("YYYY-MM"), so it is planned and run after the periods its inputs come from.
ALL_PERIODS = "all"


def now_iso() -> str:
    """When Synthex did something (a record's ``created_at``, runs, run steps): ISO-8601 UTC with
    milliseconds, so two runs in one second still order. Data timestamps use ``iso`` (seconds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# The last second an ISO-8601 four-digit year can name: later times cannot be written as a timestamp.
MAX_EPOCH = 253402300799  # 9999-12-31T23:59:59Z


def to_timestamp(value: object) -> datetime | None:
    """Strict parse: epoch seconds (a number or numeric string) or an ISO-8601 string, as an aware UTC
    datetime; None when absent (None or blank). Anything else raises ValueError with a short reason:
    booleans, lists, objects, NaN, negative epochs (a sentinel such as -1, not a date), and times outside
    the years 1000-9999 (so ``iso`` always writes four digits and never overflows)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        ts = value if value.tzinfo else value.replace(tzinfo=UTC)
    elif isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("expected epoch seconds or an ISO-8601 string")
    else:
        seconds = value if not isinstance(value, str) else _number(value.strip())
        if seconds is not None:
            return _from_epoch(seconds)
        try:
            ts = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("expected epoch seconds or an ISO-8601 string") from None
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
    try:
        ts = ts.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59-05:00 is in the year 10000 in UTC
        raise ValueError("outside the years 1000-9999") from None
    if not 1000 <= ts.year <= 9999:
        raise ValueError("outside the years 1000-9999")
    return ts


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _from_epoch(seconds: int | float) -> datetime:
    if seconds != seconds:  # NaN; not math.isnan, which overflows on a JSON integer like 10**400
        raise ValueError("not a number")
    if seconds < 0:
        raise ValueError("negative epoch seconds")
    if seconds > MAX_EPOCH:  # compared before any conversion: 10**30 and inf never reach datetime
        hint = "; milliseconds instead of seconds?" if seconds <= MAX_EPOCH * 1000 else ""
        raise ValueError(f"after the year 9999{hint}")
    return datetime.fromtimestamp(float(seconds), tz=UTC)


def parse_timestamp(value: object) -> datetime | None:
    """Lenient parse: like ``to_timestamp`` but None for anything that is not a usable timestamp."""
    try:
        return to_timestamp(value)
    except ValueError:
        return None


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_CANONICAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z\Z")


def month_of(created_at: str) -> str:
    # Timestamps Synthex wrote itself (``iso``, ``now_iso``: UTC, "Z") carry their month in front; a
    # source of 100k rows asks this for every row of every period, so they skip the full parse.
    if isinstance(created_at, str) and _CANONICAL.match(created_at):
        return created_at[:7]
    ts = parse_timestamp(created_at)
    if ts is None:
        raise ValueError(f"not a timestamp: {created_at!r}")
    return ts.strftime("%Y-%m")


def group_label(created_at: str, kind: str) -> str:
    """The aggregate group a timestamp belongs to, inside its month partition."""
    ts = parse_timestamp(created_at)
    if ts is None:
        raise ValueError(f"not a timestamp: {created_at!r}")
    if kind == "month":
        return ts.strftime("%Y-%m")
    if kind == "day":
        return ts.strftime("%Y-%m-%d")
    if kind == "week":
        year, week, _ = ts.isocalendar()
        return f"{year}-W{week:02d}/{ts.strftime('%Y-%m')}"
    raise ValueError(f"unknown period {kind!r}; expected one of {PERIOD_KINDS}")
