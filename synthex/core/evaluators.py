"""Evaluators: how ``pipeline.eval("locomo", data=...)`` reaches a benchmark without the core or the
application importing the evals package (which sits above them).

An evaluator scores one pipeline definition (main or a branch, as defined in this process) on one
benchmark and returns a result object of the plugin's own (the evals plugin's ``EvalResult``). Plugins
register evaluators by benchmark name through the ``register_evaluators(registry)`` hook
(``synthex.core.plugins``); the evals plugin registers one per registered benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from synthex.core import hookspecs
from synthex.core.errors import SynthexError
from synthex.core.plugins import Registry, populate

if TYPE_CHECKING:
    from synthex.core.definition import PipelineDefinition

HOOK = hookspecs.register_evaluators


class Evaluator(Protocol):
    """Scores ``definition`` (its branch, with the steps it has in this process) on a benchmark's ``data``;
    ``options``: the benchmark's own (k, limit, run_id, ... as the plugin documents them)."""

    def __call__(self, definition: PipelineDefinition, data: str | Path, **options: Any) -> Any: ...


def evaluator_registry() -> Registry[Evaluator]:
    """Every evaluator the installed plugins register, by benchmark name (built fresh per call)."""
    return populate(Registry("benchmark"), HOOK, builtins=())


def get_evaluator(name: str) -> Evaluator:
    """The evaluator of benchmark ``name``; none installed or an unknown name: one line naming the known."""
    registry = evaluator_registry()
    if not len(registry):
        failed = "".join(f"; {f}" for f in registry.failures)
        raise SynthexError(f"cannot evaluate on {name!r}: no benchmark is installed (the evals plugin registers "
                           f"them through the {HOOK.name!r} hook of a 'synthex.plugins' entry point){failed}")
    return registry.get(name)
