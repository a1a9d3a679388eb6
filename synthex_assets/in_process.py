"""A run's step partitions executed here, by the step executors a Dagster run's ops call, with no Dagster run.

For many small throwaway memories (an eval's workspaces: one per LongMemEval question), where a Dagster
run's set-up was most of the cost besides the model: a new instance per workspace (its SQLite run and event
storages created: ~5 s under load), the run's creation, its event log and the per-partition materialization
metadata (docs/benchmarks.md, "LongMemEval on the real files"). Every door that a user sees (``synthex run``,
the UI, sensors, MCP) still launches a Dagster run; this path is chosen by name (``RunEngine.IN_PROCESS``).

Same records by construction: each selected step, in the pipeline's order (a Dagster run's op order is a
topological order of the same graph: a step's op starts after its inputs' ops), is the op's own body, a
``StepExecutor`` over the step's dirty partitions, judged by the same deletion guard, and its checks are the
ones the op reports. The op is given every partition of the run's range (``period_range``: the range can hold
periods no step of this plan needed, "a cheap no-op"); here each step gets the partitions the plan names for
it, which are the partitions the op changes. ``tests/test_in_process_runs.py`` checks that the two leave the
same records. No Dagster instance is opened.
"""

from __future__ import annotations

from collections.abc import Mapping

from synthex.core.definition import PipelineDefinition
from synthex.core.deletions import DeletionConsent
from synthex.core.errors import SynthexError
from synthex.core.progress import ProgressReporter
from synthex.core.record import CheckOutcome
from synthex_assets.checks import step_checks
from synthex_assets.executor import StepExecutor
from synthex_assets.naming import DagsterNames
from synthex_assets.partitions import invalid_periods
from synthex_resources.llm import LLMConfig
from synthex_resources.record_store import RecordStore
from synthex_resources.source_sync import enforce_for_step
from synthex_resources.store.fragment_append import IngestWorkers


def execute_in_process(pipeline: PipelineDefinition, store: RecordStore, llm: LLMConfig,
                       reporter: ProgressReporter, *, run_id: str, branch: str,
                       partitions: Mapping[str, list[str]], full: bool = False,
                       deletions: DeletionConsent | None = None, workers: int = 1) -> list[CheckOutcome]:
    """Run the steps in ``partitions`` (step -> dirty periods on ``branch``) here, in the pipeline's order;
    the outcome of every check the steps carry, as ``launch_pipeline_run`` returns them. A step that fails
    raises its one-line ``SynthexError`` (what a Dagster run's ``_raise_user_error`` raises) and the steps
    after it do not run (a Dagster run skips the steps downstream of a failed one)."""
    outcomes: list[CheckOutcome] = []
    names = DagsterNames.of(pipeline)
    for name in pipeline.order():
        periods = partitions.get(name)
        if not periods:
            continue
        step = pipeline.steps[name]
        keys = [(branch, period) for period in periods]
        invented = invalid_periods(keys)
        if invented:
            raise SynthexError(f"step {name!r}: {', '.join(invented[:3])}: not a period")
        executor = StepExecutor(pipeline, step, store, llm, reporter, run_id=run_id, full=full,
                                workers=IngestWorkers(workers))
        try:
            enforce_for_step(pipeline, store, name, [branch], deletions)
            result = executor.run(keys)
        except SynthexError:
            raise
        except Exception as exc:  # storage, the embedder: one line naming the step, as the op's Failure says
            raise SynthexError(f"step {name!r}: {type(exc).__name__}: {exc}") from exc
        carried = step_checks(pipeline, step)
        outcomes += [CheckOutcome(o.check, o.passed, o.detail, asset=names.asset_key(name).to_user_string())
                     for o in result.checks.values() if o.check in carried]
    return outcomes
