"""Eval assets, opt-in: each benchmark the project declares in ``pipeline.py``
(``pipeline.eval_asset("locomo", data="data/locomo10.json", schedule="0 3 * * *", thresholds={...})``, or
``synthex init --with-evals``) scores the project's pipeline as a Dagster asset ``eval_<benchmark>``
partitioned by branch x dataset: the ``branch`` dimension is the dynamic partitions the step assets use, the
``dataset`` dimension has one key, the declared data file's stem. Two dimensions because Dagster names the
dimension of a one-dimension partitions definition "default" in its UI and GraphQL API whatever the
definition is called; a dataset dimension is the one that means something here (a second data file per
benchmark would be a second key). A project that declares none gets no eval asset, job or schedule.

The data file is the declaration's, relative to the project folder (run config ``data`` may point
elsewhere); a missing file fails the materialization with one line naming it. Metrics go to the
materialization metadata (the UI plots them across materializations), with the design's scorecard (each
figure's protocol in the ``scorecard`` table) and, on a branch other than main when main has a result on the
same data file (from any door: the ``eval_runs`` table), the comparison with main as a table and an inline
chart (Dagster's Markdown renderer allows ``data:`` image sources); an asset check compares them with
the declaration's thresholds (run config may replace them) and fails, in one line naming each metric,
its value and its threshold, when one is below; it can block downstream materializations.
The per-question rows go to the project's ``eval_results`` DuckDB table through dagster-duckdb's
``DuckDBResource`` (key ``eval_results_duckdb``, bound to each asset so that the plugin's Definitions
carry it and an asset materializes on its own; the eval run id is the Dagster run id).
Each declaration has a job ``eval_<benchmark>_job``; one with ``schedule`` also has a schedule
``eval_<benchmark>_schedule`` that runs it on ``main`` (running by default: the project asked for it).
"""


import base64
import logging
import re
import warnings
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    BetaWarning,
    Config,
    DefaultScheduleStatus,
    Definitions,
    DimensionPartitionMapping,
    Failure,
    IdentityPartitionMapping,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionMapping,
    MultiPartitionsDefinition,
    PreviewWarning,
    RunRequest,
    StaticPartitionsDefinition,
    asset,
    define_asset_job,
    schedule,
)
from dagster_duckdb import DuckDBResource

from evals.architectures import project_architecture
from evals.benchmarks import EMBEDDING_CACHE, Benchmark, benchmark_registry, evaluate
from evals.pipeline_eval import protocol
from evals.report import chart, latest_results, strip_questions, table, write_eval_results
from evals.result import EvalResult
from evals.scorecard import Scorecard
from synthex.core.definition import EvalDeclaration, PipelineDefinition, eval_metric_name
from synthex.core.errors import PipelineDefinitionError
from synthex.core.naming import MAIN
from synthex_assets.naming import DagsterNames, scoped
from synthex_assets.partitions import branch_partitions
from synthex_resources.sql import eval_results_path

CHECK = "retrieval_thresholds"
EVAL_RESULTS_RESOURCE = "eval_results_duckdb"
BRANCH_DIMENSION = "branch"  # the step assets' dimension (``synthex_assets.partitions.branch_partitions``)
DATASET_DIMENSION = "dataset"
# The metrics of each level that become float metadata (the UI plots them across materializations).
PLOTTED = ("recall_any@5", "recall_any@10", "recall_all@5", "recall_all@10", "ndcg_any@10", "mrr")
log = logging.getLogger(__name__)


class EvalConfig(Config):
    data: str | None = None  # None: the declaration's data file (relative to the project folder)
    limit: int | None = None
    k: int = 10
    # A search strategy of the registry (`synthex search --help` lists them); None: the project's search output's
    # mode= (else hybrid), as `synthex eval <benchmark>` and every search door use.
    search_mode: str | None = None
    options: dict[str, str] = {}  # the benchmark's own options (LongMemEval: {"protocol": "any"})
    # metric name ("turn/recall_any@10", "session/ndcg_any@10", ...) -> minimum value; None: the declaration's
    thresholds: dict[str, float] | None = None


