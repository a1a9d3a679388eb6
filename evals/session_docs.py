"""LoCoMo "session documents": each session retrieved as one whole document (peers' session R@k protocol).

``synthex eval locomo`` scores an architecture's ranked *turns*, and its session level is the sessions
of those turns. Peers quoting a LoCoMo "session R@10" (MemPalace: 60.3 % raw, 88.9 % hybrid v5) rank
whole sessions instead: one document per session, the question ranked against the conversation's
~19-32 session documents, k counted in sessions. That baseline depends on no architecture, so it is
computed here, on its own:

    python -m evals.session_docs --data ../shared/data/locomo/locomo10_dev7.json

Documents, two renderings of each session:

- ``project``: the session's date ("[1:56 pm on 8 May, 2023]") then its turns, one a line, as the turn
  eval indexes them (``evals.benchmarks.locomo.data.turn_text``: "Speaker: text", plus "[shared an image: caption]").
- ``mempalace``: MemPalace's ``benchmarks/locomo_bench.py`` (``--granularity session``, its default):
  ``Speaker said, "text"`` lines joined by newlines; no date, no image captions.

Rankers, per question, over the conversation's session documents:

- ``bm25``: rank-bm25 ``BM25Okapi`` (the project's reference BM25, default k1 / b), tokens from
  ``synthex_resources.search.tokenize`` (the project's tokenizer: lower-cased ``[a-z0-9]+``).
- ``dense``: the document's text through the project's embedder (MiniLM, mean-pooled, cosine). MiniLM
  reads at most 256 word pieces, so this is the session's opening (every dev7 session is longer: median
  708 word pieces). It is what MemPalace's raw baseline does: ChromaDB's default embedding function is
  the same all-MiniLM-L6-v2, truncating at 256 tokens.
- ``dense-mean``: the mean of the session's turn vectors (each turn embedded alone, as the turn eval
  embeds it), re-normalized: covers the whole session, at the price of blurring it.
- ``hybrid`` / ``hybrid-mean``: reciprocal rank fusion of ``bm25`` with ``dense`` / ``dense-mean``,
  textbook constants (k = 60, equal weights: ``HYBRID_EQUAL``), not tuned on this data.
- ``chance``: the expected figures of a random ranking (computed, not sampled): k = 10 sessions out of
  19-32 is a third to a half of a conversation.

Ties (e.g. BM25 zero scores) are broken by session order. Metrics over the question's evidence
sessions, k in sessions: ``recall@k`` (the share of the evidence sessions in the top k, averaged over
questions: MemPalace's "R@k", ``compute_retrieval_recall``, the headline), ``recall_any@k``,
``recall_all@k``, ``ndcg_any@k``, ``mrr`` (``evals/metrics.py``). Questions without evidence are
skipped as in ``synthex eval locomo`` (MemPalace counts them as 1.0; 2 of dev7's 1,347).

Prints a markdown table with the command line; writes a JSON (means, per category, and each question's
top 10 per ranker) under ``<eval dir>/session_docs/`` (not in the eval dir itself: ``synthex eval report``
reads every JSON there as an architecture result).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from math import comb
from pathlib import Path
from typing import Any

import numpy as np

from evals.benchmarks.locomo.data import CATEGORIES, Conversation, Turn, load_locomo, turn_text
from evals.metrics import mean, score
from evals.scoring import RECALL_KS, with_recall
from synthex_resources.embedder import Embedder, embed_queries
from synthex_resources.search.strategies.builtin import HYBRID_EQUAL
from synthex_resources.search.tokenize import tokenize

TEXTS = ("project", "mempalace")
RANKERS = ("bm25", "dense", "dense-mean", "hybrid", "hybrid-mean")
KS = (1, 5, 10)
HEADLINE = "recall@10"


@dataclass
class SessionDoc:
    session_id: str  # "S3", as ``Question.evidence_sessions``
    text: str  # the whole document: what ``bm25`` and ``dense`` read
    turns: list[str]  # its turns' texts: what ``dense-mean`` averages


def spoken_date(iso_date: str) -> str:
    """'2023-05-08T13:56:00Z' -> '1:56 pm on 8 May, 2023' (LoCoMo's own wording: words a question can match)."""
    d = datetime.fromisoformat(iso_date.replace("Z", "+00:00"))
    return f"{d.hour % 12 or 12}:{d:%M} {'am' if d.hour < 12 else 'pm'} on {d.day} {d:%B}, {d.year}"


def _peer_turn(turn: Turn) -> str:
    return f'{turn.speaker} said, "{turn.text}"'


def session_documents(conv: Conversation, text: str = "project") -> list[SessionDoc]:
    """The conversation's sessions as documents, in session order (``text``: ``project`` or ``mempalace``)."""
    if text not in TEXTS:
        raise ValueError(f"unknown document text {text!r}; expected one of {', '.join(TEXTS)}")
    by_session: dict[int, list[Turn]] = defaultdict(list)
    for turn in conv.turns:
        by_session[turn.session].append(turn)
    docs = []
    for n in sorted(by_session):
        if text == "project":
            turns = [turn_text(t) for t in by_session[n]]
            body = "\n".join([f"[{spoken_date(conv.session_dates[n])}]", *turns])
        else:
            turns = [_peer_turn(t) for t in by_session[n]]
            body = "\n".join(turns)
        docs.append(SessionDoc(f"S{n}", body, turns))
    return docs


def _order(scores: Sequence[float]) -> list[int]:
    """Indices best first; ties in document (session) order."""
    return sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))


