"""`synthex eval longmemeval`: each question's haystack ingested through the architecture, then searched.

Turn records follow the protocol (official: user turns only); session metrics come from the ranked
turns' sessions. Headline under the official protocol: recall_all@5 (session level).
"""

from __future__ import annotations

import json
import resource
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from evals.architectures import Architecture, ranked_leaf_keys
from evals.longmemeval import documents, load_longmemeval, questions_for
from evals.metrics import dedupe, freshness, mean, score


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
    for arch in architectures:
        started = time.perf_counter()
        turn_rows, session_rows = [], []
        by_type: dict[str, list] = defaultdict(list)
        fresh_rows: list[dict[str, float]] = []
        pipeline_name = arch.name
        for index, question in enumerate(questions, start=1):
            _, gold_turns = documents(question, "turn", protocol)
            _, gold_sessions = documents(question, "session", protocol)
            root = work_dir / protocol / arch.work_key / question.question_id
            root.mkdir(parents=True, exist_ok=True)
            qfile = root / "question.json"
            payload = json.dumps([raw[question.question_id]])
            if not qfile.exists() or qfile.read_text() != payload:
                qfile.write_text(payload)
            pipe = arch.build(qfile, root, f"longmemeval-turns-{protocol}")
            pipeline_name = pipe.name
            pipe.run(branch=arch.branch)
            hits = pipe.search(question.question, step=arch.steps, k=k, mode=arch.mode, branch=arch.branch)
            turns = ranked_leaf_keys(hits, question.question, lambda r: r.meta("chat.message_id"), k)
            sessions = dedupe(t.rsplit("_", 1)[0] for t in turns)
            row = score(turns, gold_turns) if gold_turns else None
            if row is not None:
                turn_rows.append(row)
            s_row = score(sessions, gold_sessions)
            session_rows.append(s_row)
            by_type[question.question_type].append(s_row)
            if question.question_type == "knowledge-update":
                fresh_rows.append(freshness(sessions, evidence_by_time(question, gold_sessions), 5))
            if index % 25 == 0:
                log(f"  {arch.name}: {index}/{len(questions)} questions")
        results.append({
            "benchmark": f"longmemeval-{protocol}", "pipeline": pipeline_name, "architecture": arch.name,
            "branch": arch.branch, "mode": arch.mode, "protocol": protocol, "data": str(data),
            "n_questions": len(session_rows),
            "metrics": {"turn": mean(turn_rows), "session": mean(session_rows)},
            "by_category": {t: mean(v) | {"n": len(v)} for t, v in sorted(by_type.items())},
            "freshness": mean(fresh_rows) | {"n": len(fresh_rows)},
            "headline": {"official": "session recall_all@5", "any": "session recall_any@5"}[protocol],
            "wall_s": round(time.perf_counter() - started, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        })
    return results