def failing_thresholds(metrics: dict[str, float], thresholds: dict[str, float]) -> dict[str, tuple[float | None, float]]:
    """metric -> (value, threshold) for each metric below its threshold (a metric not reported fails)."""
    return {m: (metrics.get(m), t) for m, t in thresholds.items() if metrics.get(m, float("-inf")) < t}


def check_description(failing: dict[str, tuple[float | None, float]], thresholds: dict[str, float]) -> str:
    """One line: every failing metric with its value and threshold, or what passed."""
    if not failing:
        return f"all {len(thresholds)} thresholds met" if thresholds else "no thresholds configured"
    return "; ".join(f"{m} = {'not reported' if v is None else f'{v:.4f}'} < threshold {t:g}"
                     for m, (v, t) in failing.items())


def dataset_key(declaration: EvalDeclaration) -> str:
    """The ``dataset`` partition key of a declaration: its data file's stem (``data/locomo10.json`` ->
    ``locomo10``), with what Dagster refuses in a partition key (``|``, ``,``, brackets...) replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(declaration.data).stem).strip("_") or "data"


def eval_partitions(declaration: EvalDeclaration, names: DagsterNames | None = None) -> MultiPartitionsDefinition:
    """branch x dataset (see the module docstring for why two dimensions); the branches are the memory's."""
    return MultiPartitionsDefinition({BRANCH_DIMENSION: branch_partitions(names),
                                      DATASET_DIMENSION: StaticPartitionsDefinition([dataset_key(declaration)])})


def eval_partition_key(declaration: EvalDeclaration, branch: str = MAIN) -> MultiPartitionKey:
    """The partition of the eval of ``branch`` on the declared data (``main|locomo10``)."""
    return MultiPartitionKey({BRANCH_DIMENSION: branch, DATASET_DIMENSION: dataset_key(declaration)})


def scorecard_metadata(card: Scorecard) -> dict[str, Any]:
    """``scorecard/<figure>`` floats (the measured ones: the UI plots them) and a ``scorecard`` table: every
    figure's value or state, target, whether met, and the protocol that produced it."""
    floats = {f"scorecard/{e.name}": MetadataValue.float(float(e.value)) for e in card.entries if e.value is not None}
    rows = ["| figure | value | target | met | protocol |", "|---|---:|---|---|---|"]
    for e in card.entries:
        value = f"{e.value:.4f}" if e.value is not None else e.state.value
        met = "n/a" if e.met is None else ("yes" if e.met else "no")
        rows.append(f"| {e.name} | {value} | {e.target_text} | {met} | {e.protocol.replace('|', '/')} |")
    return floats | {"scorecard": MetadataValue.md("\n".join(rows))} if card.entries else floats


def protocol_markdown(protocols: dict[str, str]) -> str:
    """Which protocol produced each metric group of the metadata (turn/..., session/..., by category)."""
    return "\n".join(f"- **{group}**: {text}" for group, text in protocols.items())


def chart_markdown(png: Path, title: str) -> str:
    """The chart inline in the asset's metadata, so the UI shows the image, not a file path."""
    return f"![{title} retrieval](data:image/png;base64,{base64.b64encode(png.read_bytes()).decode('ascii')})"


