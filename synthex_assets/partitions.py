"""Every step asset is partitioned by (branch, period): both dynamic, registered from the data.

Both stay dynamic (a time-window definition would need one start date for every project and a grain per
step; the keys ``branch|YYYY-MM`` and every record id stay as they are). A period key that is not a
calendar month, e.g. one typed into the UI's "Add a partition", is refused when a run reaches a step
(``invalid_periods``): the run fails before anything is read or written. One run records its partitions'
materializations in period order (``PeriodOrderedPartitions``), so a step's latest materialization is
its newest period.

A UI backfill launched from the job's page is a *job* backfill; over a range of these two-dimensional
partitions Dagster 1.13 creates one run whose tags name the range (``dagster/asset_partition_range_*``)
but also keep the first partition's ``dagster/partition/branch`` and ``/period`` tags
(``dagster/_core/execution/job_backfill.py``, which drops only ``dagster/partition``), and the run's
partition range is read from those first (``StepExecutionContext.partition_key_range``): the run would do
one partition and the backfill report every partition done. Such a run is refused at its first step
(``misresolved_range``), with nothing read or written. The same dialog's "Launch as: Single run" (it drops
every ``dagster/partition*`` tag), an asset backfill (Materialize on the Lineage or Catalog page) and
``synthex run`` select the range by its range tags alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from dagster import DagsterInstance, DynamicPartitionsDefinition, MultiPartitionKey, PartitionKeyRange

from synthex.core.periods import ALL_PERIODS
from synthex_assets.dagster_internals import PeriodOrderedPartitions, partition_range
from synthex_assets.naming import BRANCH_PARTITIONS, PERIOD_PARTITIONS, DagsterNames

# An unnamespaced memory's names (a project alone on its instance): what ``names=None`` means below, and its
# partitions definitions (each namespaced memory's are made by the functions below).
_ALONE = DagsterNames("")
BRANCHES = DynamicPartitionsDefinition(name=_ALONE.branch_partitions)
STEP_PARTITIONS = PeriodOrderedPartitions({BRANCH_PARTITIONS: BRANCHES,
                                           PERIOD_PARTITIONS: DynamicPartitionsDefinition(name=_ALONE.period_partitions)})


def branch_partitions(names: DagsterNames | None = None) -> DynamicPartitionsDefinition:
    """The memory's ``branch`` dynamic partitions (``<namespace>__branch`` in a namespace)."""
    if names is None or names.namespace is None:
        return BRANCHES
    return DynamicPartitionsDefinition(name=names.branch_partitions)


def step_partitions(names: DagsterNames | None = None) -> PeriodOrderedPartitions:
    """Every step asset's partitions: the memory's branches x its periods; the key's dimensions are named
    ``branch`` and ``period`` in every namespace (``branch|YYYY-MM``, the run tags)."""
    if names is None or names.namespace is None:
        return STEP_PARTITIONS
    return PeriodOrderedPartitions({BRANCH_PARTITIONS: branch_partitions(names),
                                    PERIOD_PARTITIONS: DynamicPartitionsDefinition(name=names.period_partitions)})


# The pipeline's partition grain is the calendar month (synthex.core.periods): "YYYY-MM", years 1000-9999;
# and ALL_PERIODS, the one partition of a key aggregate whose groups span periods.
_MONTH = re.compile(r"[1-9]\d{3}-(0[1-9]|1[0-2])\Z")


def is_period(key: str) -> bool:
    """Whether ``key`` is a period partition: a calendar month (``YYYY-MM``) or ``ALL_PERIODS``."""
    return key == ALL_PERIODS or bool(_MONTH.match(key))


def invalid_periods(partitions: Iterable[tuple[str, str]]) -> list[str]:
    """The ``branch|period`` keys among ``partitions`` whose period is not a calendar month, sorted."""
    return sorted({f"{b}|{p}" for b, p in partitions if not is_period(p)})


def misresolved_range(run_tags: Mapping[str, str], resolved: PartitionKeyRange) -> str | None:
    """Why a run must not go on when its tags name a partition range that Dagster ``resolved`` to other
    partitions (a job backfill's run, see the module docstring); None when the two agree."""
    named = partition_range(run_tags)
    if named is None or (str(resolved.start), str(resolved.end)) == named:
        return None
    shown = resolved.start if resolved.start == resolved.end else f"{resolved.start} .. {resolved.end}"
    return (f"this run names the partitions {named[0]} .. {named[1]} but Dagster resolved it to {shown} (a job "
            f"backfill over a range keeps its first partition's dagster/partition/* tags); nothing was read or "
            f"written: launch the range as 'Single run' in the job's Materialize dialog, from the Lineage page's "
            f"Materialize (an asset backfill), or with `synthex run`")


def partition_key(branch: str, period: str) -> MultiPartitionKey:
    """Reads ``branch|period`` (dimensions are ordered by name)."""
    return MultiPartitionKey({BRANCH_PARTITIONS: branch, PERIOD_PARTITIONS: period})


def split_partition_key(key: str) -> tuple[str, str]:
    """``branch|period`` -> (branch, period); branch names can never hold ``|``."""
    keys = getattr(key, "keys_by_dimension", None)
    if keys is not None:
        return keys["branch"], keys["period"]
    branch, _, period = str(key).partition("|")
    return branch, period


def register(instance: DagsterInstance, branch: str, periods: list[str], names: DagsterNames | None = None) -> None:
    """Add the branch (``main`` always) and the periods the data has to the memory's partitions, if missing."""
    names = names or _ALONE
    have_branches = set(instance.get_dynamic_partitions(names.branch_partitions))
    new_branches = [b for b in dict.fromkeys(["main", branch]) if b not in have_branches]
    if new_branches:
        instance.add_dynamic_partitions(names.branch_partitions, new_branches)
    have_periods = set(instance.get_dynamic_partitions(names.period_partitions))
    new_periods = [p for p in periods if p not in have_periods]
    if new_periods:
        instance.add_dynamic_partitions(names.period_partitions, new_periods)


def unregister_branch(instance: DagsterInstance, branch: str, names: DagsterNames | None = None) -> None:
    """Remove ``branch`` from the memory's branch partitions (``synthex branch delete``); other memories'
    partitions of the same name stay."""
    names = names or _ALONE
    if instance.has_dynamic_partition(names.branch_partitions, branch):
        instance.delete_dynamic_partition(names.branch_partitions, branch)


def period_range(instance: DagsterInstance, branch: str, periods: list[str],
                 names: DagsterNames | None = None) -> tuple[str, str]:
    """The (start, end) keys of the smallest partition range holding ``periods`` on ``branch``.

    Dynamic partitions keep insertion order, not calendar order, so the range can hold periods that
    were not asked for; materializing those again is a cheap no-op (their records are current).
    """
    order = {p: i for i, p in enumerate(instance.get_dynamic_partitions((names or _ALONE).period_partitions))}
    ranked = sorted(periods, key=lambda p: order[p])
    return f"{branch}|{ranked[0]}", f"{branch}|{ranked[-1]}"