def _rrf(*orders: list[int], k: int = HYBRID_EQUAL.rrf_k) -> list[int]:
    fused = [0.0] * len(orders[0])
    for order in orders:
        for rank, i in enumerate(order, start=1):
            fused[i] += 1.0 / (k + rank)
    return _order(fused)


class SessionIndex:
    """One conversation's session documents, indexed for the five rankers."""

    def __init__(self, docs: list[SessionDoc], embedder: Embedder) -> None:
        from rank_bm25 import BM25Okapi

        if not docs:
            raise ValueError("a conversation without sessions")
        self.ids = [d.session_id for d in docs]
        self.bm25 = BM25Okapi([tokenize(d.text) for d in docs])
        self.whole = embedder.embed([d.text for d in docs])
        vectors = embedder.embed([t for d in docs for t in d.turns])
        means, start = [], 0
        for d in docs:
            v = vectors[start:start + len(d.turns)].mean(axis=0)
            means.append(v / max(float(np.linalg.norm(v)), 1e-12))
            start += len(d.turns)
        self.mean = np.stack(means).astype(np.float32)

    def rankings(self, question: str, query_vector: np.ndarray) -> dict[str, list[str]]:
        """Every ranker's full ranking of the sessions (ids, best first) for one question."""
        lexical = _order(self.bm25.get_scores(tokenize(question)))
        dense = _order(self.whole @ query_vector)
        dense_mean = _order(self.mean @ query_vector)
        orders = {"bm25": lexical, "dense": dense, "dense-mean": dense_mean,
                  "hybrid": _rrf(lexical, dense), "hybrid-mean": _rrf(lexical, dense_mean)}
        return {name: [self.ids[i] for i in order] for name, order in orders.items()}


def question_scores(ranked: Sequence[str], gold: set[str]) -> dict[str, float]:
    """One question's metrics: ``evals.metrics.score`` plus ``recall@k`` (share of the gold in the top k)."""
    return with_recall(score(ranked, gold), ranked, gold)


def chance(n_sessions: int, n_gold: int) -> dict[str, float]:
    """Expected recall of a uniformly random ranking of ``n_sessions`` with ``n_gold`` evidence sessions.

    k = 10 of LoCoMo's 19-32 sessions is a third to a half of the conversation: this row says how much
    of a figure that alone gives."""
    out = {}
    for k in RECALL_KS:
        kk = min(k, n_sessions)
        total = comb(n_sessions, kk)
        out[f"recall@{k}"] = kk / n_sessions
        out[f"recall_any@{k}"] = 1 - comb(n_sessions - n_gold, kk) / total
        out[f"recall_all@{k}"] = comb(n_sessions - n_gold, kk - n_gold) / total if kk >= n_gold else 0.0
    return out


