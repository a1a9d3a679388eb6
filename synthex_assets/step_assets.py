"""One Dagster software-defined asset per pipeline step, partitioned by (branch x period).

(No ``from __future__ import annotations`` here: Dagster reads the asset function's annotations.)

Every step asset has a single-run backfill policy: one run materializes all of its selected
partitions, one op per step, so Dagster's overhead is paid per run and per step, not per period.
Inside the op a ``StepExecutor`` processes the partitions branch by branch, periods in
chronological order (a fold's state chain needs it).
"""


import warnings

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    BetaWarning,
    Failure,
    MaterializeResult,
    MetadataValue,
    ResourceParam,
    asset,
)

from synthex.core.definition import PipelineDefinition
from synthex.core.deletions import consent_from_tags
from synthex.core.errors import SynthexError
from synthex.core.progress import ProgressReporter
from synthex.core.steps import Step
from synthex_assets.checks import CHECKS, check_descriptions
from synthex_assets.executor import PartitionOutcome, StepExecutor
from synthex_assets.naming import asset_name, check_asset_names
from synthex_assets.partitions import STEP_PARTITIONS, split_partition_key
from synthex_assets.preview import preview_markdown
from synthex_resources.llm import LLMConfig
from synthex_resources.record_store import RecordStore
from synthex_resources.source_sync import enforce_for_step

FULL_TAG = "synthex/full"


def partition_metadata(outcome: PartitionOutcome) -> dict[str, object]:
    """What the UI shows for one (branch, period) partition: that partition's own figures."""
    stats = outcome.stats
    return {
        "records_created": stats.output,
        "records_skipped": stats.skipped,
        "records_removed": outcome.removed,
        "records_total": outcome.total,
        "errors": stats.errors,
        "tokens": stats.tokens,
        "duration_s": round(stats.duration, 3),
        "preview": MetadataValue.md(preview_markdown(outcome.new_records)),
    }


def partitions_note(step: Step) -> str:
    """What the step's (branch, period) partitions hold, for the UI (description and metadata)."""
    span = step.single_partition_period()
    if span is not None:
        return (f"Partitions: branch x period, but a key group spans periods: every record of this step is in "
                f"the period partition `{span}` of its branch, made from its inputs of every period; its other "
                f"period partitions stay empty.")
    return "Partitions: branch x period (calendar month); each period is made from its inputs of that period."


def build_step_asset(pipeline: PipelineDefinition, step: Step) -> AssetsDefinition:
    name = asset_name(step.name)
    description = f"Synthex {step.kind} step `{step.name}`" + (
        f" from {', '.join(step.from_)}" if step.from_ else "") + f" (pipeline `{pipeline.name}`). " + partitions_note(step)

    @asset(
        name=name,
        deps=[asset_name(u) for u in step.from_],
        partitions_def=STEP_PARTITIONS,
        backfill_policy=BackfillPolicy.single_run(),
        code_version=step.version_hash(),
        group_name=asset_name(pipeline.name),
        description=description,
        kinds={"lancedb", "python"},
        metadata={"synthex/step": step.name, "synthex/kind": step.kind, "synthex/config": str(step.config()),
                  "synthex/partitions": partitions_note(step)},
        check_specs=[AssetCheckSpec(check, asset=name, description=text)
                     for check, text in check_descriptions(step).items()],
    )
    def _step_asset(context: AssetExecutionContext, store: ResourceParam[RecordStore],
                    llm: ResourceParam[LLMConfig], progress: ResourceParam[ProgressReporter]) -> MaterializeResult:
        partitions = [split_partition_key(k) for k in context.partition_keys]
        executor = StepExecutor(pipeline, step, store, llm, progress, run_id=context.run.run_id,
                                full=context.run.tags.get(FULL_TAG) == "1")
        try:
            # A source step's deletions: judged here unless the launching door did (synthex.core.deletions).
            enforce_for_step(pipeline, store, step.name, sorted({b for b, _ in partitions}),
                             consent_from_tags(context.run.tags, context.run.run_id))
            result = executor.run(partitions)
        except SynthexError as exc:
            # One line for the user: the step, the partition, the problem (the traceback stays in the log).
            raise Failure(description=str(exc), allow_retries=False) from exc
        except Exception as exc:  # storage, network, the embedder: still one line, naming the step
            raise Failure(description=f"step {step.name!r}: {type(exc).__name__}: {exc}",
                          allow_retries=False) from exc
        for outcome in result.outcomes:
            context.add_asset_metadata(partition_metadata(outcome),
                                       partition_key=f"{outcome.branch}|{outcome.period}")
        context.log.info(f"{step.name}: {len(result.outcomes)} partition(s), index {result.index}")
        return MaterializeResult(check_results=[
            AssetCheckResult(check_name=str(outcome.check), passed=outcome.passed, severity=AssetCheckSeverity.ERROR,
                             metadata={"detail": MetadataValue.text(outcome.detail)})
            for outcome in result.checks.values() if outcome.check in CHECKS
        ])

    return _step_asset


def build_step_assets(pipeline: PipelineDefinition) -> list[AssetsDefinition]:
    check_asset_names(pipeline.order())
    with warnings.catch_warnings():
        # single-run backfill policies are "beta" in Dagster 1.13; this is a deliberate choice (docs/architecture.md)
        warnings.simplefilter("ignore", BetaWarning)
        return [build_step_asset(pipeline, pipeline.steps[name]) for name in pipeline.order()]
