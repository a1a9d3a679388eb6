"""The built-in step kinds, registered through the hook a plugin defines (``register_step_kinds``)."""

from __future__ import annotations

from synthex.core.plugins import Registry
from synthex.core.steps.aggregate import AggregateStep
from synthex.core.steps.base import Step
from synthex.core.steps.fold import FoldStep
from synthex.core.steps.merge import MergeStep
from synthex.core.steps.source import SourceStep
from synthex.core.steps.transform import TransformStep


def register_step_kinds(registry: Registry[type[Step]]) -> None:
    for step_class in (SourceStep, TransformStep, AggregateStep, FoldStep, MergeStep):
        registry.register(step_class.kind, step_class)
