"""Measure the rerankers: the offline cross-encoder's cost (``--cross-encoder PROJECT``), or the LLM reranker,
the anticipated-questions enrichment prompt and QA with the configured model.

``--cross-encoder PROJECT`` (issue 35's cost goal: the rerank of the top 30 adds p95 <= 150 ms at the
demo's size): questions about the project's conversations (their titles), each searched once (top 30,
the search output's mode), then each model setting reranks the same hits, timed per query in wall and
process CPU time (a fresh model per setting, so no pair comes from the cache; the tokenizer's share is
timed apart), then the same through the door (``search(rerank="cross-encoder")`` against no rerank),
and late interaction cold (no text seen) and warm:

    synthex init demo --demo && (cd demo && synthex run)
    python -m evals.bench.rerank --cross-encoder demo --questions 40 --out ce-cost.json

Searches one ingested LoCoMo conversation (the ``conversational`` architecture's workspace) with a
recipe, reranks the recipe's top ``--top-n`` hits with ``LLMReranker`` and scores turn-level retrieval
before and after (same questions, same first stage); then, optionally, answers + judges ``--qa``
questions from the first-stage top 5 (evals/qa.py) and runs the enrichment prompt over ``--enrich``
turns (throughput and sample outputs). Nothing is cached: every model call is timed.

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=local SYNTHEX_MODEL=smollm2 \\
    python -m evals.bench.rerank --data ../shared/data/locomo/locomo10_dev7.json \\
        --work-dir <project>/.synthex/evals/work/locomo --sample conv-26 --questions 30 --qa 20 --enrich 10
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from evals.architectures import ranked_leaf_keys, resolve
from evals.benchmarks.locomo.benchmark import add_question, ingest_conversation
from evals.benchmarks.locomo.data import CATEGORIES, load_locomo
from evals.scoring import Tally
from synthex.core.prompts import anticipate_questions
from synthex_resources.embedder import EmbedderConfig
from synthex_resources.llm import LLMConfig
from synthex_resources.search import SearchEngine
from synthex_resources.search.rerank import LLMReranker
from synthex_resources.search.strategies.registry import load_search_strategies

STEP = "turns-in-context"  # the conversational architecture's search step


def turn_metrics(tally: Tally) -> dict:
    m = tally.result()
    turn = m["metrics"]["turn"]
    return {"n": m["n_questions"], **{key: turn[key] for key in
                                      ("recall_any@5", "recall_any@10", "recall_all@10", "ndcg_any@10") if key in turn}}


CE_SETTINGS = (  # (max_tokens, batch_size, threads, hits reranked or None: the bench's top_n): where the time goes
    (256, 16, 1, None), (256, 16, 2, None), (256, 16, 2, 20), (256, 16, 2, 10), (256, 30, 1, None),
    (128, 16, 1, None), (64, 16, 1, None), (128, 16, 2, None))


def _ms(values: list[float]) -> dict:
    return {"p50_ms": round(1000 * float(np.percentile(values, 50)), 1),
            "p95_ms": round(1000 * float(np.percentile(values, 95)), 1)} if values else {}


def demo_questions(pipe, n: int) -> list[str]:
    """Questions about a project's conversations: one per distinct title, in title order."""
    titles = sorted({r.content.split("\n", 1)[0].lstrip("# ").removeprefix("Conversation: ")
                     for r in pipe.records("transcripts")})
    out = []
    for title in titles:
        topic, _, where = title.partition(" (")
        out.append(f"what did I work out about {topic.lower()} for {where.rstrip(')')}?" if where
                   else f"what did I work out about {topic.lower()}?")
    return out[:n]


