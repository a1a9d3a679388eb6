"""``pipeline.eval(name, data=...)`` / ``branch.eval(...)``: the evals plugin's evaluators.

The pipeline is scored as defined in this process (main, or a branch with the overrides made on it in
Python), the way ``synthex eval <name>`` scores the project's pipeline (``evals.architectures``): a copy of
the definition with every source reading the benchmark file, in the same per-conversation workspaces under
``<project>/.synthex/evals/work/<benchmark>/project/`` (so the CLI and Python share ingested records), run
on main then on the branch, searched and scored by ``evals.benchmarks.evaluate``. The results are written by
the CLI's writer (``evals.report.record_results``: the JSON of the means and the ``eval_results`` table).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.architectures import Architecture, into_workspace
from evals.result import EvalResult
from synthex.core.errors import BadInputError

if TYPE_CHECKING:
    from synthex.app.pipeline import Pipeline
    from synthex.core.definition import PipelineDefinition
    from synthex.core.plugins import Registry
    from synthex.core.steps import Step


def workspace_definition(definition: PipelineDefinition, data: Path, root: Path, fmt: str) -> PipelineDefinition:
    """A copy of ``definition`` and its ancestors living in workspace ``root``, every source reading ``data``
    (format ``fmt``). The caller's definition, its steps and its open store are left as they are."""
    copies: dict[int, Any] = {}  # a step shared by a branch and its parent stays shared in the copy

    def step_copy(step: Step) -> Step:
        if id(step) not in copies:
            copies[id(step)] = copy.copy(step)  # shallow: read_export replaces the fields it changes
        return copies[id(step)]

    def node_copy(node: PipelineDefinition | None) -> PipelineDefinition | None:
        if node is None:
            return None
        twin = copy.copy(node)
        twin._app = None  # type: ignore[attr-defined] # never close (or use) the caller's store
        twin.parent = node_copy(node.parent)
        twin.steps = {name: step_copy(step) for name, step in node.steps.items()}
        twin.outputs, twin.applied_branches = dict(node.outputs), list(node.applied_branches)
        return twin

    twin = node_copy(definition)
    into_workspace(twin, data, root, fmt)  # type: ignore[arg-type]
    return twin  # type: ignore[return-value]


def definition_architecture(definition: PipelineDefinition) -> Architecture:
    """The architecture ``synthex eval --compare <branch>`` builds from pipeline.py, built from ``definition``
    instead; the same workspace ("project"), so the same records serve both doors."""
    return Architecture(name=definition.branch_name,
                        build=lambda data, root, fmt: workspace_definition(definition, data, root, fmt),
                        mode=definition.search_mode(),  # as the project searches: its search output's mode=
                        branch=definition.branch_name, workspace="project")


def protocol(benchmark: Any, arch: Architecture, k: int) -> dict[str, str]:
    """How each figure group was produced (the benchmark, the search, what counts as gold)."""
    search = (f"{benchmark.title}: each question searched with {arch.mode!r} on branch {arch.branch!r} of the "
              f"pipeline in its conversation's workspace, hits drilled down to their leaves, top {k}")
    return {
        "turn": f"{search} turn ids ({benchmark.turn_id_field}) against the gold turns; mean over the questions "
                "that have gold turns",
        "session": f"{search} turns mapped to their sessions (deduplicated, rank order) against the gold "
                   "sessions; mean over every question",
        "by_category": f"the {benchmark.category_level}-level metrics averaged per question category",
    }


def evaluate_definition(definition: PipelineDefinition, benchmark_name: str, data: str | Path, *, k: int = 10,
                        limit: int | None = None, run_id: str | None = None, qa: bool = False,
                        log: Callable[[str], None] | None = None, **options: str) -> EvalResult:
    """Score ``definition`` on benchmark ``benchmark_name`` and record the result as ``synthex eval`` does."""
    from evals.benchmarks import EMBEDDING_CACHE, benchmark_registry, evaluate
    from evals.report import record_results

    benchmark = benchmark_registry().get(benchmark_name)(**options)  # a bad option: refused before any work
    path = Path(data).expanduser()
    if not path.is_file():
        raise BadInputError(f"{path}: no such benchmark data file")
    if run_id is not None and not run_id.strip():
        raise BadInputError("run_id is empty")
    arch = definition_architecture(definition)
    eval_dir = Path(definition.project_dir).resolve() / ".synthex" / "evals"
    results = evaluate(benchmark, path, [arch], eval_dir / "work" / benchmark.name, limit=limit, k=k,
                       log=log or _stderr, qa=qa, embedding_cache=eval_dir / EMBEDDING_CACHE)
    questions = list(results[0].get("questions", []))
    recorded = record_results(results, eval_dir, run_id.strip() if run_id else None)
    result = dict(results[0], eval_run_id=recorded.eval_run_id)
    return EvalResult.from_result(result, questions, protocol(benchmark, arch, k))


class BenchmarkEvaluator:
    """The ``synthex.core.evaluators.Evaluator`` of one registered benchmark."""

    def __init__(self, benchmark_name: str) -> None:
        self.benchmark_name = benchmark_name

    def __call__(self, definition: Pipeline | PipelineDefinition, data: str | Path, **options: Any) -> EvalResult:
        return evaluate_definition(definition, self.benchmark_name, data, **options)


def register(registry: Registry[Any]) -> None:
    """One evaluator per registered benchmark (the plugin's ``register_evaluators`` hook)."""
    from evals.benchmarks import benchmark_registry

    for name in benchmark_registry().names():
        registry.register(name, BenchmarkEvaluator(name))


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)