def evaluate(conversations: list[Conversation], embedder: Embedder, texts: Sequence[str] = TEXTS,
             log=print) -> dict[str, Any]:
    """Means overall and per category for each (document text, ranker), and each question's top 10."""
    rows: dict[str, list[tuple[str, dict[str, float]]]] = defaultdict(list)
    questions: list[dict[str, Any]] = []
    for conv in conversations:
        asked = [(i, q) for i, q in enumerate(conv.questions) if q.evidence]
        if not asked:
            continue
        query_vectors = embed_queries(embedder, [q.question for _, q in asked])
        indexes = {text: SessionIndex(session_documents(conv, text), embedder) for text in texts}
        for (index, q), qvec in zip(asked, query_vectors, strict=True):
            gold = set(q.evidence_sessions)
            category = CATEGORIES.get(q.category, str(q.category))
            top: dict[str, list[str]] = {}
            for text, idx in indexes.items():
                for ranker, ranked in idx.rankings(q.question, qvec).items():
                    key = f"{text}/{ranker}"
                    rows[key].append((category, question_scores(ranked, gold)))
                    top[key] = ranked[:10]
            rows["-/chance"].append((category, chance(len(indexes[texts[0]].ids), len(gold))))
            questions.append({"question_id": f"{conv.sample_id}/q{index}", "question": q.question,
                              "category": category, "gold_sessions": sorted(gold, key=lambda s: int(s[1:])),
                              "top10": top})
        log(f"  {conv.sample_id}: {len(indexes[texts[0]].ids)} sessions, {len(asked)} questions")
    results = []
    for key, scored in rows.items():
        text, ranker = key.split("/", 1)
        by_category: dict[str, list[dict[str, float]]] = defaultdict(list)
        for category, s in scored:
            by_category[category].append(s)
        results.append({"document": text, "ranker": ranker, "n_questions": len(scored),
                        "metrics": mean([s for _, s in scored]),
                        "by_category": {c: mean(v) | {"n": len(v)} for c, v in sorted(by_category.items())}})
    return {"results": results, "questions": questions}


METRIC_COLUMNS = tuple(f"{m}@{k}" for m in ("recall", "recall_any", "recall_all") for k in KS) + ("mrr",)


def table(results: list[dict[str, Any]]) -> str:
    head = "| document | ranker | n | " + " | ".join(METRIC_COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(METRIC_COLUMNS) + 3)]
    for r in results:
        m = r["metrics"]
        lines.append(f"| {r['document']} | {r['ranker']} | {r['n_questions']} | "
                     + " | ".join(f"{m[c]:.4f}" if c in m else "-" for c in METRIC_COLUMNS) + " |")
    return "\n".join(lines)


def category_table(results: list[dict[str, Any]], metrics: Sequence[str] = ("recall@10", "recall_any@10",
                                                                              "recall_all@10")) -> str:
    """One row per (document, ranker); each category's cell: the ``metrics`` joined by ' / '."""
    cats = sorted({c for r in results for c in r["by_category"]})
    n = {c: results[0]["by_category"].get(c, {}).get("n", 0) for c in cats}
    lines = ["| document | ranker | " + " | ".join(f"{c} (n={n[c]})" for c in cats) + " |",
             "|" + "---|" * (len(cats) + 2)]
    for r in results:
        cells = [" / ".join(f"{r['by_category'][c][m]:.3f}" for m in metrics) if c in r["by_category"] else "-"
                 for c in cats]
        lines.append(f"| {r['document']} | {r['ranker']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(data: Path, eval_dir: Path, limit: int | None = None, texts: Sequence[str] = TEXTS,
        command: str = "", log=print) -> tuple[dict[str, Any], str, Path]:
    """Evaluate, write the JSON, return (report, markdown, JSON path)."""
    from synthex_resources.embedder import EmbedderConfig

    started = time.perf_counter()
    conversations = load_locomo(data)[: limit or None]
    embedder = EmbedderConfig().create()
    out = evaluate(conversations, embedder, texts, log=log)
    wall = round(time.perf_counter() - started, 1)
    report = {"benchmark": "locomo", "protocol": "session-documents", "data": str(data),
              "conversations": len(conversations), "command": command, "embedder": embedder.name,
              "headline": HEADLINE, "k_unit": "sessions", "rrf_k": HYBRID_EQUAL.rrf_k, "wall_s": wall,
              "evaluated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **out}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = eval_dir / "session_docs" / f"{stamp}-locomo.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    n_q = out["results"][0]["n_questions"] if out["results"] else 0
    markdown = (f"LoCoMo session documents: one document per session, k in sessions ({len(conversations)} "
                f"conversations, {n_q} questions with evidence; headline {HEADLINE} = share of the evidence "
                f"sessions in the top 10, MemPalace's R@10; embedder {embedder.name}; {wall} s)\n\n"
                f"`{command}`\n\n{table(out['results'])}\n\n"
                f"By category: recall@10 / recall_any@10 / recall_all@10\n\n{category_table(out['results'])}")
    return report, markdown, path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="locomo10.json or a subset in its format")
    parser.add_argument("--eval-dir", type=Path, default=Path(".synthex/evals"),
                        help="the eval results folder; the JSON goes to <eval dir>/session_docs/")
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--text", choices=[*TEXTS, "both"], default="both", help="document rendering(s)")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    command = "python -m evals.session_docs " + shlex.join(argv)
    texts = TEXTS if args.text == "both" else (args.text,)
    _, markdown, path = run(args.data, args.eval_dir, args.limit, texts, command,
                            log=lambda m: print(m, file=sys.stderr, flush=True))
    print(markdown)
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()
