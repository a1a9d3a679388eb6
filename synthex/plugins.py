"""Plugins: packages that add CLI commands and Dagster definitions without the core importing them.

A plugin is a module named by an entry point in the ``synthex.plugins`` group (evals is one:
``evals = "evals.plugin"`` in pyproject.toml). It may define either hook:

- ``register_commands(cli: click.Group) -> None``: add commands to the ``synthex`` CLI;
- ``definitions(pipeline: PipelineDefinition) -> dagster.Definitions | None``: assets, checks, jobs
  and schedules merged into the project's code location.

Modules are found by name at run time, so no layer below a plugin ever imports it.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from types import ModuleType

GROUP = "synthex.plugins"


def load_plugins() -> list[ModuleType]:
    """Every installed plugin module whose own imports succeed (a missing optional extra skips it)."""
    found = []
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            found.append(importlib.import_module(entry.value.split(":")[0]))
        except ImportError:
            continue  # the plugin's extra is not installed
    return found
