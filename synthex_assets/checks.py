"""The asset checks a step asset carries (computed by the step's own op, after it writes). Their names
are ``synthex.core.record.CheckName`` (below Dagster, so the application decides on outcomes without it).

A step carries only the checks that can fail on it: ``hooks_delivered`` only where a projection of the
step has an ``on_update`` hook. Checks are not partitioned: Dagster 1.13 records a partitioned check's
result only for a run of one partition (``AssetCheckResult`` takes no partition; a single-run range has
no partition key), so each result covers the partitions its run materialized, listed in its metadata.
"""

from __future__ import annotations

from dagster import AssetCheckSeverity

from synthex.core.definition import PipelineDefinition
from synthex.core.record import CheckName
from synthex.core.steps import Step

PROVENANCE = CheckName.PROVENANCE
RECORDS_PLANNED = CheckName.RECORDS_PLANNED
UP_TO_DATE = CheckName.UP_TO_DATE
HOOKS = CheckName.HOOKS
CHECKS = tuple(CheckName)
# What a failure means for the memory: ERROR when what is stored is wrong (a record citing a source that is not
# there, a record the plan never asked for or filed under another period: search and lineage are wrong until it
# is fixed); WARN when what is stored is right but behind (a stale partition the next run brings up to date, a
# hook delivery left pending and retried).
SEVERITIES = {PROVENANCE: AssetCheckSeverity.ERROR, RECORDS_PLANNED: AssetCheckSeverity.ERROR,
              UP_TO_DATE: AssetCheckSeverity.WARN, HOOKS: AssetCheckSeverity.WARN}
# No "errors = 0" check yet: a record that fails fails its whole step op today (nothing is written),
# so such a check could never fail. It comes with per-record error accounting (the safety issue).

SCOPE_NOTE = ("Evaluated over the partitions the run materialized (listed in the result's `partitions`; the "
              "ones with a problem in `failing_partitions`), not per partition: the UI shows the result's "
              "partition as \u2014.")


def hooked_steps(pipeline: PipelineDefinition) -> set[str]:
    """The steps a projection with an ``on_update`` hook reads (the hook fires on its latest record)."""
    return {o.from_[0] for o in pipeline.outputs.values() if o.surface == "projection" and o.on_update is not None}


def step_checks(pipeline: PipelineDefinition, step: Step) -> tuple[CheckName, ...]:
    """The checks ``step`` carries: those that can fail on it."""
    return tuple(c for c in CHECKS if c is not HOOKS or step.name in hooked_steps(pipeline))


def check_descriptions(pipeline: PipelineDefinition, step: Step) -> dict[str, str]:
    """Check name (a plain string: Dagster serializes no enums but its own) -> what it checks."""
    texts = {
        PROVENANCE: f"Every source id of the new `{step.name}` records exists in the store.",
        RECORDS_PLANNED: f"Every new `{step.name}` record is one its partition's plan asked for (its id is a work "
                         f"item's) and is filed under that partition's period.",
        UP_TO_DATE: f"After the run, the plan finds no work for `{step.name}` or any step upstream of it in "
                    f"the materialized partitions: nothing stale, nothing missing (what `synthex plan` would say).",
        HOOKS: f"Every `on_update` hook of a projection of `{step.name}` that had to fire was delivered.",
    }
    return {c.value: f"{texts[c]} Severity {SEVERITIES[c].value}. {SCOPE_NOTE}" for c in step_checks(pipeline, step)}
