"""The asset checks every step asset carries (computed by the step's own op, after it writes)."""

from __future__ import annotations

from synthex.core.steps import Step

PROVENANCE = "provenance_complete"
UP_TO_DATE = "up_to_date"
HOOKS = "hooks_delivered"
CHECKS = (PROVENANCE, UP_TO_DATE, HOOKS)
# No "errors = 0" check yet: a record that fails fails its whole step op today (nothing is written),
# so such a check could never fail. It comes with per-record error accounting (the safety issue).


def check_descriptions(step: Step) -> dict[str, str]:
    return {
        PROVENANCE: f"Every source id of the new `{step.name}` records exists in the store.",
        UP_TO_DATE: f"After the run, the plan finds no work for `{step.name}` or any step upstream of it in the "
                    f"materialized partitions: nothing stale, nothing missing (what `synthex plan` would say).",
        HOOKS: f"Every `on_update` hook of a projection of `{step.name}` that had to fire was delivered.",
    }
