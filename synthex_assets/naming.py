"""Stable mappings from Synthex names to what Dagster accepts.

Asset keys allow ``[A-Za-z0-9_]``: ``world-model`` becomes ``world_model`` (the step name stays in
asset metadata and the description). Branch names are checked in ``synthex.core.naming``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dagster import AssetKey

from synthex.core.errors import PipelineDefinitionError

if TYPE_CHECKING:
    from synthex.core.definition import PipelineDefinition

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


# The dynamic partitions definitions every step asset is partitioned by (synthex_assets.partitions); the
# dimensions of its ``branch|period`` keys keep these names whatever the namespace.
BRANCH_PARTITIONS = "branch"
PERIOD_PARTITIONS = "period"
# On a run the memory's namespace is in, so the run launcher reads the memory's own partitions (a run of the
# job carries it; a UI asset backfill's run is told by its assets' key prefix).
NAMESPACE_TAG = "synthex/namespace"


def scoped(namespace: str | None, name: str) -> str:
    """``name`` inside ``namespace`` (``alice__branch``); as it is when there is none."""
    return name if namespace is None else f"{namespace}__{name}"


def run_namespace(tags: Mapping[str, str], asset_keys: Iterable[AssetKey] | None) -> str | None:
    """The namespace of the memory a run belongs to: its tag, else the prefix of the assets it selects
    (a namespaced memory's step keys are ``[namespace, step]``); None: an unnamespaced memory's run."""
    if NAMESPACE_TAG in tags:
        return tags[NAMESPACE_TAG]
    prefixes = {key.path[0] for key in asset_keys or () if len(key.path) > 1}
    return next(iter(prefixes)) if len(prefixes) == 1 else None


@dataclass(frozen=True)
class DagsterNames:
    """Every name one memory has in a Dagster instance, in one place: its asset keys, its partitions
    definitions, its job, sensors and schedule, its code location and its writer (the run queue's key).

    ``namespace`` None: the names of a project alone on its instance (``summaries``, ``branch``). Set
    (``Pipeline(namespace="alice")``): the asset keys are prefixed (``alice/summaries``) and every other name
    is ``alice__<name>``, so many memories share one instance and one workspace without sharing a key, a
    partition key or a sensor; the code location and the writer are the namespace itself.
    """

    pipeline: str
    namespace: str | None = None

    @classmethod
    def of(cls, pipeline: PipelineDefinition) -> DagsterNames:
        return cls(pipeline.name, pipeline.namespace)

    def asset_key(self, step: str) -> AssetKey:
        name = asset_name(step)
        return AssetKey(name if self.namespace is None else [self.namespace, name])

    @property
    def branch_partitions(self) -> str:
        return scoped(self.namespace, BRANCH_PARTITIONS)

    @property
    def period_partitions(self) -> str:
        return scoped(self.namespace, PERIOD_PARTITIONS)

    @property
    def job(self) -> str:
        return scoped(self.namespace, job_name(self.pipeline))

    def source_sensor(self, source: str) -> str:
        return scoped(self.namespace, f"{asset_name(source)}_changes")

    @property
    def location(self) -> str:
        """The code location (a workspace's locations need distinct names): the namespace, else the pipeline."""
        return self.namespace if self.namespace is not None else location_name(self.pipeline)

    @property
    def memory(self) -> str:
        """Who writes, for the writer tag (``<memory>|<branch>``): the namespace, else the pipeline's name."""
        return self.location

    @property
    def run_tags(self) -> dict[str, str]:
        """What every run of the memory's job carries (nothing without a namespace)."""
        return {} if self.namespace is None else {NAMESPACE_TAG: self.namespace}
