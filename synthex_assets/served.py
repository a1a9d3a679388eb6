"""Copy-on-write partitions in the UI: a branch's partition of a step it reads through its parent shows as
materialized, "served by main".

A branch owns only the steps it overrides (and what is downstream of them); every other step's records are
its parent's, read through it (synthex.core.scope). Dagster knows nothing of that: a new branch's partitions
were all Missing, the lineage showed "50 % filled" and "materialize missing" launched runs that did nothing.
So for each partition the serving branch has materialized, the branch gets a *runless materialization*
(``DagsterInstance.report_runless_asset_event``, Dagster's public API for an asset event no run of it made)
whose metadata says ``served_by: main`` and carries the serving partition's content version: the fill counts
it, the partition's page says where its records are, and nothing is computed or written to the store. A
materialization rather than an observation because Dagster's fill and "missing" counts read materializations
only. Recorded when the branch is created (``synthex branch create``) and, for the periods a run of the serving
branch materialized, by that run's step op (whichever door launched it); a partition the branch already has
is left as it is, so both are idempotent. A branch run over an inherited step still materializes its partitions
(Dagster requires the output); their metadata says ``served_by`` too (``synthex_assets.step_assets``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dagster import AssetKey, AssetMaterialization, AssetRecordsFilter, DagsterInstance, MetadataValue

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import SynthexError
from synthex.core.project import branch_names
from synthex_assets.dagster_internals import DATA_VERSION_TAG
from synthex_assets.naming import DagsterNames
from synthex_assets.partitions import split_partition_key

SERVED_BY_KEY = "served_by"
CONTENT_VERSION_KEY = "synthex/content_version"


def served_metadata(serving: str, content_version: str | None = None) -> dict[str, object]:
    """What a served partition shows: the branch whose records it reads, and that its records are not copied."""
    return {SERVED_BY_KEY: serving,
            "preview": MetadataValue.md(f"_served by {serving} (copy-on-write): this branch reads the step's "
                                        f"records through `{serving}`; none are copied_"),
            **({CONTENT_VERSION_KEY: content_version} if content_version else {})}


def _latest_content_version(instance: DagsterInstance, key: AssetKey, partition: str) -> str | None:
    """The content version the serving partition's latest materialization recorded (None: none recorded)."""
    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, asset_partitions=[partition]),
                                              limit=1).records
    materialization = records[0].asset_materialization if records else None
    value = materialization.metadata.get(CONTENT_VERSION_KEY) if materialization is not None else None
    return getattr(value, "value", None)


def _stale_served(instance: DagsterInstance, key: AssetKey, partition: str, serving: str,
                  version: str | None) -> bool:
    """Whether the branch's partition is a served one recorded for another content of its serving partition
    (the parent changed since): it is reported again. A partition the branch materialized itself is not."""
    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, asset_partitions=[partition]),
                                              limit=1).records
    materialization = records[0].asset_materialization if records else None
    if materialization is None or getattr(materialization.metadata.get(SERVED_BY_KEY), "value", None) != serving:
        return False
    return version is not None and getattr(materialization.metadata.get(CONTENT_VERSION_KEY), "value", None) != version


def record_served_partitions(instance: DagsterInstance, definition: PipelineDefinition,
                             periods: Iterable[str] | None = None, steps: Iterable[str] | None = None,
                             serving_has: Mapping[str, str] | None = None) -> int:
    """Report the partitions branch ``definition`` reads through another branch and does not have yet, or has
    as served for an earlier content of the serving partition; the number reported. ``periods``: only these
    (None: every period the serving branch has); ``steps``: only these; ``serving_has``: period -> content
    version of the serving branch's partitions, when its materializations are not recorded yet (a step op
    reporting for its own run's periods)."""
    branch = definition.branch_name
    scope = definition.scope()
    wanted = set(periods) if periods is not None else None
    only = set(steps) if steps is not None else None
    reported = 0
    names = DagsterNames.of(definition)
    for step in definition.order():
        serving = scope.serves(step)
        if serving == branch or (only is not None and step not in only):
            continue
        key = names.asset_key(step)
        have: dict[str, set[str]] = {}
        for partition in instance.get_materialized_partitions(key):
            b, p = split_partition_key(partition)
            have.setdefault(b, set()).add(p)
        made = dict(serving_has or {})
        for period in sorted(have.get(serving, set()) | set(made)):
            if wanted is not None and period not in wanted:
                continue
            version = made.get(period) or _latest_content_version(instance, key, f"{serving}|{period}")
            if period in have.get(branch, set()) and not (
                    period in made and _stale_served(instance, key, f"{branch}|{period}", serving, version)):
                continue
            if not reported and not instance.has_dynamic_partition(names.branch_partitions, branch):
                instance.add_dynamic_partitions(names.branch_partitions, [branch])  # a branch file made before any run
            # Its data version is the serving partition's content version: the same records, the same version.
            instance.report_runless_asset_event(AssetMaterialization(
                asset_key=key, partition=f"{branch}|{period}", metadata=served_metadata(serving, version),
                tags={DATA_VERSION_TAG: version} if version else None))
            reported += 1
    return reported


def serve_branches_of(instance: DagsterInstance, pipeline: PipelineDefinition, step: str, serving: str,
                      versions: Mapping[str, str]) -> int:
    """After ``serving``'s partitions of ``step`` were made (period -> content version): every branch that reads
    ``step`` through ``serving`` shows them as served, with that content. A branch whose file does not load is
    left for its own run."""
    root = pipeline.root()
    made = dict(versions)
    reported = 0
    for name in branch_names(root.project_dir):
        if name == serving:
            continue
        try:
            definition = root.for_branch(name)
        except SynthexError:
            continue
        if definition.scope().serves(step) == serving:
            reported += record_served_partitions(instance, definition, made, steps=[step], serving_has=made)
    return reported
