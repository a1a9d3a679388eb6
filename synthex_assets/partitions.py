"""Every step asset is partitioned by (branch, period): both dynamic, registered from the data."""

from __future__ import annotations

from dagster import DagsterInstance, DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition

BRANCHES = DynamicPartitionsDefinition(name="branch")
PERIODS = DynamicPartitionsDefinition(name="period")
STEP_PARTITIONS = MultiPartitionsDefinition({"branch": BRANCHES, "period": PERIODS})


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
