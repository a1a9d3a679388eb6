"""Secrets never stored in error text: the configured API key and key-like tokens are masked.

Error text goes to the runs table, Dagster's event log and compute logs; a provider's error body can
echo the key it was sent.
"""

from __future__ import annotations

import os
import re

# Token shapes of common credentials: OpenAI-style keys, GitHub tokens, AWS access key ids, JWTs, bearer headers.
_KEY_LIKE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}|"
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}|(?<=Bearer )[A-Za-z0-9._\-]{8,})")
SECRET_ENV = ("OPENAI_API_KEY", "SYNTHEX_ENCRYPTION_KEY", "AWS_SECRET_ACCESS_KEY")


def redact(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with the configured secrets (and ``secrets``) and key-like tokens replaced by ``[REDACTED]``."""
    known = [s for s in [*(os.environ.get(v) for v in SECRET_ENV), *(secrets or [])] if s and len(s) >= 6]
    for secret in sorted(known, key=len, reverse=True):
        text = text.replace(secret, "[REDACTED]")
    return _KEY_LIKE.sub("[REDACTED]", text)
