"""Plugins and registries: how step kinds, source kinds, search strategies, benchmarks, CLI commands and
Dagster definitions are added without the core importing them.

A plugin is a module named by an entry point in the ``synthex.plugins`` group (evals is one:
``evals = "evals.plugin"`` in pyproject.toml). It may define any of these hooks:

- ``register_step_kinds(registry)``, ``register_source_kinds(registry)``,
  ``register_search_strategies(registry)``, ``register_benchmarks(registry)``: add to that registry
  (``registry.register(name, thing)``);
- ``register_commands(cli: click.Group) -> None``: add commands to the ``synthex`` CLI;
- ``definitions(pipeline: PipelineDefinition) -> dagster.Definitions | None``: assets, checks, jobs
  and schedules merged into the project's code location.

Built-ins are registered the same way (as simonw/llm loads its default plugins through the hooks its
plugins use): each registry names its built-in modules, which define the same hook, and they are loaded
before the installed plugins. A plugin that fails to import or whose hook raises is reported, one line
each (``PluginFailure``), never skipped in silence; the CLI prints them as warnings.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Generic, TypeVar

from synthex.core.errors import PipelineDefinitionError

GROUP = "synthex.plugins"
T = TypeVar("T")


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded or whose hook raised."""

    plugin: str
    module: str
    error: str

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} ({self.module}) failed to load: {self.error}"


@dataclass(frozen=True)
class LoadedPlugin:
    name: str
    module: ModuleType
    builtin: bool


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def discover(builtins: tuple[str, ...] = ()) -> tuple[list[LoadedPlugin], list[PluginFailure]]:
    """The built-in modules ``builtins`` (in that order), then every installed plugin (by entry-point name).
    An import failure of an installed plugin is reported, not raised; a built-in's is a bug and raises."""
    found = [LoadedPlugin(name, importlib.import_module(name), True) for name in builtins]
    failures = []
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        module_name = entry.value.split(":")[0]
        try:
            found.append(LoadedPlugin(entry.name, importlib.import_module(module_name), False))
        except Exception as exc:  # a plugin's own import error (a missing extra, a syntax error)
            failures.append(PluginFailure(entry.name, module_name, _describe(exc)))
    return found, failures


class Registry(Generic[T]):
    """Named extensions of one kind (step kinds, search strategies, ...). Names are unique: registering a
    taken name is an error unless ``replace=True``. Lookups of an unknown name are one line listing the
    known ones."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self.failures: list[PluginFailure] = []

    def register(self, name: str, item: T, *, replace: bool = False) -> T:
        if not isinstance(name, str) or not name.strip():
            raise PipelineDefinitionError(f"{self.kind}: a name must be a non-empty string (got {name!r})")
        if name in self._items and not replace:
            raise PipelineDefinitionError(f"{self.kind} {name!r} is registered already")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        """The item registered as ``name``; an unknown name is one line naming the known ones and every
        plugin that failed to load (the one that would have registered it may be among them)."""
        try:
            return self._items[name]
        except KeyError:
            failed = "".join(f"; {f}" for f in self.failures)
            raise PipelineDefinitionError(
                f"unknown {self.kind} {name!r}; expected one of {', '.join(self._items) or 'none'}{failed}") from None

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def populate(registry: Registry[T], hook: str, builtins: tuple[str, ...]) -> Registry[T]:
    """Fill ``registry`` through ``hook`` of the built-in modules, then of every installed plugin that
    defines it. Failures (import or hook) are kept on ``registry.failures``."""
    plugins, failures = discover(builtins)
    for plugin in plugins:
        fn = getattr(plugin.module, hook, None)
        if not callable(fn):
            continue
        if plugin.builtin:
            fn(registry)
            continue
        try:
            fn(registry)
        except Exception as exc:
            failures.append(PluginFailure(plugin.name, plugin.module.__name__, f"{hook}: {_describe(exc)}"))
    registry.failures = failures
    return registry
