"""Periods: how a timestamp maps to the pipeline's period partition and to aggregate groups.

The pipeline's partition grain is the calendar month ("YYYY-MM"). Aggregates group inside a
month partition by month, ISO week or day; a week that straddles two months yields one group
per month part, keyed "YYYY-Www/YYYY-MM", so every group lives in exactly one partition.
"""

from __future__ import annotations

from datetime import UTC, datetime

PERIOD_KINDS = ("month", "week", "day")


def now_iso() -> str:
    """When Synthex did something (a record's ``created_at``, runs, run steps): ISO-8601 UTC with
    milliseconds, so two runs in one second still order. Data timestamps use ``iso`` (seconds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: object) -> datetime | None:
    """Accept epoch seconds (int/float/str) or ISO-8601 strings; return an aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), tz=UTC)
    text = str(value).strip()
    try:
        return datetime.fromtimestamp(float(text), tz=UTC)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def month_of(created_at: str) -> str:
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
