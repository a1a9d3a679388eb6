"""Synthex: memory architectures that evolve with your agent.

This package is the user API and the step semantics; it never imports dagster. ``Pipeline.run``
and friends import the Dagster layer lazily.
"""

from synthex.errors import PipelineDefinitionError, SourceError, StepError, SynthexError
from synthex.pipeline import Output, Pipeline, Plan
from synthex.record import Record, Run, RunStats

__all__ = [
    "Output",
    "Pipeline",
    "PipelineDefinitionError",
    "Plan",
    "Record",
    "Run",
    "RunStats",
    "SourceError",
    "StepError",
    "SynthexError",
]
__version__ = "0.1.0"
