"""Retrying Lance commits that lost a race with another writer.

Runs on different branches write one ``records`` table at the same time (the branch lock is per
branch), and Lance resolves most concurrent commits itself, but not all: a compaction (``optimize``)
preempted by a concurrent update or delete, or two deletes touching one fragment, fail with
"Retryable commit conflict ... Please retry." Every write the store makes is idempotent (upserts by
id, deletes by id, index builds), so retrying it against the new latest version is safe.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

ATTEMPTS = 10
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 2.0


def is_commit_conflict(error: BaseException) -> bool:
    """Lance reports a lost commit race as an OSError/RuntimeError whose text says so."""
    text = str(error).lower()
    return "commit conflict" in text or "please retry" in text


def with_commit_retry(write: Callable[[], T], attempts: int = ATTEMPTS,
                      sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``write``; on a commit conflict, wait (exponential backoff with jitter, so two writers do
    not collide again in lockstep) and run it again, up to ``attempts`` times in all."""
    delay = FIRST_DELAY_S
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except (OSError, RuntimeError, ValueError) as error:
            if attempt == attempts or not is_commit_conflict(error):
                raise
            sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, MAX_DELAY_S)
    raise AssertionError("unreachable")
