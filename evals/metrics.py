"""Retrieval metrics over ranked lists of ids with a gold set (binary relevance)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def dedupe(ranked: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def recall_any(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return float(any(r in gold for r in ranked[:k]))


def recall_all(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return float(gold <= set(ranked[:k]))


def ndcg(ranked: Sequence[str], gold: set[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(ranked[:k]) if r in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal if ideal else 0.0


def mrr(ranked: Sequence[str], gold: set[str]) -> float:
    return next((1.0 / (i + 1) for i, r in enumerate(ranked) if r in gold), 0.0)


def score(ranked: Sequence[str], gold: set[str], ks: Sequence[int] = (1, 3, 5, 10)) -> dict[str, float]:
    out = {}
    for k in ks:
        out[f"recall_any@{k}"] = recall_any(ranked, gold, k)
        out[f"recall_all@{k}"] = recall_all(ranked, gold, k)
        out[f"ndcg_any@{k}"] = ndcg(ranked, gold, k)
    out["mrr"] = mrr(ranked, gold)
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {key: round(sum(r[key] for r in rows) / len(rows), 4) for key in rows[0]}


def freshness(ranked: Sequence[str], evidence_by_time: Sequence[str], k: int) -> dict[str, float]:
    """Memory freshness (design doc §9.2) for a knowledge-update question.

    ``evidence_by_time``: the evidence sessions oldest first; the last one holds the current fact.
    - ``fresh@k``: 1 when the latest evidence is in the top k and above every older evidence item.
    - ``recency_precision@k``: sum over the top k of a recency weight (1 for the latest evidence,
      0.5 for older evidence, 0 otherwise), divided by k: stale evidence counts half.
    """
    if not evidence_by_time:
        return {}
    latest, older = evidence_by_time[-1], set(evidence_by_time[:-1])
    top = list(ranked[:k])
    fresh = latest in top and all(top.index(latest) < top.index(o) for o in older if o in top)
    weights = [1.0 if r == latest else 0.5 if r in older else 0.0 for r in top]
    return {f"fresh@{k}": float(fresh), f"recency_precision@{k}": sum(weights) / k}
