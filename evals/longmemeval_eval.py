"""`synthex eval longmemeval`: each question's haystack ingested through the architecture, then searched.

Turn records follow the protocol (official: user turns only); session metrics come from the ranked
turns' sessions. Headline under the official protocol: recall_all@5 (session level).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evals.architectures import Architecture, ranked_leaf_keys
from evals.longmemeval import documents, load_longmemeval, questions_for
from evals.metrics import dedupe, freshness, mean
from evals.scoring import Tally
from evals.shared_embedder import MemoEmbedder
from synthex.naming import path_segment


def evidence_by_time(question, gold_sessions: set[str]) -> list[str]:
    """The question's evidence sessions, oldest first (haystack dates; haystack order breaks ties)."""
    raw = question.raw
    dates = raw.get("haystack_dates") or [""] * len(raw["haystack_session_ids"])
    order = [(d, i, sid) for i, (sid, d) in enumerate(zip(raw["haystack_session_ids"], dates, strict=True))
             if sid in gold_sessions]
    return [sid for _, _, sid in sorted(order)]


def evaluate_longmemeval(data: Path, architectures: list[Architecture], work_dir: Path, protocol: str = "official",
                         limit: int | None = None, k: int = 10, log=print) -> list[dict[str, Any]]:
    questions = questions_for(protocol, load_longmemeval(data))[: limit or None]
    raw = {item["question_id"]: item for item in json.loads(Path(data).read_text(encoding="utf-8"))}
    results = []
    embedder = MemoEmbedder()  # one model, and one embedding per distinct text, for every workspace
    for arch in architectures:
        tally = Tally(category_level="session")
        fresh_rows: list[dict[str, float]] = []
        pipeline_name = arch.name
        for index, question in enumerate(questions, start=1):
            _, gold_turns = documents(question, "turn", protocol)
            _, gold_sessions = documents(question, "session", protocol)
            pipe = arch.ingest(work_dir / protocol / arch.work_key / path_segment(question.question_id), "question.json",
                               json.dumps([raw[question.question_id]]), f"longmemeval-turns-{protocol}", embedder)
            pipeline_name = pipe.name
            hits = pipe.search(question.question, step=arch.steps, k=k, mode=arch.mode, branch=arch.branch,
                               as_of=question.question_date or None)
            turns = ranked_leaf_keys(hits, question.question, lambda r: r.meta("chat.message_id"), k)
            pipe.close()
            sessions = dedupe(t.rsplit("_", 1)[0] for t in turns)
            tally.add(turns, gold_turns, sessions, gold_sessions, question.question_type,
                      question_id=question.question_id, question=question.question)
            if question.question_type == "knowledge-update":
                fresh_rows.append(freshness(sessions, evidence_by_time(question, gold_sessions), 5))
            if index % 25 == 0:
                log(f"  {arch.name}: {index}/{len(questions)} questions")
        results.append(tally.result(
            benchmark=f"longmemeval-{protocol}", pipeline=pipeline_name, architecture=arch.name,
            branch=arch.branch, mode=arch.mode, protocol=protocol, data=str(data),
            freshness=mean(fresh_rows) | {"n": len(fresh_rows)},
            headline={"official": "session recall_all@5", "any": "session recall_any@5"}[protocol]))
    return results
