"""Ablation of the second stage (issue 35) on LoCoMo: a pair scorer (the offline cross-encoder, or late
interaction) reorders the top N of the best first-stage ranking (``hierarchical-expanded``), for N, the
blend with the first-stage order, and what the model reads of a turn (``RerankText``).

The first stage is searched once per question (its top ``max(N)``, through the real engine on the
``hierarchical-conversational`` workspaces, ingested if missing) and kept in ``--cache-dir`` with each
hit's drill-down to its turns, so a later run (other rows, another N) opens no workspace; the
cross-encoder's scores are kept there too, per (question, text): a pair is scored once across runs.
Each variant then reranks those hits, so the rows differ only in the second stage.

    python -m evals.ablations.rerank --data ../shared/data/locomo/locomo10_dev7.json --work-dir W \\
        --conversations 1-4 --texts content,turn,speaker,dated --top-n 10,20,30,50 --cache-dir C \\
        [--late-interaction] --json rr.json --markdown rr.md
    ... --conversations 5-7 --texts content,dated --top-n 30     # the held-out check of the chosen rows

Rerank latency per query (p50 / p95) is measured on the rows whose pairs were not in the cache (the rest
read stored scores: 0 ms); the cost goal is measured by ``python -m evals.bench.rerank --cross-encoder``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evals.ablations.conversational import ablation_row
from evals.ablations.hierarchical import ALTITUDES, ARCHITECTURE, TURNS
from evals.architectures import ranked_leaf_keys, resolve
from evals.benchmarks.locomo.benchmark import add_question, ingest_conversation
from evals.benchmarks.locomo.data import load_locomo
from evals.scoring import Tally
from synthex_resources.embedder import EmbedderConfig, MiniLMOnnxEmbedder
from synthex_resources.search import SearchEngine
from synthex_resources.search.cross_encoder import CrossEncoderModel, CrossEncoderReranker, RerankText
from synthex_resources.search.strategies.builtin import HIERARCHICAL_EXPANDED

TOP_NS = (10, 20, 30, 50)
BLENDS = (0.0, 2.0, 5.0)
FIRST_STAGE = "first stage alone (hierarchical-expanded)"


@dataclass
class KeptHit:
    """A first-stage hit as the second stage and the scoring read it: its text, metadata and turns."""

    id: str
    content: str
    metadata: dict[str, Any]
    turns: list[str]  # its leaves' keys (chat.message_id), in the drill-down's order for its question

    def meta(self, path: str) -> Any:
        value: Any = self.metadata
        for part in path.split("."):
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value


@dataclass
class KeptQuestion:
    qid: str
    question: Any  # evals.benchmarks.locomo.data's question
    session_of: dict[str, str]
    hits: list[KeptHit] = field(default_factory=list)


def first_stage(data: Path, work_dir: Path, first: int, last: int, pool: int, cache: Path | None,
                embedder_kind: str | None = None, query_prefix: str | None = None) -> list[KeptQuestion]:
    """Conversations ``first``..``last`` (1-based) searched once (top ``pool``), from ``cache`` when kept;
    ``embedder_kind``: a registered embedder kind (None: the configured one, MiniLM by default);
    ``query_prefix``: what questions are embedded after, in place of the embedder's own (the stored vectors,
    hence the workspaces, are the same either way)."""
    embedder = EmbedderConfig(kind=embedder_kind).create()
    if query_prefix is not None:
        embedder.query_prefix = query_prefix  # type: ignore[attr-defined]
    # MiniLM's file name as before (an earlier run's kept first stage is still found); any other model's
    # carries its name, whether --embedder or SYNTHEX_EMBEDDER chose it.
    model = "" if embedder.name == MiniLMOnnxEmbedder.name else f"-{embedder.name}"
    if query_prefix is not None:
        model += f"-prefix{hashlib.sha256(query_prefix.encode()).hexdigest()[:8]}"
    path = cache / f"first-stage-{data.stem}-{first}-{last}-top{pool}{model}.pkl" if cache else None
    if path is not None and path.exists():
        return pickle.loads(path.read_bytes())
    raw = json.loads(data.read_text(encoding="utf-8"))
    arch = resolve([ARCHITECTURE], None)[0]
    key = lambda r: r.meta("chat.message_id")  # noqa: E731
    out: list[KeptQuestion] = []
    for conv in load_locomo(data)[first - 1: last]:
        pipe = ingest_conversation(arch, conv.sample_id, raw, work_dir, embedder)
        session_of = {t.dia_id: t.session_id for t in conv.turns}
        try:
            engine = SearchEngine(pipe.app.store)
            for index, question in enumerate(conv.questions):
                if not question.evidence:
                    continue
                hits = engine.search(question.question, steps=TURNS + ALTITUDES, k=pool, strategy=HIERARCHICAL_EXPANDED)
                kept = KeptQuestion(f"{conv.sample_id}/q{index}", question, session_of)
                for hit in hits:
                    kept.hits.append(KeptHit(hit.id, hit.content, dict(hit.metadata),
                                             ranked_leaf_keys([hit], question.question, key, pool)))
                out.append(kept)
        finally:
            pipe.close()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(out))
    return out


class StoredScores:
    """A pair scorer in front of another that keeps every score it gave in a file (per question and text):
    the ablation's rows and later runs score a pair once."""

    def __init__(self, model: Any, path: Path | None) -> None:
        self.model = model
        self.name = model.name
        self.path = path
        self.known: dict[tuple[str, str], float] = pickle.loads(path.read_bytes()) if path and path.exists() else {}
        self.scored = 0

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if (query, t) not in self.known]
        if missing:
            for text, value in zip(missing, self.model.scores(query, missing), strict=True):
                self.known[(query, text)] = float(value)
            self.scored += len(missing)
        return np.array([self.known[(query, t)] for t in texts], dtype=np.float32)

    def save(self) -> None:
        if self.path is not None and self.scored:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(self.known))
            tmp.replace(self.path)