def cross_encoder_cost(project: Path, questions: int, top_n: int = 30) -> dict:
    """Per-query rerank cost of the top ``top_n`` on ``project`` for each model setting (module docstring)."""
    from synthex.core.project import load_pipeline
    from synthex_resources.search.cross_encoder import CrossEncoderModel, CrossEncoderReranker
    from synthex_resources.search.late_interaction import LateInteractionModel

    pipe = load_pipeline(project)
    asked = demo_questions(pipe, questions)
    t0 = time.perf_counter()
    hits = [pipe.search(q, k=top_n) for q in asked]
    out: dict = {"project": str(project), "questions": len(asked), "top_n": top_n,
                 "first_stage_s": round(time.perf_counter() - t0, 2), "load_before": os.getloadavg()[0],
                 "settings": []}
    print(f"# {len(asked)} questions, first stage {out['first_stage_s']} s, load {out['load_before']:.1f}", flush=True)
    for max_tokens, batch_size, threads, reranked in CE_SETTINGS:
        model = CrossEncoderModel(max_tokens=max_tokens, batch_size=batch_size, threads=threads)
        reranker = CrossEncoderReranker(model, top_n=reranked or top_n)
        t0 = time.perf_counter()
        model.scores("warm up", ["load the session"])
        load_s = time.perf_counter() - t0
        walls, cpus, tokenize, lengths = [], [], [], []
        for q, h in zip(asked, hits, strict=True):
            docs = [reranker.document(x) for x in h[:reranker.top_n]]
            t0 = time.perf_counter()
            enc = model._tokenizer.encode_batch([(q, d) for d in docs])
            tokenize.append(time.perf_counter() - t0)
            lengths.append(max(len(e.ids) for e in enc))
            t0, c0 = time.perf_counter(), time.process_time()
            reranker.rerank(q, h)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        row = {"max_tokens": max_tokens, "batch_size": batch_size, "threads": threads, "top_n": reranker.top_n,
               "load_s": round(load_s, 2),
               "wall": _ms(walls), "cpu": _ms(cpus), "tokenize": _ms(tokenize),
               "pairs_cut": model.pairs_cut, "pairs": model.pairs_scored - 1,
               "longest_pair_p50": int(np.median(lengths)), "load": os.getloadavg()[0]}
        t0 = time.perf_counter()
        for q, h in zip(asked, hits, strict=True):
            reranker.rerank(q, h)
        row["cached_ms_per_query"] = round(1000 * (time.perf_counter() - t0) / len(asked), 2)
        out["settings"].append(row)
        print(json.dumps(row), flush=True)
    for dims in (128,):
        model = LateInteractionModel(dims=dims)
        reranker = CrossEncoderReranker(model, top_n=top_n)
        model.scores("warm up", ["load the session"])
        row = {"late_interaction_dims": dims}
        for phase in ("cold", "warm"):
            walls, cpus = [], []
            for q, h in zip(asked, hits, strict=True):
                t0, c0 = time.perf_counter(), time.process_time()
                reranker.rerank(q, h)
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            row[phase] = {"wall": _ms(walls), "cpu": _ms(cpus)}
        row["load"] = os.getloadavg()[0]
        out["settings"].append(row)
        print(json.dumps(row), flush=True)
    # Through the door: no rerank (its second pass: warm), then the door's own cross-encoder (a new model:
    # every pair scored; its first query, which loads the model, left out), then again (every pair cached).
    door: dict = {"none": [], "cross-encoder": [], "cross-encoder, pairs cached": []}
    for name, rerank in (("none", None), ("none", None), ("cross-encoder", "cross-encoder"),
                         ("cross-encoder, pairs cached", "cross-encoder")):
        walls = door[name] = [] if name == "none" else door[name]
        for q in asked:
            t0 = time.perf_counter()
            pipe.search(q, k=10, rerank=rerank, rerank_top_n=top_n)
            walls.append(time.perf_counter() - t0)
    door["cross-encoder"] = door["cross-encoder"][1:]
    out["door"] = {name: _ms(walls) for name, walls in door.items()}
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out["door"]), flush=True)
    pipe.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cross-encoder", type=Path, default=None, metavar="PROJECT",
                        help="measure the offline cross-encoder's cost on this project instead (no model needed)")
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--sample", default=None, help="LoCoMo sample id (default: the first conversation)")
    parser.add_argument("--recipe", default="conversational", choices=load_search_strategies().names(),
                        help="a search strategy (the registry's names)")
    parser.add_argument("--questions", type=int, default=30, help="first N questions with evidence")
    parser.add_argument("--top-n", type=int, default=20)
    parser.add_argument("--excerpt-chars", type=int, default=160)
    parser.add_argument("--qa", type=int, default=0, help="answer + judge the first N non-adversarial questions")
    parser.add_argument("--enrich", type=int, default=0, help="run the enrichment prompt over N turns")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    if args.cross_encoder is not None:
        out = cross_encoder_cost(args.cross_encoder, args.questions)
        if args.out:
            args.out.write_text(json.dumps(out, indent=1), encoding="utf-8")
        return
    if args.data is None or args.work_dir is None:
        raise SystemExit("the LLM reranker's bench needs --data and --work-dir")

    llm = LLMConfig()
    if llm.is_offline():
        raise SystemExit("needs a real model: set OPENAI_BASE_URL / OPENAI_API_KEY (and SYNTHEX_MODEL)")
    completer, model = llm.get_completer(), llm.resolved()["model"]  # no cache: every call is timed
    [arch] = resolve(["conversational"], None)
    raw = json.loads(args.data.read_text(encoding="utf-8"))
    conversations = load_locomo(args.data)
    conv = next(c for c in conversations if args.sample in (None, c.sample_id))
    pipe = ingest_conversation(arch, conv.sample_id, raw, args.work_dir, EmbedderConfig().create())
    engine = SearchEngine(pipe.app.store)
    session_of = {t.dia_id: t.session_id for t in conv.turns}
    questions = [(i, q) for i, q in enumerate(conv.questions) if q.evidence][: args.questions]
    reranker = LLMReranker(completer, model, top_n=args.top_n, excerpt_chars=args.excerpt_chars)
    strategy = load_search_strategies().get(args.recipe)
    before, after = Tally(), Tally()
    first_stage: dict[int, list] = {}
    moved = 0  # queries whose top_n order the model changed
    search_s: list[float] = []
    key = lambda r: r.meta("chat.message_id")  # noqa: E731
    out: dict = {"model": model, "sample": conv.sample_id, "recipe": args.recipe, "top_n": args.top_n}
    for n, (index, question) in enumerate(questions, 1):
        t0 = time.perf_counter()
        hits = engine.search(question.question, steps=[STEP], k=args.top_n, strategy=strategy)
        search_s.append(time.perf_counter() - t0)
        first_stage[index] = hits
        qid = f"{conv.sample_id}/q{index}"
        add_question(before, question, ranked_leaf_keys(hits, question.question, key, 10), session_of, qid)
        reranked = reranker(question.question, hits)
        moved += [h.id for h in reranked[: args.top_n]] != [h.id for h in hits[: args.top_n]]
        add_question(after, question, ranked_leaf_keys(reranked, question.question, key, 10), session_of, qid)
        print(f"  {n}/{len(questions)} rerank {reranker.stats.latencies[-1]:.1f}s "
              f"failures={reranker.stats.failures}", flush=True)
    search_s.sort()
    out["rerank"] = {"questions": len(questions), "before": turn_metrics(before), "after": turn_metrics(after),
                     "added_latency": reranker.stats.to_dict(), "reordered_queries": moved,
                     "replies": reranker.stats.replies[:8],
                     "first_stage_p50_s": round(search_s[len(search_s) // 2], 3) if search_s else None}
    print(json.dumps(out["rerank"]), flush=True)

    if args.qa:
        from evals.qa import QAItem, qa_accuracy

        items = [QAItem(q.question, q.answer, [h.content for h in first_stage[i][:5]],
                        CATEGORIES.get(q.category, str(q.category)))
                 for i, q in questions if not q.adversarial][: args.qa]
        t0 = time.perf_counter()
        out["qa"] = qa_accuracy(items, llm) | {"wall_s": round(time.perf_counter() - t0, 1)}
        print(json.dumps(out["qa"]), flush=True)

    if args.enrich:
        turns = sorted(pipe.app.records("turns"), key=lambda r: (r.meta("time.created_at") or "", r.id))[: args.enrich]
        prompts = [anticipate_questions(r) for r in turns]
        t0 = time.perf_counter()
        done = [completer.complete_many([p], model, 0.0)[0] for p in prompts]
        wall = time.perf_counter() - t0
        tokens_out = sum(c.tokens_out for c in done)
        out["enrich"] = {"records": len(done), "wall_s": round(wall, 1), "s_per_record": round(wall / len(done), 2),
                         "tokens_in": sum(c.tokens_in for c in done), "tokens_out": tokens_out,
                         "tokens_out_per_s": round(tokens_out / wall, 1),
                         "examples": [{"turn": r.content, "output": c.text} for r, c in list(zip(turns, done, strict=True))[:4]]}
        print(json.dumps(out["enrich"], indent=1), flush=True)
    pipe.close()
    if args.out:
        args.out.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    from synthex_resources.search.threads import apply_search_threads

    apply_search_threads()  # this process's entry point chooses its BLAS threads (search/threads.py)
    main()
