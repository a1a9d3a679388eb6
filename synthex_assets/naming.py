"""Stable mappings from Synthex names to what Dagster accepts.

Asset keys allow ``[A-Za-z0-9_]``: ``world-model`` becomes ``world_model`` (the step name stays in
asset metadata and the description). Branch names become dynamic partition keys, where ``| , [ ]``
are accepted but can never materialize, so they are rejected up front.
"""

from __future__ import annotations

import re

from synthex.errors import PipelineDefinitionError

_ASSET_BAD = re.compile(r"[^A-Za-z0-9_]")
_BRANCH_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,99}$")


def asset_name(step: str) -> str:
    name = _ASSET_BAD.sub("_", step)
    return name if not name[:1].isdigit() else f"s_{name}"


def check_asset_names(steps: list[str]) -> None:
    seen: dict[str, str] = {}
    for step in steps:
        name = asset_name(step)
        if name in seen:
            raise PipelineDefinitionError(
                f"steps {seen[name]!r} and {step!r} map to the same Dagster asset key {name!r}; rename one")
        seen[name] = step


def branch_key(branch: str) -> str:
    if not _BRANCH_OK.match(branch):
        raise PipelineDefinitionError(
            f"branch name {branch!r} is not allowed: use letters, digits, '_', '-', '.', '/' "
            f"(Dagster partition keys cannot hold '|', ',', '[' or ']')")
    return branch
