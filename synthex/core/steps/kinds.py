"""Step kinds by name: what ``pipeline.step(kind, name, ...)`` and a TOML file's ``kind = "..."`` build.

A kind is a ``Step`` subclass; everything the planner, the executor and the Dagster asset need is a
method or attribute of it (``synthex.core.steps.base``), so a kind registered here runs with no other file
changed. The built-ins are registered by ``synthex.core.steps.builtin`` through the hook every plugin may
define, ``register_step_kinds(registry)`` (the ``synthex.plugins`` entry-point group,
``synthex.core.plugins``).
"""

from __future__ import annotations

import functools

from synthex.core import hookspecs
from synthex.core.plugins import Registry, populate
from synthex.core.steps.base import Step

BUILTIN_MODULES = ("synthex.core.steps.builtin", "synthex.core.importers.migrate.restore")


@functools.cache
def step_kinds() -> Registry[type[Step]]:
    """The step kinds: the built-ins, then every installed plugin's. Loaded once per process: a read-only
    catalogue (installed plugins do not change while a process runs)."""
    return populate(Registry[type[Step]]("step kind"), hookspecs.register_step_kinds, builtins=BUILTIN_MODULES)


def get_step_kind(name: str) -> type[Step]:
    """The kind registered as ``name``; an unknown one is one line naming the known kinds and any plugin
    that failed to load."""
    return step_kinds().get(name)
