"""One Dagster software-defined asset per pipeline step, partitioned by (branch x period).

(No ``from __future__ import annotations`` here: Dagster reads the asset function's annotations.)

Every step asset has a single-run backfill policy: one run materializes all of its selected
partitions, one op per step, so Dagster's overhead is paid per run and per step, not per period.
Inside the op a ``StepExecutor`` processes the partitions branch by branch, periods in
chronological order (a fold's state chain needs it).
"""


import hashlib
import warnings
from collections.abc import Collection, Iterable, Mapping

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    AssetsDefinition,
    AutomationCondition,
    BackfillPolicy,
    BetaWarning,
    DagsterInstance,
    EventLogRecord,
    Failure,
    MaterializeResult,
    MetadataValue,
    ResourceParam,
    asset,
)

from synthex.core.definition import PipelineDefinition
from synthex.core.deletions import consent_from_tags
from synthex.core.errors import SynthexError
from synthex.core.periods import ALL_PERIODS
from synthex.core.progress import ProgressReporter
from synthex.core.record import Record
from synthex.core.steps import Step
from synthex_assets.checks import SEVERITIES, check_descriptions, step_checks
from synthex_assets.dagster_internals import (
    DATA_VERSION_TAG,
    NO_OUTPUT_MATERIALIZATIONS,
    PeriodOrderedPartitions,
    partition_materialization_tags,
)
from synthex_assets.executor import PartitionOutcome, StepExecutor, group_partitions
from synthex_assets.naming import DagsterNames, asset_name, check_asset_names
from synthex_assets.partitions import invalid_periods, misresolved_range, split_partition_key, step_partitions
from synthex_assets.preview import PREVIEW_RECORDS, preview_markdown
from synthex_assets.run_tags import missing_tags
from synthex_assets.served import CONTENT_VERSION_KEY, serve_branches_of, served_metadata
from synthex_resources.llm import OFFLINE_STAND_IN, LLMConfig
from synthex_resources.record_store import RecordStore
from synthex_resources.source_sync import enforce_for_step
from synthex_resources.store.fragment_append import (
    IngestWorkers,
    check_worker_embedder,
    check_workers,
    usable_declared_workers,
)

FULL_TAG = "synthex/full"
# ``synthex run --workers N``: a first ingest's records embedded and written by N processes (executor.py);
# a run launched from the UI takes it as a tag too, and the sensors' and the schedule's run requests carry the
# pipeline's ``ingest_workers``. Absent: the pipeline's ``ingest_workers`` (1 unless pipeline.py says).
WORKERS_TAG = "synthex/workers"
LLM_TAG = "synthex/llm"  # on a run whose model steps the offline stand-in wrote (set by the step op)
OFFLINE_TAG_VALUE = "offline-stand-in"


def ingest_workers(tag: str | None, declared: int = 1) -> int:
    """The run's ingest workers from its tag, checked strictly (a tag that is not 1..cores is a SynthexError);
    absent, or the declared count itself (what the sensors' and the schedule's requests carry): ``declared``,
    the pipeline's ``ingest_workers``, which the step takes as a ceiling on its host
    (``usable_declared_workers``)."""
    if tag is None or tag.strip() == str(declared):
        return declared
    text = tag.strip()
    # ASCII digits only: str.isdigit() is also true of "²", which int() refuses with a ValueError
    return check_workers(int(text) if text.isascii() and text.isdigit() else tag)


def partition_metadata(outcome: PartitionOutcome, held: list[Record], model: str | None,
                       version: str) -> dict[str, object]:
    """What the UI shows for one (branch, period) partition: that partition's own figures, whether this
    run changed it, its content version, and a preview of what it holds (its new records first), so a run
    that changed nothing still shows the content; ``model``: who wrote a model step's records (None: no
    model)."""
    stats = outcome.stats
    changed = bool(outcome.new_records or outcome.removed)
    shown = [*outcome.new_records, *held][:PREVIEW_RECORDS]
    note = (f"_{len(outcome.new_records)} new, {outcome.removed} removed by this run; "
            f"{outcome.total} record(s) held_" if changed
            else f"_unchanged by this run; {outcome.total} record(s) held_")
    return {
        "changed": changed,
        "records_created": stats.output,
        "records_skipped": stats.skipped,
        "records_removed": outcome.removed,
        "records_total": outcome.total,
        "errors": stats.errors,
        # The offline stand-in calls no model: 0 tokens; what a model would have been sent, estimated with the
        # planner's token model, is shown beside it (synthex.core.llm.approx_tokens).
        "tokens": 0 if model == OFFLINE_STAND_IN else stats.tokens,
        **({"tokens_if_a_model": stats.tokens} if model == OFFLINE_STAND_IN else {}),
        "duration_s": round(stats.duration, 3),
        CONTENT_VERSION_KEY: version,
        **({LLM_TAG: model} if model is not None else {}),
        "preview": MetadataValue.md(f"{note}\n\n{preview_markdown(shown)}" if shown else note),
    }


