"""The asset checks every step asset carries (computed by the step's own op, after it writes). Their names
are ``synthex.core.record.CheckName`` (below Dagster, so the application decides on outcomes without it)."""

from __future__ import annotations

from synthex.core.record import CheckName
from synthex.core.steps import Step

PROVENANCE = CheckName.PROVENANCE
UP_TO_DATE = CheckName.UP_TO_DATE
HOOKS = CheckName.HOOKS
CHECKS = tuple(CheckName)
# No "errors = 0" check yet: a record that fails fails its whole step op today (nothing is written),
# so such a check could never fail. It comes with per-record error accounting (the safety issue).


def check_descriptions(step: Step) -> dict[str, str]:
    """Check name (a plain string: Dagster serializes no enums but its own) -> what it checks."""
    return {
        PROVENANCE.value: f"Every source id of the new `{step.name}` records exists in the store.",
        UP_TO_DATE.value: f"After the run, the plan finds no work for `{step.name}` or any step upstream of it in "
                          f"the materialized partitions: nothing stale, nothing missing (what `synthex plan` would say).",
        HOOKS.value: f"Every `on_update` hook of a projection of `{step.name}` that had to fire was delivered.",
    }