def turn_keys(ranked: Sequence[KeptHit], k: int) -> list[str]:
    """The first ``k`` distinct turns of a ranking (as ``ranked_leaf_keys`` drills down)."""
    out: list[str] = []
    for hit in ranked:
        for turn in hit.turns:
            if turn not in out:
                out.append(turn)
            if len(out) >= k:
                return out
    return out


def percentile(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else 0.0


def score_row(name: str, questions: list[KeptQuestion], reranker: CrossEncoderReranker | None, k: int = 10) -> dict:
    tally = Tally()
    began = time.perf_counter()
    for q in questions:
        ranked = q.hits if reranker is None else reranker(q.question.question, q.hits)
        add_question(tally, q.question, turn_keys(ranked, k), q.session_of, question_id=q.qid)
    latencies = list(reranker.latencies) if reranker is not None else []
    row = ablation_row(tally, {"variant": name, "architecture": ARCHITECTURE, "steps": TURNS + ALTITUDES},
                       searching=time.perf_counter() - began, index_s=0.0, cold_s=0.0, disk={}, memory={})
    row["rerank_ms_p50"] = round(1000 * percentile(latencies, 50), 1)
    row["rerank_ms_p95"] = round(1000 * percentile(latencies, 95), 1)
    return row


def run(args: argparse.Namespace, log=print) -> list[dict]:
    first, _, last = args.conversations.partition("-")
    first_i, last_i = int(first), int(last or first)
    pool = max(args.pool or 0, *args.top_n)
    started = time.perf_counter()
    questions = first_stage(args.data, args.work_dir, first_i, last_i, pool, args.cache_dir, args.embedder,
                            args.query_prefix)
    print(f"# first stage: {len(questions)} questions of conversations {first_i}-{last_i}, top {pool}, "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    rows = [score_row(FIRST_STAGE, questions, None)]
    log(_brief(rows[-1]))
    scorers: list[tuple[str, StoredScores, tuple[float, ...]]] = []
    if not args.no_cross_encoder:
        model = CrossEncoderModel(max_tokens=args.max_tokens)
        name = f"scores-{model.name}-{args.max_tokens}-{args.conversations}-{'-'.join(args.texts)}.pkl"
        path = args.cache_dir / name if args.cache_dir else None  # one file per run: two runs never race on it
        scorers.append(("cross-encoder", StoredScores(model, path), tuple(args.blends)))
    if args.late_interaction:
        from synthex_resources.search.late_interaction import LateInteractionModel

        for dims in args.late_dims:
            scorers.append((f"late interaction {dims}d", StoredScores(LateInteractionModel(dims=dims), None),
                            tuple(args.late_blends)))
    for label, scorer, blends in scorers:  # N outermost: each N's rows add only the pairs ranked below the last
        for n in args.top_n:
            for text in args.texts:
                for blend in blends:
                    reranker = CrossEncoderReranker(scorer, top_n=n, blend=blend, text=RerankText(text))
                    rows.append(score_row(f"{label}, top {n}, blend {blend:g}, {text}", questions, reranker))
                    rows[-1]["pairs_scored"] = scorer.scored
                    log(_brief(rows[-1]))
                    scorer.save()
    return rows


def _brief(row: dict) -> str:
    return json.dumps({key: value for key, value in row.items()
                       if key not in ("questions", "disk_bytes", "memory_bytes", "steps", "architecture")})


def table(rows: list[dict]) -> str:
    cats = sorted({c for r in rows for c in r["by_category"]})
    head = ("| variant | any@5 | any@10 | all@10 | ndcg@10 | "
            + " | ".join(f"{c} all@10" for c in cats) + " | session any@5 | session all@10 | rerank ms p50 / p95 |")
    lines = [head, "|" + "---|" * (8 + len(cats))]
    for r in rows:
        per = " | ".join(f"{r['by_category'][c]['recall_all@10']:.4f}" if c in r["by_category"] else "-" for c in cats)
        lines.append(f"| {r['variant']} | {r['recall_any@5']:.4f} | {r['recall_any@10']:.4f} | {r['recall_all@10']:.4f} | "
                     f"{r['ndcg_any@10']:.4f} | {per} | {r['session']['recall_any@5']:.4f} | "
                     f"{r['session']['recall_all@10']:.4f} | {r['rerank_ms_p50']:.0f} / {r['rerank_ms_p95']:.0f} |")
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, default=Path(".synthex/evals/work/locomo"),
                        help="the eval's work dir: holds the hierarchical-conversational workspaces")
    parser.add_argument("--conversations", default="1-4", help="1-based range of the file's conversations, e.g. 5-7")
    parser.add_argument("--texts", type=lambda s: s.split(","), default=[t.value for t in RerankText],
                        help=f"comma-separated: {', '.join(t.value for t in RerankText)}")
    parser.add_argument("--top-n", type=_ints, default=list(TOP_NS))
    parser.add_argument("--blends", type=lambda s: [float(x) for x in s.split(",")], default=list(BLENDS))
    parser.add_argument("--max-tokens", type=int, default=CrossEncoderModel().max_tokens)
    parser.add_argument("--no-cross-encoder", action="store_true")
    parser.add_argument("--late-interaction", action="store_true", help="also rows of the late-interaction model")
    parser.add_argument("--late-dims", type=_ints, default=[128, 384])
    parser.add_argument("--late-blends", type=lambda s: [float(x) for x in s.split(",")], default=[0.0],
                        help="late interaction's blends (its MaxSim spans 0..1, so a blend on its own scale)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="keep the first stage and the scores here")
    parser.add_argument("--pool", type=int, default=None,
                        help="first-stage hits kept (default: the largest --top-n); a kept first stage of this size is reused")
    parser.add_argument("--embedder", default=None,
                        help="the first stage's embedder kind (synthex_resources.embedder; default: the configured one)")
    parser.add_argument("--query-prefix", default=None,
                        help="embed questions after this text instead of the embedder's own prefix ('' for none)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    for text in args.texts:
        RerankText(text)
    started = time.perf_counter()
    rows = run(args)
    text = table(rows)
    print(f"{text}\n\n# total {time.perf_counter() - started:.0f} s", flush=True)
    for path, body in ((args.json, json.dumps(rows, indent=1)), (args.markdown, text)):
        if path is not None:
            path.write_text(body + "\n", encoding="utf-8")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
