"""Dagster's private names live in one module, pinned to the Dagster release it was written for: an
upgrade fails here, naming what moved, instead of somewhere inside a run."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import dagster
from dagster import DagsterInstance, JobDefinition, PartitionKeyRange, RunRequest

from synthex_assets import dagster_internals as internals

ROOT = Path(__file__).resolve().parents[1]
PRIVATE_IMPORT = re.compile(r"^\s*(from\s+dagster\._|import\s+dagster\._)", re.MULTILINE)


def parameters(fn: object) -> set[str]:
    return set(inspect.signature(fn).parameters)  # type: ignore[arg-type]


def test_written_for_the_installed_dagster():
    assert dagster.__version__ == internals.DAGSTER_VERSION, (
        f"dagster {dagster.__version__} is installed; synthex_assets/dagster_internals.py was written for "
        f"{internals.DAGSTER_VERSION}: check each private name it imports (comments say why), then update it")


def test_each_private_name_has_the_shape_the_adapter_uses():
    assert internals.ASSET_PARTITION_RANGE_START_TAG == "dagster/asset_partition_range_start"
    assert internals.ASSET_PARTITION_RANGE_END_TAG == "dagster/asset_partition_range_end"
    assert internals.SINGLETON_REPOSITORY_NAME == "__repository__"
    assert {"job_def"} <= parameters(internals.InMemoryJob.__init__)
    assert {"job", "run_config", "instance_ref"} <= parameters(internals.create_execution_plan)
    assert {"execution_plan", "pipeline_snapshot_id"} <= parameters(internals.snapshot_from_execution_plan)
    assert {"execution_plan", "iterator", "execution_context_manager"} <= parameters(
        internals.ExecuteRunWithPlanIterable.__init__)
    assert {"job_context", "execution_plan"} <= parameters(internals.job_execution_iterator)
    assert {"context_event_generator", "job", "execution_plan", "run_config", "dagster_run", "instance",
            "raise_on_error", "output_capture", "executor_defs"} <= parameters(
        internals.PlanOrchestrationContextManager.__init__)
    assert callable(internals.orchestration_context_event_generator)
    # Methods of public classes the adapter calls that Dagster does not document as public.
    assert {"job_name", "run_id", "run_config", "status", "tags", "root_run_id", "parent_run_id",
            "step_keys_to_execute", "execution_plan_snapshot", "job_snapshot", "parent_job_snapshot",
            "asset_selection", "asset_check_selection", "resolved_op_selection", "op_selection",
            "remote_job_origin", "job_code_origin", "asset_graph"} <= parameters(DagsterInstance.create_run)
    assert {"resource_defs", "input_values", "asset_selection"} <= parameters(JobDefinition.as_ephemeral_job)
    assert {"asset_selection"} <= parameters(JobDefinition.get_subset)
    assert all(hasattr(JobDefinition, name) for name in ("run_tags", "get_job_snapshot", "get_job_snapshot_id"))


def test_the_origin_and_range_tags_read_back_as_dagster_reads_them():
    origin = internals.code_location_job_origin(module="synthex_assets.code_location", working_directory="/p",
                                                location="personal-memory", job="personal_memory")
    assert origin.job_name == "personal_memory"
    assert origin.repository_origin.repository_name == "__repository__"
    location = origin.repository_origin.code_location_origin
    assert location.location_name == "personal-memory"
    assert location.loadable_target_origin.module_name == "synthex_assets.code_location"
    assert location.loadable_target_origin.working_directory == "/p"
    tags = internals.partition_range_tags("main|2024-01", "main|2024-03")
    # Dagster's own reading of a run request's tags: the range the sensors and the launcher mean.
    assert RunRequest(tags=tags).partition_key_range == PartitionKeyRange("main|2024-01", "main|2024-03")
    assert internals.partition_range(tags) == ("main|2024-01", "main|2024-03")
    assert internals.partition_range({}) is None


def test_no_other_module_imports_a_private_dagster_name():
    offenders = []
    for package in ("synthex", "synthex_resources", "synthex_assets", "evals"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "dagster_internals.py" and PRIVATE_IMPORT.search(path.read_text(encoding="utf-8")):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_a_partitions_materialization_tags_are_the_ones_dagster_writes():
    """The step op records each partition's materialization itself (one data version per partition); its tags
    must be what Dagster's own output events carry, and the metadata key must still switch those events off."""
    from dagster import AssetKey, DataVersion, MultiPartitionKey
    from dagster._core.definitions.data_version import DataProvenance, extract_data_version_from_entry
    from dagster._core.definitions.partitions.utils.multi import get_tags_from_multi_partition_key
    from dagster._core.execution.plan import execute_step

    inputs = {AssetKey("chatgpt"): ("a1b2", 41), AssetKey("notes"): (None, None)}
    ours = internals.partition_materialization_tags("main|2023-09", data_version="c0ffee", code_version="s@12",
                                                     inputs=inputs)
    dagsters = {**execute_step._build_data_version_tags(
        DataVersion("c0ffee"), "s@12",
        {AssetKey("chatgpt"): {"data_version": DataVersion("a1b2"), "storage_id": 41},
         AssetKey("notes"): {"data_version": DataVersion("INITIAL"), "storage_id": None}}, True),
        **get_tags_from_multi_partition_key(MultiPartitionKey({"branch": "main", "period": "2023-09"}))}
    assert ours == dagsters
    provenance = DataProvenance.from_tags(ours)  # what the staleness resolver reads back
    assert provenance.input_storage_ids == {AssetKey("chatgpt"): 41, AssetKey("notes"): None}
    assert provenance.is_user_provided and provenance.code_version == "s@12"

    class Entry:
        tags = ours
    assert extract_data_version_from_entry(Entry()) == DataVersion("c0ffee")
    [key] = internals.NO_OUTPUT_MATERIALIZATIONS
    source = inspect.getsource(execute_step._log_materialization_or_observation_events_for_asset)
    assert key == "__source_asset_observation__" and "SYSTEM_METADATA_KEY_SOURCE_ASSET_OBSERVATION in output.metadata" \
        in source.split("asset_key =")[0]
