"""Eval assets: each registered benchmark with a default data file (``Benchmark.default_data``; LoCoMo's
dev split) scores the project's pipeline as a Dagster asset ``eval_<benchmark>`` partitioned by branch.

Metrics go to the materialization metadata (the UI plots them across materializations); an asset
check compares them with thresholds from run config and can block downstream materializations.
The per-question rows go to the project's ``eval_results`` DuckDB table through dagster-duckdb's
``DuckDBResource`` (key ``eval_results_duckdb``, bound to each asset so that the plugin's Definitions
carry it and an asset materializes on its own; the eval run id is the Dagster run id).
A schedule (off by default) re-runs the evals nightly on ``main``.
"""


import base64
import logging
import warnings
from pathlib import Path

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
    MaterializeResult,
    MetadataValue,
    MultiToSingleDimensionPartitionMapping,
    RunRequest,
    asset,
    define_asset_job,
    schedule,
)
from dagster_duckdb import DuckDBResource

from evals.architectures import project_architecture
from evals.benchmarks import Benchmark, benchmark_registry, evaluate
from evals.report import chart, strip_questions, table, write_eval_results
from synthex.core.definition import PipelineDefinition
from synthex_assets.naming import asset_name
from synthex_assets.partitions import BRANCHES
from synthex_resources.sql import eval_results_path

CHECK = "retrieval_thresholds"
EVAL_RESULTS_RESOURCE = "eval_results_duckdb"
log = logging.getLogger(__name__)


class EvalConfig(Config):
    data: str | None = None  # None: the benchmark's default data file
    limit: int | None = None
    k: int = 10
    search_mode: str = "hybrid"  # a search strategy of the registry (`synthex search --help` lists them)
    options: dict[str, str] = {}  # the benchmark's own options (LongMemEval: {"protocol": "any"})
    # metric name ("turn/recall_any@10", "session/ndcg_any@10", ...) -> minimum value
    thresholds: dict[str, float] = {"turn/recall_any@10": 0.5}


def chart_markdown(png: Path, title: str) -> str:
    """The chart inline in the asset's metadata, so the UI shows the image, not a file path."""
    return f"![{title} retrieval](data:image/png;base64,{base64.b64encode(png.read_bytes()).decode('ascii')})"


def eval_asset(pipeline: PipelineDefinition, benchmark_cls: type[Benchmark], blocking: bool, results_db: DuckDBResource):
    """``eval_<benchmark>``: the benchmark scoring the pipeline's search steps on the partition's branch."""
    name = f"eval_{benchmark_cls.name}"
    # Lineage: the eval searches the pipeline's search steps on the same branch.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)  # a stable mapping in practice; "beta" in Dagster 1.13
        by_branch = MultiToSingleDimensionPartitionMapping(partition_dimension_name="branch")
        # ``resource_defs`` on an asset is "beta" too: bound so the asset materializes on its own.
        decorate = asset(
            name=name,
            deps=[AssetDep(asset_name(s), partition_mapping=by_branch) for s in pipeline.search_steps()],
            partitions_def=BRANCHES,
            group_name="evals",
            kinds={"python"},
            description=f"{benchmark_cls.title} retrieval of pipeline `{pipeline.name}` on a branch "
                        "(turn and session level).",
            check_specs=[AssetCheckSpec(CHECK, asset=name, blocking=blocking,
                                        description="Every configured metric is at or above its threshold.")],
            resource_defs={EVAL_RESULTS_RESOURCE: results_db},
        )

    @decorate
    def eval_benchmark(context: AssetExecutionContext, config: EvalConfig,
                       eval_results_duckdb: DuckDBResource) -> MaterializeResult:
        branch = context.partition_key
        benchmark = benchmark_cls(**config.options)
        data = Path(config.data) if config.data else benchmark.default_data()
        work = pipeline.data_dir / "evals" / "work" / benchmark.name
        arch = project_architecture(pipeline.project_dir, branch)
        arch.mode = config.search_mode
        [result] = evaluate(benchmark, data, [arch], work, limit=config.limit, k=config.k, log=context.log.info)
        if eval_results_duckdb.database != ":memory:":
            Path(eval_results_duckdb.database).parent.mkdir(parents=True, exist_ok=True)
        with eval_results_duckdb.get_connection() as con:
            n_rows = write_eval_results(con, context.run.run_id, [result])
        [result] = strip_questions([result], context.run.run_id)
        flat = {f"{level}/{metric}": value for level in ("turn", "session")
                for metric, value in result["metrics"][level].items()}
        failing = {m: (flat.get(m), t) for m, t in config.thresholds.items() if flat.get(m, 0.0) < t}
        png = chart([result], pipeline.data_dir / "evals" / f"{name}-{branch}.png")
        metadata = {k: float(v) for k, v in flat.items() if k.split("/")[1] in
                    ("recall_any@5", "recall_any@10", "recall_all@5", "recall_all@10", "ndcg_any@10", "mrr")}
        metadata |= {"eval_run_id": context.run.run_id, "question_rows": n_rows,
                     "eval_results": MetadataValue.path(eval_results_duckdb.database),
                     "n_questions": result["n_questions"], "wall_s": result["wall_s"],
                     "table": MetadataValue.md(table([result], "turn")),
                     "chart": MetadataValue.md(chart_markdown(png, benchmark_cls.title)),
                     "chart_file": MetadataValue.path(str(png))}
        return MaterializeResult(
            metadata=metadata,
            check_results=[AssetCheckResult(
                check_name=CHECK, passed=not failing, severity=AssetCheckSeverity.ERROR,
                metadata={"failing": MetadataValue.json({m: {"value": v, "threshold": t} for m, (v, t) in failing.items()}),
                          "thresholds": MetadataValue.json(config.thresholds)})],
        )

    return eval_benchmark


def eval_definitions(pipeline: PipelineDefinition, blocking: bool = False,
                     eval_results: DuckDBResource | None = None) -> Definitions:
    """One eval asset per registered benchmark that has default data, a nightly job over them and its schedule.
    ``eval_results``: where the per-question rows go (default: the project's
    ``.synthex/evals/eval_results.duckdb``, the file ``synthex sql`` reads)."""
    results_db = eval_results or DuckDBResource(database=str(eval_results_path(pipeline.data_dir)))
    registry = benchmark_registry()
    for failure in registry.failures:  # reported in the code server's log, never skipped in silence
        log.warning("%s", failure)
    assets = [eval_asset(pipeline, cls, blocking, results_db) for _, cls in registry.items()
              if cls.default_data() is not None]
    if not assets:
        return Definitions()
    job = define_asset_job("nightly_evals", selection=assets, partitions_def=BRANCHES)

    @schedule(job=job, cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.STOPPED)
    def nightly_eval_schedule(context):
        """Re-run the evals on main every night (turn it on in the UI)."""
        return RunRequest(partition_key="main")

    return Definitions(assets=assets, jobs=[job], schedules=[nightly_eval_schedule])
