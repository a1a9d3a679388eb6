"""Every hook a Synthex plugin may define: its name, its signature and what it must do. The one list.

A plugin is a module named by an entry point in the ``synthex.plugins`` group (``synthex.core.plugins``
finds them, ``discover``); it defines any of the functions below, under the same name and with the same
parameters. Built-in extensions are registered through the same hooks, by built-in modules each registry
names (as simonw/llm registers its default plugins through the hooks of its ``hookspecs.py``).

Invariants every registry keeps (``synthex.core.plugins.populate``):
- built-in modules run first, in the order their registry names them, then installed plugins by entry-point
  name; a module that is both (the evals plugin in a source tree) runs once;
- a ``register_*`` hook adds items with ``registry.register(name, item)``; a taken name is an error, one line
  naming both registrants (one plugin cannot replace another's item, nor a built-in's);
- a module that several entry points name is one plugin: its hooks run once;
- an installed plugin that fails to import, whose hook raises, or that defines a ``register_*`` function
  that is no hook here (a misspelt hook) is reported as one ``PluginFailure`` line, never skipped in
  silence; the others still load. A built-in's failure is a bug and raises.

Types that live above the core (search strategies, benchmarks, click, Dagster) are named in the
docstrings, not imported: the core imports neither.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# This module imports nothing of Synthex: the registries' modules import it (through synthex.core.plugins),
# so the items' types are named in each hook's docstring, not in its signature.


class Registers(Protocol):
    """What a ``register_*`` hook is given: a ``synthex.core.plugins.Registry`` of one kind of item."""

    def register(self, name: str, item: Any) -> Any: ...


@dataclass(frozen=True)
class HookSpec:
    """One hook: ``spec`` is a function of the hook's name, parameters and docstring (never called)."""

    spec: Callable[..., Any]

    @property
    def name(self) -> str:
        return self.spec.__name__

    @property
    def signature(self) -> str:
        return f"{self.name}{inspect.signature(self.spec)}"

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.spec) or ""

    def __str__(self) -> str:
        return self.name


def hookspec(spec: Callable[..., Any]) -> HookSpec:
    return HookSpec(spec)


@hookspec
def register_step_kinds(registry: Registers) -> None:
    """Step kinds (``pipeline.step(kind, ...)``): ``registry.register(StepClass.kind, StepClass)``, a subclass
    of ``synthex.core.steps.base.Step``. Built-ins: source, transform, aggregate, fold, merge (and the
    restore step of a migration)."""


@hookspec
def register_source_kinds(registry: Registers) -> None:
    """Source kinds (what ``pipeline.source(name, ...)`` reads): ``registry.register(kind.name, kind)``, a
    ``synthex.core.sources.kinds.SourceKind``. Built-ins: file, folder, table, stream, api."""


@hookspec
def register_formats(registry: Registers) -> None:
    """File formats (``pipeline.source(name, file=..., format=NAME)``): ``registry.register(NAME, parse)``,
    ``parse(path, intake) -> list[SourceItem]``; ``intake`` (``synthex.core.importers.base.Intake``) holds the
    read's bounds and collects its warnings. Built-ins: chatgpt-export, claude-export, folder, jsonl and the
    migration formats; the evals plugin adds locomo-turns and longmemeval-turns-{official,any}."""


@hookspec
def register_key_functions(registry: Registers) -> None:
    """Named key functions of key aggregates (``pipeline.aggregate(..., by=NAME)``):
    ``registry.register(NAME, fn)``, ``fn(record) -> str | Iterable[str] | None``. Built-ins: speaker,
    conversation, session, entity, topic."""


@hookspec
def register_fold_states(registry: Registers) -> None:
    """How a fold keeps its state bounded (``pipeline.fold(..., state=KIND)``):
    ``registry.register(Bound.kind, Bound)``, a subclass of ``synthex.core.steps.fold_state.StateBound``.
    Built-ins: truncate, compress, window."""


@hookspec
def register_search_strategies(registry: Registers) -> None:
    """Search modes (``--mode NAME``, ``mode=`` of a search output, MCP, ``SearchResource``):
    ``registry.register(strategy.name, strategy)``, an instance of
    ``synthex_resources.search.strategies.base.SearchStrategy`` registered under its own name. Built-ins:
    synthex_resources/search/strategies/builtin.py."""


@hookspec
def register_embedder_kinds(registry: Registers) -> None:
    """Embedders (``SYNTHEX_EMBEDDER=NAME``, ``EmbedderConfig(kind=NAME)``, ``RecordStoreResource(embedder_kind=NAME)``):
    ``registry.register(NAME, factory)``, ``factory(config) -> Embedder`` (``synthex_resources.embedder``:
    ``name``, ``dim``, ``embed(texts)``, optionally ``query_prefix``). Built-ins: minilm-onnx (the default),
    bge-small-onnx, openai."""


@hookspec
def register_benchmarks(registry: Registers) -> None:
    """Benchmarks (``synthex eval NAME``, ``pipeline.eval(NAME)``): ``registry.register(Class.name, Class)``,
    a subclass of ``evals.benchmarks.Benchmark``. Built-ins (the evals plugin): locomo, longmemeval."""


@hookspec
def register_evaluators(registry: Registers) -> None:
    """What ``pipeline.eval(NAME, data=...)`` calls: ``registry.register(NAME, evaluator)``, a
    ``synthex.core.evaluators.Evaluator``. The evals plugin registers one per registered benchmark."""


@hookspec
def register_commands(cli: Any) -> None:
    """Commands of the ``synthex`` CLI: ``cli.add_command(command)``; ``cli`` is the ``click.Group`` of
    ``synthex.surfaces.cli``. The evals plugin adds ``synthex eval``. Import heavy modules inside the
    command, not here: the hook runs whenever the command list is read (``synthex --help``)."""


@hookspec
def definitions(pipeline: Any) -> Any:
    """Dagster definitions merged into the project's code location: a ``dagster.Definitions`` (assets,
    checks, jobs, schedules) or None for none. Called once per code-location load with the project's
    pipeline (a ``synthex.core.definition.PipelineDefinition``); the evals plugin adds the eval assets a project declares."""


HOOKS: tuple[HookSpec, ...] = (register_step_kinds, register_source_kinds, register_formats, register_key_functions,
                               register_fold_states, register_search_strategies, register_embedder_kinds,
                               register_benchmarks, register_evaluators, register_commands, definitions)
HOOK_NAMES = frozenset(hook.name for hook in HOOKS)
