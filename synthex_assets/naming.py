"""Stable mappings from Synthex names to what Dagster accepts.

Asset keys allow ``[A-Za-z0-9_]``: ``world-model`` becomes ``world_model`` (the step name stays in
asset metadata and the description). Branch names are checked in ``synthex.core.naming``.
"""

from __future__ import annotations

import re

from synthex.core.errors import PipelineDefinitionError

_ASSET_BAD = re.compile(r"[^A-Za-z0-9_]")


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


# The module `dagster dev` loads (workspace.yaml, `synthex ui`); runs launched by the CLI carry it as origin.
CODE_LOCATION_MODULE = "synthex_assets.code_location"


def job_name(pipeline_name: str) -> str:
    """The pipeline's own job: named after the pipeline (``personal-memory`` -> ``personal_memory``)."""
    return asset_name(pipeline_name)


def location_name(pipeline_name: str) -> str:
    """The code location shown in the UI: the project's pipeline name."""
    return pipeline_name
