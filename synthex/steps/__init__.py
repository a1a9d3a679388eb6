"""The step kinds of design doc §3.5, one module each."""

from synthex.steps.aggregate import AggregateStep
from synthex.steps.base import (
    AUDIT_KEYS,
    Audit,
    PartitionResult,
    Step,
    StepContext,
    Volume,
    WorkItem,
    execute_partition,
)
from synthex.steps.fold import FoldStep
from synthex.steps.kinds import get_step_kind, step_kinds
from synthex.steps.merge import MergeStep
from synthex.steps.source import SourceStep
from synthex.steps.transform import TransformStep

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
