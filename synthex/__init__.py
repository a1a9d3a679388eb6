"""Synthex: memory architectures that evolve with your agent.

``from synthex import Pipeline`` is the user API (the application layer's pipeline, with run /
search attached). Names load on first use, so importing one core module (``synthex.core.record``,
``synthex.core.steps``) never drags the application layer, LanceDB or Dagster in.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Pipeline": "synthex.app.pipeline",
    "ProjectApp": "synthex.app.facade",
    "PipelineDefinition": "synthex.core.definition",
    "Output": "synthex.core.definition",
    "Plan": "synthex.core.definition",
    "Limits": "synthex.core.limits",
    "TruncateState": "synthex.core.steps.fold_state",
    "CompressState": "synthex.core.steps.fold_state",
    "WindowState": "synthex.core.steps.fold_state",
    "Record": "synthex.core.record",
    "Run": "synthex.core.record",
    "RunStats": "synthex.core.record",
    "PipelineDefinitionError": "synthex.core.errors",
    "SourceError": "synthex.core.errors",
    "StepError": "synthex.core.errors",
    "BadInputError": "synthex.core.errors",
    "SynthexError": "synthex.core.errors",
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synthex' has no attribute {name!r}")
