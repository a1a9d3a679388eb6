"""LanceDB's BM25, reproduced bit for bit: the scoring core of the lexical legs computed in Python
(search/indexes/postings.py for plaintext stores, search/indexes/memory_lexical.py for encrypted ones).

LanceDB scores in float32: ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))``, ``norm = k1 * (1 - b + b * len / avgdl)``
with ``avgdl = total tokens / N``, a term's part ``idf * ((k1 + 1) * tf / (tf + norm))``, and a document's score
the sum of its query terms' parts in query order (a repeated query term counts again); k1 = 1.2, b = 0.75.
The same float32 operations in the same order give the same floats: checked on 20,000 (question, turn) scores
of LoCoMo dev7 (tests/test_stem.py checks a small store). A float64 sum was 1e-7 apart, enough to reorder
near-ties wherever scores are fused (the leaf-sum strategy normalizes them by the best one).
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32
K1, B = F32(1.2), F32(0.75)
_TF_SCALE = K1 + F32(1.0)


def idf(docs_with_term: int, docs: int) -> np.float32:
    """The term's weight (``ln`` in double precision rounded to float32: what ``logf`` gives, checked)."""
    x = (F32(docs) - F32(docs_with_term) + F32(0.5)) / (F32(docs_with_term) + F32(0.5)) + F32(1.0)
    return F32(math.log(float(x)))


def doc_norms(lengths: np.ndarray, total_tokens: int, docs: int) -> np.ndarray:
    """``k1 * (1 - b + b * len / avgdl)`` per document (float32)."""
    if not docs:
        return np.full(len(lengths), K1, dtype=np.float32)
    avgdl = F32(total_tokens) / F32(docs)
    return K1 * (F32(1.0) - B + B * np.asarray(lengths, dtype=np.float32) / avgdl)


def term_parts(rows: np.ndarray, tf: np.ndarray, weight: np.float32, norms: np.ndarray) -> np.ndarray:
    """One term's part of the score of each of ``rows``, whose frequencies are ``tf`` (float32)."""
    tf = np.asarray(tf, dtype=np.float32)
    return weight * (_TF_SCALE * tf / (tf + norms[rows]))


def add_term(scores: np.ndarray, rows: np.ndarray, tf: np.ndarray, weight: np.float32, norms: np.ndarray) -> None:
    """Add one query term's part to ``scores`` (float32) of ``rows`` (distinct), whose frequencies are ``tf``."""
    scores[rows] += term_parts(rows, tf, weight, norms)


def top(candidates: np.ndarray, found: np.ndarray, ids: np.ndarray, n: int) -> list[tuple[str, float]]:
    """The best ``n`` distinct ids by (-score, id): an id may have a row per branch (the same text), and counts
    with its best one; which of a tie group makes the cut depends on the ids, never on row order.
    ``found[j]`` is the score of row ``candidates[j]``, whose id is ``ids[candidates[j]]``."""
    take = min(len(found), 2 * n + 10)
    while True:
        if take < len(found):  # the best ``take`` rows and every row tied with the last of them
            kth = np.partition(found, len(found) - take)[len(found) - take]
            part = np.flatnonzero(found >= kth)
        else:
            part = np.arange(len(found))
        # one gather of the ids (``ids`` may be mapped: an element read from a map is slow)
        names = np.asarray(ids[candidates[part]]).astype(str)
        scores = found[part]
        order = np.lexsort((names, -scores))  # by score, best first, then id
        names, scores = names[order], scores[order]
        _, first = np.unique(names, return_index=True)  # each id's first row in that order: its best
        best = np.sort(first)
        # Every row scoring at least the n-th distinct id's best is in ``part`` (it holds all rows from kth),
        # unless fewer than n ids are: then look further.
        if len(best) >= n or len(part) == len(found):
            best = best[:n]
            return list(zip(names[best].tolist(), scores[best].tolist(), strict=True))
        take *= 2
