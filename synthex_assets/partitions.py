"""Every step asset is partitioned by (branch, period): both dynamic, registered from the data.

Both stay dynamic (a time-window definition would need one start date for every project and a grain per
step; the keys ``branch|YYYY-MM`` and every record id stay as they are). A period key that is not a
calendar month, e.g. one typed into the UI's "Add a partition", is refused when a run reaches a step
(``invalid_periods``): the run fails before anything is read or written. One run records its partitions'
materializations in period order (``PeriodOrderedPartitions``), so a step's latest materialization is
its newest period.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dagster import DagsterInstance, DynamicPartitionsDefinition, MultiPartitionKey

from synthex.core.periods import ALL_PERIODS
from synthex_assets.dagster_internals import PeriodOrderedPartitions

BRANCHES = DynamicPartitionsDefinition(name="branch")
PERIODS = DynamicPartitionsDefinition(name="period")
STEP_PARTITIONS = PeriodOrderedPartitions({"branch": BRANCHES, "period": PERIODS})

# The pipeline's partition grain is the calendar month (synthex.core.periods): "YYYY-MM", years 1000-9999;
# and ALL_PERIODS, the one partition of a key aggregate whose groups span periods.
_MONTH = re.compile(r"[1-9]\d{3}-(0[1-9]|1[0-2])\Z")


def is_period(key: str) -> bool:
    """Whether ``key`` is a period partition: a calendar month (``YYYY-MM``) or ``ALL_PERIODS``."""
    return key == ALL_PERIODS or bool(_MONTH.match(key))


def invalid_periods(partitions: Iterable[tuple[str, str]]) -> list[str]:
    """The ``branch|period`` keys among ``partitions`` whose period is not a calendar month, sorted."""
    return sorted({f"{b}|{p}" for b, p in partitions if not is_period(p)})


def partition_key(branch: str, period: str) -> MultiPartitionKey:
    """Reads ``branch|period`` (dimensions are ordered by name)."""
    return MultiPartitionKey({"branch": branch, "period": period})


def split_partition_key(key: str) -> tuple[str, str]:
    """``branch|period`` -> (branch, period); branch names can never hold ``|``."""
    keys = getattr(key, "keys_by_dimension", None)
    if keys is not None:
        return keys["branch"], keys["period"]
    branch, _, period = str(key).partition("|")
    return branch, period


def register(instance: DagsterInstance, branch: str, periods: list[str]) -> None:
    """Add the branch (``main`` always) and the periods the data has, if missing."""
    have_branches = set(instance.get_dynamic_partitions("branch"))
    new_branches = [b for b in dict.fromkeys(["main", branch]) if b not in have_branches]
    if new_branches:
        instance.add_dynamic_partitions("branch", new_branches)
    have_periods = set(instance.get_dynamic_partitions("period"))
    new_periods = [p for p in periods if p not in have_periods]
    if new_periods:
        instance.add_dynamic_partitions("period", new_periods)


def period_range(instance: DagsterInstance, branch: str, periods: list[str]) -> tuple[str, str]:
    """The (start, end) keys of the smallest partition range holding ``periods`` on ``branch``.

    Dynamic partitions keep insertion order, not calendar order, so the range can hold periods that
    were not asked for; materializing those again is a cheap no-op (their records are current).
    """
    order = {p: i for i, p in enumerate(instance.get_dynamic_partitions("period"))}
    ranked = sorted(periods, key=lambda p: order[p])
    return f"{branch}|{ranked[0]}", f"{branch}|{ranked[-1]}"
