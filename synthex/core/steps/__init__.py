"""The step kinds of design doc §3.5, one module each."""

from synthex.core.steps.aggregate import AggregateStep
from synthex.core.steps.base import (
    AUDIT_KEYS,
    Audit,
    PartitionResult,
    Step,
    StepContext,
    Volume,
    WorkItem,
    execute_partition,
)
from synthex.core.steps.fold import FoldStep
from synthex.core.steps.kinds import get_step_kind, step_kinds
from synthex.core.steps.merge import MergeStep
from synthex.core.steps.source import SourceStep
from synthex.core.steps.transform import TransformStep

__all__ = [
    "AUDIT_KEYS",
    "AggregateStep",
    "Audit",
    "FoldStep",
    "MergeStep",
    "PartitionResult",
    "SourceStep",
    "Step",
    "StepContext",
    "TransformStep",
    "Volume",
    "WorkItem",
    "execute_partition",
    "get_step_kind",
    "step_kinds",
]
