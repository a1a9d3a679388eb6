"""The asset checks a step asset carries (computed by the step's own op, after it writes). Their names
are ``synthex.core.record.CheckName`` (below Dagster, so the application decides on outcomes without it).

A step carries only the checks that can fail on it: ``hooks_delivered`` only where a projection of the
step has an ``on_update`` hook. Checks are not partitioned: Dagster 1.13 records a partitioned check's
result only for a run of one partition (``AssetCheckResult`` takes no partition; a single-run range has
no partition key), so each result covers the partitions its run materialized, listed in its metadata.
"""

from __future__ import annotations

from synthex.core.definition import PipelineDefinition
from synthex.core.record import CheckName
from synthex.core.steps import Step

PROVENANCE = CheckName.PROVENANCE
UP_TO_DATE = CheckName.UP_TO_DATE
HOOKS = CheckName.HOOKS
CHECKS = tuple(CheckName)
# No "errors = 0" check yet: a record that fails fails its whole step op today (nothing is written),
# so such a check could never fail. It comes with per-record error accounting (the safety issue).

SCOPE_NOTE = ("Evaluated over the partitions the run materialized (listed in the result's `partitions`), "
              "not per partition: the UI shows the result's partition as \u2014.")


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
        UP_TO_DATE: f"After the run, the plan finds no work for `{step.name}` or any step upstream of it in "
                    f"the materialized partitions: nothing stale, nothing missing (what `synthex plan` would say).",
        HOOKS: f"Every `on_update` hook of a projection of `{step.name}` that had to fire was delivered.",
    }
    return {c.value: f"{texts[c]} {SCOPE_NOTE}" for c in step_checks(pipeline, step)}
