"""Plugins and registries: how step kinds, source kinds, file formats, search strategies, benchmarks, CLI
commands and Dagster definitions are added without the core importing them.

A plugin is a module named by an entry point in the ``synthex.plugins`` group (evals is one:
``evals = "evals.plugin"`` in pyproject.toml). The hooks it may define, with their signatures and
contracts, are listed in one module, ``synthex.core.hookspecs``; this module finds the plugins, once per
call of ``discover``, and is the only code that reads the entry points or calls a hook:

- ``discover(builtins)``: the built-in modules, then every installed plugin (``Plugins``);
- ``Plugins.call(hook, *args)``: the hook of each plugin that defines it, failures kept;
- ``populate(registry, hook, builtins)``: a ``Registry`` filled through a ``register_*`` hook.

Built-ins are registered the same way (as simonw/llm loads its default plugins through the hooks its
plugins use): each registry names its built-in modules, which define the same hook, and they are loaded
before the installed plugins. A plugin that fails to import or whose hook raises is reported, one line
each (``PluginFailure``), never skipped in silence; the CLI prints them as warnings.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

from synthex.core.errors import PipelineDefinitionError
from synthex.core.hookspecs import HOOK_NAMES, HookSpec

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

    @property
    def label(self) -> str:
        """How a registry names it as a registrant."""
        return f"built-in {self.name}" if self.builtin else f"plugin {self.name!r} ({self.module.__name__})"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


@dataclass(frozen=True)
class Plugins:
    """The plugin modules one discovery found, in call order, and the installed plugins that failed to load
    (an import error, a misspelt hook)."""

    loaded: tuple[LoadedPlugin, ...]
    failures: tuple[PluginFailure, ...]

    def call(self, hook: HookSpec, *args: Any) -> tuple[list[Any], list[PluginFailure]]:
        """``hook(*args)`` of every plugin that defines it, in order: the results and the failures (this
        discovery's, then each installed plugin's hook that raised; a built-in's raises)."""
        results: list[Any] = []
        failures = list(self.failures)
        for plugin in self.loaded:
            fn = getattr(plugin.module, hook.name, None)
            if not callable(fn):
                continue
            with ExitStack() as registering:  # what it registers is said to be its, should a name be taken
                for arg in args:
                    if isinstance(arg, Registry):
                        registering.enter_context(arg.registering_as(plugin.label))
                if plugin.builtin:
                    results.append(fn(*args))
                    continue
                try:
                    results.append(fn(*args))
                except Exception as exc:  # the plugin's own bug: its part is left out, the others load
                    failures.append(PluginFailure(plugin.name, plugin.module.__name__,
                                                  f"{hook.name}: {_describe(exc)}"))
        return results, failures


def _misspelt_hooks(plugin: LoadedPlugin) -> PluginFailure | None:
    """A ``register_*`` function of an installed plugin that is no hook (a typo would otherwise register
    nothing, in silence)."""
    unknown = sorted(name for name, value in vars(plugin.module).items()
                     if name.startswith("register_") and callable(value) and name not in HOOK_NAMES)
    if not unknown:
        return None
    return PluginFailure(plugin.name, plugin.module.__name__,
                         f"{', '.join(unknown)}: no such hook; hooks: {', '.join(sorted(HOOK_NAMES))}")


def discover(builtins: tuple[str, ...] = ()) -> Plugins:
    """The built-in modules ``builtins`` (in that order), then every installed plugin (by entry-point name)
    that is not one of them. An import failure of an installed plugin is reported, not raised; a built-in's
    is a bug and raises."""
    found = [LoadedPlugin(name, importlib.import_module(name), True) for name in builtins]
    failures = []
    seen: set[str] = set()
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        module_name = entry.value.split(":")[0]
        if module_name in builtins or module_name in seen:  # a built-in too (a source tree), or a module two
            continue  # entry points name: loaded, and its hooks called, once
        seen.add(module_name)
        try:
            plugin = LoadedPlugin(entry.name, importlib.import_module(module_name), False)
        except Exception as exc:  # a plugin's own import error (a missing extra, a syntax error)
            failures.append(PluginFailure(entry.name, module_name, _describe(exc)))
            continue
        found.append(plugin)
        if (misspelt := _misspelt_hooks(plugin)) is not None:
            failures.append(misspelt)
    return Plugins(tuple(found), tuple(failures))


class Registry(Generic[T]):
    """Named extensions of one kind (step kinds, search strategies, ...). Names are unique: registering a
    taken name is an error, one line naming both registrants (no registrant silently replaces another's
    item). Lookups of an unknown name are one line listing the known ones."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._registrants: dict[str, str] = {}
        self._registering: str | None = None  # the plugin whose hook is running (``Plugins.call``)
        self.failures: list[PluginFailure] = []

    @contextmanager
    def registering_as(self, registrant: str) -> Iterator[None]:
        """While it runs, what is registered is ``registrant``'s (a plugin's hook, a pipeline file's load)."""
        previous, self._registering = self._registering, registrant
        try:
            yield
        finally:
            self._registering = previous

    def register(self, name: str, item: T, *, by: str | None = None) -> T:
        """Add ``item`` as ``name``; ``by`` names the registrant when no hook or load is running."""
        if not isinstance(name, str) or not name.strip():
            raise PipelineDefinitionError(f"{self.kind}: a name must be a non-empty string (got {name!r})")
        registrant = self._registering or by or "a direct call"
        if name in self._items:
            raise PipelineDefinitionError(f"{self.kind} {name!r} is registered already (by {self._registrants[name]}); "
                                          f"{registrant} registers it again")
        self._items[name] = item
        self._registrants[name] = registrant
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


def populate(registry: Registry[T], hook: HookSpec, builtins: tuple[str, ...]) -> Registry[T]:
    """Fill ``registry`` through ``hook`` of the built-in modules, then of every installed plugin that
    defines it. Failures (import or hook) are kept on ``registry.failures``."""
    _, registry.failures = discover(builtins).call(hook, registry)
    return registry
