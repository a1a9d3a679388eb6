"""``pii=`` on a step: what the step does with personal data (design doc Part XI, "PII Detection").

- ``redact``: the inputs are redacted before the prompt function (and so the model) sees them, and the
  output before it is written: typed placeholders (``[EMAIL_1]``) numbered per record, in the content,
  the raw model response and the record's metadata text (a chat title can hold an email);
- ``detect``: content unchanged; ``metadata.pii`` lists the findings (type and offsets, never values);
- ``flag``: content unchanged; ``metadata.pii.flagged`` says whether the record holds any.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from synthex.core.errors import PipelineDefinitionError
from synthex.core.pii import PII_MODES, redact, scan
from synthex.core.record import Record

# Part of the version hash of a step with ``pii=``: a better detector re-runs such steps.
PII_VERSION = "pii/v1"


def check_pii_mode(step: str, mode: str | None) -> None:
    if mode is not None and mode not in PII_MODES:
        raise PipelineDefinitionError(f"step {step!r}: pii={mode!r}; expected one of {', '.join(PII_MODES)}")


def redact_text(text: str) -> str:
    return redact(text).text


def redact_value(value: Any) -> Any:
    """Strings anywhere in a JSON-like value, redacted (metadata)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    return value


def redacted_input(record: Record) -> Record:
    """What a ``redact`` step's prompt function sees of an input record."""
    return replace(record, content=redact_text(record.content), metadata=redact_value(record.metadata))


def apply_pii(record: Record, mode: str) -> Record:
    """The record as a step with ``pii=mode`` writes it."""
    if mode == "redact":
        result = redact(record.content)
        audit = dict(record.audit)
        if audit.get("raw_response"):
            audit["raw_response"] = redact_text(audit["raw_response"])
        metadata = redact_value(record.metadata)
        metadata["pii"] = {"mode": mode, "redacted": dict(sorted(result.counts.items()))}
        return replace(record, content=result.text, metadata=metadata, audit=audit)
    findings = scan(record.content)
    types = dict(sorted(Counter(f.type for f in findings).items()))
    metadata = dict(record.metadata)
    if mode == "detect":
        metadata["pii"] = {"mode": mode, "types": types,
                           "findings": [[f.type, f.start, f.end] for f in findings]}
    else:
        metadata["pii"] = {"mode": mode, "flagged": bool(findings), "types": types}
    return replace(record, metadata=metadata)
