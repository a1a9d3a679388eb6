"""One Dagster software-defined asset per pipeline step."""


import time
from datetime import UTC, datetime

from dagster import AssetExecutionContext, AssetsDefinition, MaterializeResult, MetadataValue, asset

from synthex.pipeline import Pipeline
from synthex.record import Record
from synthex.steps import Step, execute_partition
from synthex_assets.naming import asset_name
from synthex_assets.partitions import STEP_PARTITIONS
from synthex_assets.step_context import StoreStepContext
from synthex_resources.llm import LLMResource
from synthex_resources.record_store import RecordStoreResource
from synthex_resources.search import SearchEngine

RUN_ID_TAG = "synthex/run_id"
FULL_TAG = "synthex/full"
PREVIEW_RECORDS = 3


def preview_markdown(records: list[Record]) -> str:
    if not records:
        return "_no new records in this partition_"
    rows = ["| id | content |", "|---|---|"]
    for rec in records[:PREVIEW_RECORDS]:
        text = rec.content.replace("\n", " ").replace("|", "\\|")
        rows.append(f"| `{rec.id[:8]}` | {text[:200]}{'…' if len(text) > 200 else ''} |")
    return "\n".join(rows)


def build_step_asset(pipeline: Pipeline, step: Step) -> AssetsDefinition:
    description = f"Synthex {step.kind} step `{step.name}`" + (
        f" from {', '.join(step.from_)}" if step.from_ else "") + f" (pipeline `{pipeline.name}`)."

    @asset(
        name=asset_name(step.name),
        deps=[asset_name(u) for u in step.from_],
        partitions_def=STEP_PARTITIONS,
        code_version=step.version_hash(),
        group_name=asset_name(pipeline.name),
        description=description,
        kinds={"lancedb", "python"},
        metadata={"synthex/step": step.name, "synthex/kind": step.kind, "synthex/config": str(step.config())},
    )
    def _step_asset(context: AssetExecutionContext, store: RecordStoreResource, llm: LLMResource) -> MaterializeResult:
        started = time.monotonic()
        keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
        branch, period = keys["branch"], keys["period"]
        run_id = context.run.tags.get(RUN_ID_TAG, context.run_id)
        full = context.run.tags.get(FULL_TAG) == "1"
        records = store.get_store()
        ctx = StoreStepContext(records, branch, period, run_id, llm.get_completer(cache=records), step=step.name)
        existing = records.partition_ids(step.name, branch, period)
        result = execute_partition(step, ctx, existing, full=full)
        written = records.write_partition(step.name, branch, period, result.new_records, result.keep_ids)
        result.stats.duration = time.monotonic() - started
        records.record_step_stats(run_id, pipeline.name, branch, step.name, period, result.stats,
                                  datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        stats = result.stats
        index = SearchEngine(records).ensure_index(optimize=False, stem=pipeline.lexical_stem)
        return MaterializeResult(metadata={
            "index_rows": index["rows"],
            "index_fts_unindexed_rows": index["fts_unindexed"],
            "index_updated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "records_created": stats.output,
            "records_skipped": stats.skipped,
            "records_removed": written["removed"],
            "records_total": len(result.keep_ids),
            "errors": stats.errors,
            "tokens": stats.tokens,
            "duration_s": round(stats.duration, 3),
            "synthex_step": step.name,
            "preview": MetadataValue.md(preview_markdown(result.new_records)),
        })

    return _step_asset


def build_step_assets(pipeline: Pipeline) -> list[AssetsDefinition]:
    from synthex_assets.naming import check_asset_names

    check_asset_names(pipeline.order())
    return [build_step_asset(pipeline, pipeline.steps[name]) for name in pipeline.order()]