def eval_asset(pipeline: PipelineDefinition, benchmark_cls: type[Benchmark], declaration: EvalDeclaration,
               blocking: bool, results_db: DuckDBResource):
    """``eval_<benchmark>``: the benchmark scoring the pipeline's search steps on the partition's branch."""
    name = eval_asset_name(benchmark_cls.name)
    names = DagsterNames.of(pipeline)
    key = names.asset_key(name)
    declared_data = declaration.data_path(pipeline.project_dir)
    # Lineage: the eval searches the pipeline's search steps on the same branch.
    partitions = eval_partitions(declaration, names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)  # a stable mapping in practice; "beta" in Dagster 1.13
        # a partitioned check ("preview" in 1.13): its evaluation names the partition it judged, in the UI too
        warnings.simplefilter("ignore", PreviewWarning)
        # each eval partition reads its branch's partitions of every period (a dimension left out maps to all)
        by_branch = MultiPartitionMapping({BRANCH_DIMENSION: DimensionPartitionMapping(
            dimension_name=BRANCH_DIMENSION, partition_mapping=IdentityPartitionMapping())})
        # ``resource_defs`` on an asset is "beta" too: bound so the asset materializes on its own.
        decorate = asset(
            key=key,
            deps=[AssetDep(names.asset_key(s), partition_mapping=by_branch) for s in pipeline.search_steps()],
            partitions_def=partitions,
            group_name="evals",
            kinds={"python"},
            description=f"{benchmark_cls.title} retrieval of pipeline `{pipeline.name}` on a branch "
                        f"(turn and session level), over `{declaration.data}` in the project.",
            check_specs=[AssetCheckSpec(CHECK, asset=key, blocking=blocking, partitions_def=partitions,
                                        description="Every configured metric is at or above its threshold: "
                                                    + ", ".join(f"{m} >= {t:g}" for m, t in
                                                                declaration.thresholds.items()))],
            resource_defs={EVAL_RESULTS_RESOURCE: results_db},
        )

    @decorate
    def eval_benchmark(context: AssetExecutionContext, config: EvalConfig,
                       eval_results_duckdb: DuckDBResource) -> MaterializeResult:
        branch = context.partition_key.keys_by_dimension[BRANCH_DIMENSION]
        benchmark = benchmark_cls(**config.options)
        data = (pipeline.project_dir / Path(config.data).expanduser()).resolve() if config.data else declared_data
        if not data.is_file():  # one line in the UI, before anything is ingested
            raise Failure(description=f"{name}: data file {data} does not exist (pipeline.eval_asset"
                                      f"({benchmark_cls.name!r}, data={declaration.data!r}) in "
                                      f"{pipeline.project_dir / 'pipeline.py'})", allow_retries=False)
        thresholds = declaration.thresholds if config.thresholds is None else {
            eval_metric_name(m, f"{name} run config"): float(t) for m, t in config.thresholds.items()}
        work = pipeline.data_dir / "evals" / "work" / benchmark.name
        arch = project_architecture(pipeline.project_dir, branch)
        arch.mode = config.search_mode or arch.mode
        [result] = evaluate(benchmark, data, [arch], work, limit=config.limit, k=config.k, log=context.log.info,
                            embedding_cache=pipeline.data_dir / "evals" / EMBEDDING_CACHE)
        if eval_results_duckdb.database != ":memory:":
            Path(eval_results_duckdb.database).parent.mkdir(parents=True, exist_ok=True)
        card = Scorecard.from_dict(result.get("scorecard"))
        protocols = protocol(benchmark, arch, config.k)
        with eval_results_duckdb.get_connection() as con:
            n_rows = write_eval_results(con, context.run.run_id, [result])
            # main's latest result on the same data file (whichever door wrote it), for the comparison
            on_main = latest_results(con, benchmark=result["benchmark"], branch=MAIN, architecture=MAIN,
                                     data_file=data) if branch != MAIN else []
        [result] = strip_questions([result], context.run.run_id)
        flat = {f"{level}/{metric}": value for level in ("turn", "session")
                for metric, value in result["metrics"][level].items()}
        failing = failing_thresholds(flat, thresholds)
        png = chart([result], pipeline.data_dir / "evals" / f"{name}-{branch}.png")
        metadata: dict[str, Any] = {k: MetadataValue.float(float(v)) for k, v in flat.items() if k.split("/")[1] in PLOTTED}
        metadata |= scorecard_metadata(card)
        metadata |= {"eval_run_id": context.run.run_id, "question_rows": n_rows,
                     "eval_results": MetadataValue.path(eval_results_duckdb.database),
                     "data": MetadataValue.path(str(data)),
                     "n_questions": result["n_questions"], "wall_s": result["wall_s"],
                     "table": MetadataValue.md(table([result], "turn")),
                     "protocol": MetadataValue.md(protocol_markdown(protocols)),
                     "chart": MetadataValue.md(chart_markdown(png, benchmark_cls.title)),
                     "chart_file": MetadataValue.path(str(png))}
        if branch != MAIN:
            metadata |= comparison_metadata(EvalResult.from_result(result, [], protocols), next(iter(on_main), None),
                                            pipeline.data_dir / "evals" / f"{name}-{branch}-vs-main.png", name, data)
        return MaterializeResult(
            metadata=metadata,
            check_results=[AssetCheckResult(
                check_name=CHECK, passed=not failing, severity=AssetCheckSeverity.ERROR,
                description=check_description(failing, thresholds),
                metadata={"failing": MetadataValue.json({m: {"value": v, "threshold": t} for m, (v, t) in failing.items()}),
                          "thresholds": MetadataValue.json(thresholds)})],
        )

    return eval_benchmark


