"""PII detection and redaction for record text: a pure library (no storage, no Dagster).

``scan(text)`` returns typed, non-overlapping findings; ``redact(text)`` replaces them with stable typed
placeholders (``[EMAIL_1]``). Detectors are patterns plus checksums (Luhn, IBAN mod 97, SSN ranges) and,
for phones, libphonenumber's numbering plans when installed. Names are not detected: see
``evals/bench/pii.py`` for the measurement behind that.
"""

from __future__ import annotations

from synthex.core.pii.findings import PII_TYPES, Finding
from synthex.core.pii.redaction import Redaction, redact
from synthex.core.pii.scanner import scan

# What a pipeline step may do with PII: replace it, record findings in metadata, or only mark the record.
PII_MODES: tuple[str, ...] = ("redact", "detect", "flag")

__all__ = ["PII_MODES", "PII_TYPES", "Finding", "Redaction", "redact", "scan"]
