"""Public alias of ``synthex.core.periods``: timestamp helpers a project's pipeline.py may use."""

from synthex.core.periods import (
    PERIOD_KINDS,
    group_label,
    iso,
    month_of,
    now_iso,
    parse_timestamp,
    to_timestamp,
)

__all__ = ["PERIOD_KINDS", "group_label", "iso", "month_of", "now_iso", "parse_timestamp", "to_timestamp"]