def comparison_metadata(branch_result: EvalResult, main_result: dict[str, Any] | None, png: Path, name: str,
                        data: Path) -> dict[str, Any]:
    """The branch against main: ``compare_main`` (``EvalResult.compare``'s table: metric, branch, main,
    delta, with the scorecard), ``compare_chart`` inline and ``compare_chart_file``; or one line saying
    main has no result on this data file yet."""
    if main_result is None:
        return {"compare_main": MetadataValue.text(f"main has no {name} result on {data} yet: materialize the "
                                                   f"main partition (or run `synthex eval`) to compare")}
    main = EvalResult.from_result(main_result, [], {})
    chart_file = branch_result.compare_chart(main, png)
    return {"compare_main": MetadataValue.md(f"Against main's eval run {main.eval_run_id} "
                                             f"({main_result.get('evaluated_at', '')[:19]} UTC):\n\n"
                                             + branch_result.compare(main)),
            "compare_chart": MetadataValue.md(chart_markdown(chart_file, f"{branch_result.label} vs main")),
            "compare_chart_file": MetadataValue.path(str(chart_file))}


def eval_asset_name(benchmark: str) -> str:
    return f"eval_{benchmark}"


def eval_definitions(pipeline: PipelineDefinition, blocking: bool = False,
                     eval_results: DuckDBResource | None = None) -> Definitions:
    """The eval assets the pipeline declares (``pipeline.evals``; none: empty Definitions), one job each and,
    where the declaration has ``schedule``, its schedule. ``eval_results``: where the per-question rows go
    (default: the project's ``.synthex/evals/eval_results.duckdb``, the file ``synthex sql`` reads).
    An undeclared benchmark name raises one line listing the registered ones."""
    if not pipeline.evals:
        return Definitions()
    results_db = eval_results or DuckDBResource(database=str(eval_results_path(pipeline.data_dir)))
    registry = benchmark_registry()
    for failure in registry.failures:  # reported in the code server's log, never skipped in silence
        log.warning("%s", failure)
    known = dict(registry.items())
    assets, jobs, schedules = [], [], []
    for benchmark, declaration in pipeline.evals.items():
        if benchmark not in known:
            raise PipelineDefinitionError(f"pipeline.eval_asset({benchmark!r}): unknown benchmark; registered: "
                                          f"{', '.join(sorted(known)) or 'none'}")
        asset_def = eval_asset(pipeline, known[benchmark], declaration, blocking or declaration.blocking, results_db)
        job = define_asset_job(
            scoped(pipeline.namespace, f"{eval_asset_name(benchmark)}_job"), selection=[asset_def],  # branch x dataset
            description=f"Score pipeline `{pipeline.name}` on {known[benchmark].title} ({declaration.data}) on the "
                        f"chosen branch partition; metrics in the asset's metadata, threshold check "
                        f"`{CHECK}`, per-question rows in the eval_results table.")
        assets.append(asset_def)
        jobs.append(job)
        if declaration.schedule:
            schedules.append(eval_schedule(job, benchmark, declaration, pipeline.namespace))
    return Definitions(assets=assets, jobs=jobs, schedules=schedules)


def eval_schedule(job, benchmark: str, declaration: EvalDeclaration, namespace: str | None = None):
    """``eval_<benchmark>_schedule``: the eval job on ``main`` (and the declared data) at the declared cron
    (declared in pipeline.py, so on)."""
    cron = declaration.schedule
    partition = eval_partition_key(declaration, MAIN)

    @schedule(name=scoped(namespace, f"{eval_asset_name(benchmark)}_schedule"), job=job, cron_schedule=cron,
              default_status=DefaultScheduleStatus.RUNNING,
              description=f"Runs {job.name} on branch main at `{cron}` (pipeline.eval_asset({benchmark!r}, "
                          f"schedule=...) in pipeline.py); stop it in the UI.")
    def eval_on_main(context):
        return RunRequest(partition_key=partition)

    return eval_on_main