def held_records(store: RecordStore, outcomes: list[PartitionOutcome]) -> dict[tuple[str, str], list[Record]]:
    """(branch, period) -> the first records the partition holds besides its new ones, for its preview
    (one read for the whole run)."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for o in outcomes:
        new_ids = {r.id for r in o.new_records}
        room = PREVIEW_RECORDS - len(new_ids)
        wanted[(o.branch, o.period)] = sorted(o.keep_ids - new_ids)[:room] if room > 0 else []
    found = {r.id: r for r in store.records.get_many(i for ids in wanted.values() for i in ids)}
    return {key: [found[i] for i in ids if i in found] for key, ids in wanted.items()}


def partition_contents(store: RecordStore, outcomes: list[PartitionOutcome]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(branch, period) -> (id, content) of every record the partition holds after the run: its new records
    from memory, the others' stored content in one read of two columns (as stored: ciphertext when the store
    is encrypted, which is as stable as the row)."""
    held = {i for o in outcomes for i in o.keep_ids - {r.id for r in o.new_records}}
    stored = store.records.rows_by_id(held, ["id", "content"]) if held else {}
    out = {}
    for o in outcomes:
        new = {r.id: r.content for r in o.new_records}
        out[(o.branch, o.period)] = [(i, new[i] if i in new else stored[i]["content"])
                                     for i in o.keep_ids | set(new) if i in new or i in stored]
    return out


def content_version(records: Iterable[tuple[str, str]]) -> str:
    """What a partition holds, as one hash of its records' (id, content) pairs, in id order. The same records
    give the same version whichever run, door or branch wrote them; any added, removed or edited record
    changes it."""
    digest = hashlib.sha256()
    for record_id, content in sorted(records):
        digest.update(record_id.encode("utf-8") + b"\0" + hashlib.sha256(str(content).encode("utf-8")).digest())
    return digest.hexdigest()[:24]


def latest_materializations(instance: DagsterInstance, key: AssetKey,
                            partitions: Collection[str]) -> dict[str, EventLogRecord]:
    """partition -> the latest materialization record of ``key``'s partition (absent: none recorded), newest
    first in pages, so a run's partitions, materialized together, take one page."""
    wanted, found, cursor = set(partitions), {}, None
    while wanted:
        page = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, asset_partitions=sorted(wanted)),
                                               limit=max(100, 2 * len(wanted)), cursor=cursor)
        for record in page.records:
            partition = record.partition_key
            if partition in wanted:
                found[partition] = record
                wanted.discard(partition)
        if not page.has_more:
            break
        cursor = page.cursor
    return found


def record_partition_materializations(context: AssetExecutionContext, names: DagsterNames, step: Step,
                                      metadata: Mapping[str, Mapping[str, object]],
                                      versions: Mapping[str, str | None]) -> None:
    """Each partition's materialization, with its own data version: ``versions[partition]``, its content
    version. Dagster 1.13 would record one data version for every partition of the run's range (see
    synthex_assets.dagster_internals), so a no-op run over another range, or an edit of one month, moved the
    version of every partition in it and Dagster marked what is below them stale. The provenance tags are the
    ones Dagster writes, so its staleness reads these as its own: the code version and, per input asset, the
    data version of the same partition upstream and, as Dagster points, the storage id of the input asset's
    latest materialization (staleness looks for a newer record of the partition after it). Recorded oldest
    period first: the newest is latest."""
    keys = sorted(metadata, key=lambda k: split_partition_key(k)[::-1])
    deps = [names.asset_key(u) for u in step.from_]
    upstream = {dep: latest_materializations(context.instance, dep, keys) for dep in deps}
    pointers = {r.asset_entry.asset_key: r.asset_entry.last_materialization_storage_id
                for r in context.instance.get_asset_records(deps)} if deps else {}
    for key in keys:
        inputs = {}
        for dep, records in upstream.items():
            record = records.get(key)
            # none on a served partition's runless materialization of unknown content (synthex_assets.served)
            tags = (record.asset_materialization.tags if record is not None else None) or {}
            inputs[dep] = (tags.get(DATA_VERSION_TAG), pointers.get(dep))
        context.log_event(AssetMaterialization(
            asset_key=context.asset_key, partition=key, metadata=dict(metadata[key]),
            tags=partition_materialization_tags(key, data_version=versions.get(key),
                                                code_version=readable_version(step), inputs=inputs)))


