"""The built-in step kinds, registered through the hook a plugin defines (``register_step_kinds``)."""

from __future__ import annotations

from synthex.plugins import Registry
from synthex.steps.aggregate import AggregateStep
from synthex.steps.base import Step
from synthex.steps.fold import FoldStep
from synthex.steps.merge import MergeStep
from synthex.steps.source import SourceStep
from synthex.steps.transform import TransformStep


def register_step_kinds(registry: Registry[type[Step]]) -> None:
    for step_class in (SourceStep, TransformStep, AggregateStep, FoldStep, MergeStep):
        registry.register(step_class.kind, step_class)
