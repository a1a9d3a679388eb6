"""Synthex: memory architectures that evolve with your agent.

``from synthex import Pipeline`` is the user API (the application layer's pipeline, with run /
search attached). Names load on first use, so importing one core module (``synthex.record``,
``synthex.steps``) never drags the application layer, LanceDB or Dagster in.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Pipeline": "synthex.app.pipeline",
    "ProjectApp": "synthex.app.facade",
    "PipelineDefinition": "synthex.definition",
    "Output": "synthex.definition",
    "Plan": "synthex.definition",
    "Record": "synthex.record",
    "Run": "synthex.record",
    "RunStats": "synthex.record",
    "PipelineDefinitionError": "synthex.errors",
    "SourceError": "synthex.errors",
    "StepError": "synthex.errors",
    "BadInputError": "synthex.errors",
    "SynthexError": "synthex.errors",
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synthex' has no attribute {name!r}")