def partition_span(keys: list[str]) -> str:
    """The partitions a check covered, compact: ``main|2024-01 .. main|2024-10 (10)``."""
    return keys[0] if len(keys) == 1 else f"{keys[0]} .. {keys[-1]} ({len(keys)})"


# Every step asset shares one period list (a Dagster partitions definition is per asset, and one run's range
# must name the same keys in every step), so a period only some steps have data for shows on the others too.
SHARED_PERIODS_NOTE = ("The period list is the pipeline's (every period any step has data for): a period with no "
                       "inputs for this step shows as Missing here with nothing to make, not as a failure; a "
                       "branch's partitions of a step it inherits show as materialized, served by its parent.")


def partitions_note(step: Step) -> str:
    """What the step's (branch, period) partitions hold, for the UI (description and metadata)."""
    span = step.single_partition_period()
    if span is not None:
        return (f"Partitions: branch x period, but a key group spans periods: every record of this step is in "
                f"the period partition `{span}` of its branch, made from its inputs of every period; its other "
                f"period partitions stay empty. {SHARED_PERIODS_NOTE}")
    return (f"Partitions: branch x period (calendar month); each period is made from its inputs of that period. "
            f"{SHARED_PERIODS_NOTE}")


# How long the hash in a readable version is: 40 bits, so two versions of one step that Dagster compares
# ("code version changed") differ in it (a collision: ~1 in 10^12 for a pair).
VERSION_HASH_CHARS = 10
# A step's ``automation=`` -> Dagster's declarative condition (synthex.core.steps.base.AUTOMATIONS). eager: a
# partition is requested when a partition it depends on updates (or it goes missing), not while an input is
# missing or in progress; evaluated by the daemon's automation loop, so a sensor's run of the source is enough
# for the steps below it to follow.
AUTOMATIONS = {"eager": AutomationCondition.eager}


def readable_version(step: Step) -> str:
    """The code version the UI shows for a step: its name and the start of its version hash
    (``summaries@3f2a9c01bd``), which changes exactly when the step's version does."""
    return f"{step.name}@{step.version_hash()[:VERSION_HASH_CHARS]}"


