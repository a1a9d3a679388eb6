"""The asset checks every step asset carries (computed by the step's own op, after it writes)."""

from __future__ import annotations

from synthex.steps import Step

NO_ERRORS = "no_errors"
PROVENANCE = "provenance_complete"
UP_TO_DATE = "up_to_date"
CHECKS = (NO_ERRORS, PROVENANCE, UP_TO_DATE)


def check_descriptions(step: Step) -> dict[str, str]:
    return {
        NO_ERRORS: f"No record of `{step.name}` failed in the materialized partitions (errors = 0).",
        PROVENANCE: f"Every source id of the new `{step.name}` records exists in the store.",
        UP_TO_DATE: f"After the run, each materialized partition of `{step.name}` holds exactly the records "
                    f"its current inputs and step version call for: nothing stale, nothing missing.",
    }
