"""What every run of a project says about itself, whichever door launched it, and which runs are refused.

Every run carries ``synthex/branch`` (the branch, or branches, whose partitions it materializes: a filter in
the UI's Runs list), ``synthex/writer`` (``<memory>|<branch>``: what a shared instance's queue holds to one run
in progress) and ``synthex/launched_by`` (``synthex`` for `synthex run` / ``Pipeline.run``,
``sensor``, ``schedule``, ``ui``, ``backfill``, ``automation``). The doors Synthex writes set them on the request itself:
the CLI's launcher, the source sensors and the reconcile schedule. A run the UI launches (the Materialize
dialog, the launchpad, a backfill's runs) is created by Dagster from the partition or range the user
picked, and Dagster 1.13 has no public per-partition tag hook for a *range* of a multi-partitioned asset
job (``PartitionedConfig.tags_for_partition_key_fn`` applies to one partition key of a job, not to an
asset backfill's range run); so the project's run launcher (``synthex_assets.run_launcher``) adds them
from the run's own partition tags before the run process starts, and the first step op adds any that are
still missing (a run launched through another launcher), with ``DagsterInstance.add_run_tags``.

A run whose branch is not one of the project's (``main`` or a ``branches/<name>.py``) or whose period is not
a period (a calendar month or ``all``) is refused by the same launcher before any step runs: it is marked
canceled with one line saying how periods and branches are made, so no partition turns red (Dagster counts
the planned partitions of a *failed* run as failed) and its checks read "skipped", not "execution failed".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from synthex.core.naming import MAIN
from synthex.core.project import branch_names
from synthex_assets.dagster_internals import BRANCH_TAG, WRITER_TAG, partition_range, writer_key
from synthex_assets.partitions import is_period, split_partition_key

LAUNCHED_BY_TAG = "synthex/launched_by"
REFUSED_TAG = "synthex/refused"
# A run the deployment's queue hands back to the `synthex run` that queued it, which executes it itself from
# its own checkout: its host and pid, "host:pid" (synthex_assets.queued_runs).
CALLER_TAG = "synthex/executed_by"
# Dagster's own tags naming one partition of a multi-partitioned run, and the door that made a run.
PARTITION_TAG_PREFIX = "dagster/partition/"
BACKFILL_TAG = "dagster/backfill"
SENSOR_TAG = "dagster/sensor_name"
SCHEDULE_TAG = "dagster/schedule_name"
AUTOMATION_TAG = "dagster/from_automation_condition"  # a run Dagster's declarative automation requested

LAUNCHED_BY_CLI = "synthex"
LAUNCHED_BY_SENSOR = "sensor"
LAUNCHED_BY_SCHEDULE = "schedule"
LAUNCHED_BY_UI = "ui"
LAUNCHED_BY_BACKFILL = "backfill"
LAUNCHED_BY_AUTOMATION = "automation"  # a step's automation= (AutomationCondition), evaluated by the daemon


def branch_tags(branch: str, launched_by: str, memory: str | None = None) -> dict[str, str]:
    """The tags for a run over ``branch`` launched by ``launched_by``, and with ``memory`` (the pipeline's
    name) its writer tag. One branch per run: a shared instance's queue allows one run in progress per value
    of ``WRITER_TAG`` (synthex_assets/deployment.py), so a value naming two branches ("exp,main") would hold
    neither back; a run over several is refused."""
    tags = {BRANCH_TAG: branch, LAUNCHED_BY_TAG: launched_by}
    if memory is not None:
        tags[WRITER_TAG] = writer_key(memory, branch)
    return tags


def _between(keys: Sequence[str], first: str, last: str) -> list[str]:
    """``first`` .. ``last`` in ``keys``' order (the dimension's registration order); both ends when
    either is not registered."""
    if first in keys and last in keys:
        i, j = keys.index(first), keys.index(last)
        return list(keys[min(i, j):max(i, j) + 1])
    return list(dict.fromkeys([first, last]))


def run_partitions(tags: Mapping[str, str], branches: Sequence[str],
                   periods: Sequence[str]) -> tuple[list[str], list[str] | None] | None:
    """(branches, periods) a run's tags select; ``branches`` / ``periods``: the keys registered in each
    dimension, in order (a multi-partition range runs branch-major over them). Periods are None when the
    run's second dimension is not the period (an eval asset's ``branch|dataset``: a static dimension,
    never registered as a period); None when the tags select no partition."""
    if f"{PARTITION_TAG_PREFIX}branch" in tags and partition_range(tags) is None:
        period = tags.get(f"{PARTITION_TAG_PREFIX}period")
        return [tags[f"{PARTITION_TAG_PREFIX}branch"]], [period] if period is not None else None
    named = partition_range(tags)
    if named is None:
        return None
    (b0, p0), (b1, p1) = split_partition_key(named[0]), split_partition_key(named[1])
    run_branches = _between(branches, b0, b1)
    if not all(p in periods or is_period(p) for p in (p0, p1)):
        return run_branches, None
    if b0 == b1:
        return run_branches, _between(periods, p0, p1)
    # Across branches the range runs through every period of the branches between: all of them, to be safe.
    return run_branches, list(dict.fromkeys([p0, *periods, p1]))


def launched_by(tags: Mapping[str, str]) -> str:
    """Which door made a run that does not say so itself (from Dagster's own tags)."""
    if AUTOMATION_TAG in tags:  # before the sensor: automation runs name the automation sensor too
        return LAUNCHED_BY_AUTOMATION
    if BACKFILL_TAG in tags:
        return LAUNCHED_BY_BACKFILL
    if SENSOR_TAG in tags:
        return LAUNCHED_BY_SENSOR
    if SCHEDULE_TAG in tags:
        return LAUNCHED_BY_SCHEDULE
    return LAUNCHED_BY_UI


def missing_tags(tags: Mapping[str, str], branches: Iterable[str], memory: str | None = None) -> dict[str, str]:
    """The Synthex tags a run over ``branches`` still lacks (empty when it has them all); its writer tag
    only when ``memory`` (the pipeline's name) is given."""
    door = tags.get(LAUNCHED_BY_TAG) or launched_by(tags)
    over = sorted(set(branches))
    # A run over several branches is refused (``refusal``): it gets its door, and no branch it would misname.
    wanted = branch_tags(over[0], door, memory) if len(over) == 1 else {LAUNCHED_BY_TAG: door}
    return {k: v for k, v in wanted.items() if k not in tags}


def project_branches(project_dir: Path) -> set[str]:
    """The branches a run may name: ``main`` and every ``branches/<name>.py``."""
    return {MAIN, *branch_names(project_dir)}


def refusal(branches: Iterable[str], periods: Iterable[str], known_branches: set[str]) -> str | None:
    """Why a run over ``branches`` x ``periods`` must not start (one line), None when it may."""
    bad_periods = sorted({p for p in periods if not is_period(p)})
    bad_branches = sorted(set(branches) - known_branches)
    several = sorted(set(branches)) if len(set(branches)) > 1 else []
    if not bad_periods and not bad_branches and not several:
        return None
    parts = [f"period {p!r} is not a period" for p in bad_periods[:3]] + \
            [f"branch {b!r} is not a branch of this project" for b in bad_branches[:3]] + \
            ([f"the run spans branches {', '.join(several[:3])}: a run writes one branch (launch one per "
              f"branch; a shared instance's queue holds one run per branch at a time)"] if several else [])
    return (f"refused before any step ran: {'; '.join(parts)}. Periods are made from the data (each calendar "
            f"month YYYY-MM a record falls in, registered by `synthex run` or a sensor; `all` for a key "
            f"aggregate); branches by `synthex branch create NAME`. Partition keys added by hand are removed "
            f"by the partition-keys sensor")


def invented_keys(periods: Iterable[str], branches: Iterable[str],
                  known_branches: set[str]) -> tuple[list[str], list[str]]:
    """The registered (periods, branches) keys that are neither a period nor a branch of the project: typed
    into the UI's "Add a partition" or sent as ``addDynamicPartition``."""
    return sorted(p for p in periods if not is_period(p)), sorted(set(branches) - known_branches)
