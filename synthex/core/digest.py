"""A deterministic, LLM-free digest of a group of records: what a key aggregate (``pipeline.aggregate(by=...)``)
says about its members when no model writes it (issue 22: hierarchical retrieval over LLM-free aggregates).

``key_digest(key, texts)`` is the key, then the members' content words, most frequent first (stopwords,
numbers and one- or two-letter words left out; ties by first use, so the digest is the same whatever
the order of equal counts). Short on purpose (``MAX_WORDS``): the embedder reads its first 256 tokens
and BM25 normalizes by length, so a digest of a speaker's thousand turns must stay a profile, not a
transcript. Pure function, standard library only (core layer).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from synthex.core.enrich.words import STOPWORDS

MAX_WORDS = 48
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")


def digest_words(texts: Iterable[str], limit: int = MAX_WORDS) -> list[str]:
    """The content words of ``texts``, most frequent first (ties: first used first), at most ``limit``."""
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    for text in texts:
        for word in _WORD.findall(text.lower()):
            if len(word) < 3 or word in STOPWORDS:
                continue
            counts[word] += 1
            first.setdefault(word, len(first))
    return sorted(counts, key=lambda w: (-counts[w], first[w]))[:limit]


def key_digest(key: str, texts: Iterable[str], limit: int = MAX_WORDS) -> str:
    """``"<key>: word word ..."``: the group's key, then its members' most frequent content words."""
    return f"{key}: {' '.join(digest_words(texts, limit))}"


def key_profile(records: list[Any], group: object) -> str:
    """``fn=`` of a key aggregate (``pipeline.aggregate(..., by=..., fn=key_profile)``): ``key_digest`` of
    the group's members, no model. ``group`` is the aggregate's key group (``str(group)`` is the key)."""
    return key_digest(str(group), (r.content for r in records))