def build_step_asset(pipeline: PipelineDefinition, step: Step, names: DagsterNames,
                     partitions: PeriodOrderedPartitions) -> AssetsDefinition:
    key = names.asset_key(step.name)
    uses_model = step.uses_model()
    description = f"Synthex {step.kind} step `{step.name}`" + (
        f" from {', '.join(step.from_)}" if step.from_ else "") + f" (pipeline `{pipeline.name}`). " + partitions_note(step)
    config = step.config()
    if uses_model:
        # Decided where the code location loads (its environment): a model step's records come from the
        # offline stand-in unless a key or base URL is set; the UI says so instead of "model: None".
        shown = LLMConfig(model=config.get("model")).model_shown()
        config = {**config, "model": shown}
        description += (f" Model: {shown}; with no OPENAI_API_KEY / OPENAI_BASE_URL its records are "
                        f"extractive summaries of the input, labelled in each record's audit.model."
                        if shown == OFFLINE_STAND_IN else f" Model: {shown}.")
    checks = step_checks(pipeline, step)

    @asset(
        key=key,
        deps=[names.asset_key(u) for u in step.from_],
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.single_run(),
        code_version=readable_version(step),
        group_name=step.group or asset_name(pipeline.name),
        owners=list(step.owners) or None,
        automation_condition=AUTOMATIONS[step.automation]() if step.automation else None,
        description=description,
        kinds={"lancedb", "python"},
        metadata={"synthex/step": step.name, "synthex/kind": step.kind, "synthex/config": str(config),
                  "synthex/partitions": partitions_note(step)},
        check_specs=[AssetCheckSpec(check, asset=key, description=text)
                     for check, text in check_descriptions(pipeline, step).items()],
    )
    def _step_asset(context: AssetExecutionContext, store: ResourceParam[RecordStore],
                    llm: ResourceParam[LLMConfig], progress: ResourceParam[ProgressReporter]) -> MaterializeResult:
        partitions = [split_partition_key(k) for k in context.partition_keys]
        untagged = missing_tags(context.run.tags, {b for b, _ in partitions})
        if untagged:  # launched through a run launcher that did not tag it (synthex_assets.run_tags)
            context.instance.add_run_tags(context.run.run_id, untagged)
        invented = invalid_periods(partitions)
        if invented:  # before anything is read or written: the run fails here, nothing is materialized
            raise Failure(description=f"step {step.name!r}: {', '.join(invented[:3])}"
                                      f"{' ...' if len(invented) > 3 else ''}: not a period (a calendar month, "
                                      f"YYYY-MM, or {ALL_PERIODS!r}); periods are registered from the data, "
                                      f"not added by hand",
                          allow_retries=False)
        misresolved = misresolved_range(context.run.tags, context.partition_key_range)
        if misresolved:  # a UI job backfill over a range (synthex_assets.partitions): refused before any read
            raise Failure(description=f"step {step.name!r}: {misresolved}", allow_retries=False)
        try:
            count = ingest_workers(context.run.tags.get(WORKERS_TAG), pipeline.ingest_workers)
            if count == pipeline.ingest_workers:  # the declared count: a ceiling on this host
                count, lowered = usable_declared_workers(count, store.embedder)
                if lowered is not None:
                    context.log.warning(f"step {step.name!r}: {lowered}")
            else:
                check_worker_embedder(store.embedder, count)
            workers = IngestWorkers(count)
        except SynthexError as exc:  # a tag set by hand in the UI: refused before anything is read
            raise Failure(description=f"step {step.name!r}: tag {WORKERS_TAG}: {exc}", allow_retries=False) from exc
        executor = StepExecutor(pipeline, step, store, llm, progress, run_id=context.run.run_id,
                                full=context.run.tags.get(FULL_TAG) == "1", workers=workers)
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
        model = llm.model_shown() if uses_model else None
        if model == OFFLINE_STAND_IN and context.run.tags.get(LLM_TAG) != OFFLINE_TAG_VALUE:
            context.instance.add_run_tags(context.run.run_id, {LLM_TAG: OFFLINE_TAG_VALUE})
        held = held_records(store, result.outcomes)
        contents = partition_contents(store, result.outcomes)
        versions: dict[str, str | None] = {}
        metadata: dict[str, Mapping[str, object]] = {}
        for outcome in result.outcomes:
            key, mine = f"{outcome.branch}|{outcome.period}", held[(outcome.branch, outcome.period)]
            versions[key] = content_version(contents[(outcome.branch, outcome.period)])
            metadata[key] = partition_metadata(outcome, mine, model, versions[key])
        for branch, periods in group_partitions([(o.branch, o.period) for o in result.outcomes]).items():
            serve_branches_of(context.instance, pipeline, step.name, branch,  # synthex_assets.served
                              {p: versions[f"{branch}|{p}"] for p in periods})
        # A branch's partitions of a step it reads through its parent carry the parent partition's content.
        served = {}  # branch partition -> (the parent branch, the parent's partition serving it)
        for key in context.partition_keys:
            branch, period = split_partition_key(key)
            if key not in metadata and branch in result.served:
                served[key] = (result.served[branch], f"{result.served[branch]}|{period}")
        serving = latest_materializations(context.instance, context.asset_key, {p for _, p in served.values()})
        for key, (parent, parent_key) in served.items():
            record = serving.get(parent_key)
            value = record.asset_materialization.metadata.get(CONTENT_VERSION_KEY) if record is not None else None
            versions[key] = getattr(value, "value", None)
            metadata[key] = served_metadata(parent, versions[key])
        for key in context.partition_keys:  # none held: a period with nothing to make for this step
            if key not in metadata:
                versions[key] = content_version([])
                metadata[key] = {CONTENT_VERSION_KEY: versions[key]}
        record_partition_materializations(context, names, step, metadata, versions)
        context.log.info(f"{step.name}: {len(result.outcomes)} partition(s), index {result.index}")
        covered = partition_span(sorted(context.partition_keys, key=lambda k: split_partition_key(k)[::-1]))
        return MaterializeResult(metadata=NO_OUTPUT_MATERIALIZATIONS, check_results=[
            AssetCheckResult(check_name=str(outcome.check), passed=outcome.passed,
                             severity=SEVERITIES.get(outcome.check, AssetCheckSeverity.ERROR),
                             metadata={"detail": MetadataValue.text(outcome.detail),
                                       "partitions": MetadataValue.text(covered),
                                       "failing_partitions": MetadataValue.text(
                                           partition_span(list(outcome.partitions)) if outcome.partitions
                                           else "none")})
            for outcome in result.checks.values() if outcome.check in checks
        ])

    return _step_asset


def build_step_assets(pipeline: PipelineDefinition) -> list[AssetsDefinition]:
    check_asset_names(pipeline.order())
    with warnings.catch_warnings():
        # single-run backfill policies are "beta" in Dagster 1.13; this is a deliberate choice (docs/architecture.md)
        warnings.simplefilter("ignore", BetaWarning)
        names = DagsterNames.of(pipeline)
        partitions = step_partitions(names)  # one definition for every step asset (one job over them all)
        return [build_step_asset(pipeline, pipeline.steps[name], names, partitions) for name in pipeline.order()]
