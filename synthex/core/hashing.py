"""Stable hashes: step versions, content fingerprints, materialization keys and record ids.

Everything here is a pure function of its inputs so that ingest order, process, or machine
never changes an id (deterministic ids + idempotent upsert make re-runs converge).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any


def stable_hash(*parts: Any) -> str:
    """sha256 (hex) of a canonical JSON encoding of ``parts``."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def fingerprint(content: str) -> str:
    """Content fingerprint of one record (used for input fingerprints and merge dedup)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:32]


KEY_SPACE = "main"  # hashed where design doc §3.3 puts the branch; kept so ids from before branching hold


def materialization_key(step: str, step_version: str, input_fingerprints: list[str], group_key: str) -> str:
    """hash(step, step_version_hash, input_fingerprints, group_key): design doc §3.3 without the branch.

    The same definition over the same inputs gives the same record on every branch, so a branch can
    reuse a record any branch already has (a fold re-folds only from the first period whose input
    differs) and promote is a copy, not a recompute. Which branches hold a record is a property of its
    rows (``branch`` column; one row per (id, branch))."""
    return stable_hash("mk/v1", KEY_SPACE, step, step_version, list(input_fingerprints), group_key)


def record_id(key: str) -> str:
    """A record id is a UUID derived from its materialization key, so re-running never duplicates."""
    return str(uuid.UUID(hex=hashlib.sha256(key.encode("ascii")).hexdigest()[:32]))


def input_print(record_id: str, content: str) -> str:
    """An input's identity for a materialization key: its id (exact provenance) and its content."""
    return f"{record_id}:{fingerprint(content)}"
