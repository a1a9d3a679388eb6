"""Names a user chooses that end up as keys elsewhere: branch names.

A branch name becomes a Dagster dynamic partition key, where ``| , [ ]`` are accepted but can never
materialize, and a path segment in places, so anything but ``[A-Za-z0-9_.-/]`` is refused up front.
"""

from __future__ import annotations

import re

from synthex.errors import PipelineDefinitionError

_BRANCH_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,99}$")


def check_branch_name(branch: str) -> str:
    if not _BRANCH_OK.match(branch):
        raise PipelineDefinitionError(
            f"branch name {branch!r} is not allowed: use letters, digits, '_', '-', '.', '/' "
            f"(Dagster partition keys cannot hold '|', ',', '[' or ']')")
    return branch
