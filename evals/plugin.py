"""The evals plugin: adds `synthex eval ...` to the CLI, the built-in benchmarks to the benchmark registry,
their data files' formats to the format registry and the eval assets to the code location (hooks:
``synthex.core.hookspecs``).

Registered as an entry point (``[project.entry-points."synthex.plugins"]`` in pyproject.toml); the
core finds it by name, never imports it. Kept light: heavy modules load inside the hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click
    from dagster import Definitions

    from evals.benchmarks import Benchmark
    from synthex.core.definition import PipelineDefinition
    from synthex.core.plugins import Registry


def register_formats(registry: Registry) -> None:
    """The benchmarks' data files as sources (``evals.formats.benchmark_formats``: ``locomo-turns``,
    ``longmemeval-turns-<protocol>``).

    Registered unversioned, so their records' ids are what they always were (a version would be part of every
    record id, and the hierarchical architectures' aggregates order their turns by id: every eval figure would
    move). What an edit of a parser changes is caught by ``evals.formats.benchmark_parser_versions``: an eval
    workspace made by another version is rebuilt cold (evals/architectures.py ``IngestMarker``)."""
    from evals.formats import benchmark_formats

    for name, (parse, _module) in benchmark_formats().items():
        registry.register(name, parse)


def register_commands(cli: click.Group) -> None:
    from evals.commands import eval_group

    cli.add_command(eval_group)


def register_benchmarks(registry: Registry[type[Benchmark]]) -> None:
    """The built-in benchmarks, registered through the hook every benchmark plugin defines."""
    from evals.benchmarks.locomo.benchmark import LoCoMo
    from evals.benchmarks.longmemeval.benchmark import LongMemEval

    registry.register(LoCoMo.name, LoCoMo)
    registry.register(LongMemEval.name, LongMemEval)


def register_evaluators(registry: Registry) -> None:
    """``pipeline.eval(<benchmark>, data=...)``: one evaluator per registered benchmark (``evals.pipeline_eval``)."""
    from evals.pipeline_eval import register

    register(registry)


def definitions(pipeline: PipelineDefinition) -> Definitions | None:
    """The eval assets, jobs and schedules the project declares (``pipeline.eval_asset``); none: nothing."""
    if not pipeline.evals:  # opt-in: a project that asks for no eval gets no eval definitions
        return None
    try:
        import matplotlib  # noqa: F401 - the eval charts need it: part of the `dev` extra
    except ImportError as exc:  # asked for but not installable here: reported by the code location
        raise ImportError("the eval assets need matplotlib (pip install 'synthex[dev]')") from exc
    from evals.dagster_evals import eval_definitions

    return eval_definitions(pipeline)
