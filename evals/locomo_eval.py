"""`synthex eval locomo`: score architectures on LoCoMo retrieval (turn and session level)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evals.architectures import Architecture, ranked_leaf_keys
from evals.locomo import CATEGORIES, Question, load_locomo
from evals.metrics import dedupe
from evals.scoring import Tally
from evals.shared_embedder import MemoEmbedder
from synthex.naming import path_segment
from synthex_resources.embedder import Embedder


def ingest_conversation(arch: Architecture, sample_id: str, raw: list[dict[str, Any]], work_dir: Path,
                        embedder: Embedder | None = None):
    """One conversation fed through the architecture's pipeline, in its own workspace."""
    payload = json.dumps([s for s in raw if s.get("sample_id") == sample_id])
    return arch.ingest(work_dir / arch.work_key / path_segment(sample_id), "conversation.json", payload, "locomo-turns", embedder)


def add_question(tally: Tally, question: Question, turns: list[str], session_of: dict[str, str],
                 question_id: str | None = None) -> None:
    """Score one LoCoMo question's ranked turns (dia_ids) at turn and session level.

    ``question_id``: ``<sample_id>/q<index in the sample's qa list>`` (default: its position in the tally)."""
    tally.add(turns, set(question.evidence), dedupe(session_of.get(t, "?") for t in turns),
              set(question.evidence_sessions), CATEGORIES.get(question.category, str(question.category)),
              question_id=question_id, question=question.question)


def evaluate_locomo(data: Path, architectures: list[Architecture], work_dir: Path, limit: int | None = None,
                    k: int = 10, log=print, qa: bool = False, qa_context: int = 5) -> list[dict[str, Any]]:
    """Retrieval metrics per architecture; with ``qa``, also answer + judge accuracy (real LLM only)."""
    if qa:
        from synthex_resources.llm import LLMConfig

        if LLMConfig().is_offline():
            from evals.qa import qa_accuracy

            qa_accuracy([])  # raises the clear "needs a real LLM" error before any work
    conversations = load_locomo(data)[: limit or None]
    raw = json.loads(Path(data).read_text(encoding="utf-8"))
    results = []
    embedder = MemoEmbedder()  # one model, and one embedding per distinct text, for every workspace
    for arch in architectures:
        tally = Tally()
        qa_items = []
        pipeline_name = arch.name
        for conv in conversations:
            pipe = ingest_conversation(arch, conv.sample_id, raw, work_dir, embedder)
            pipeline_name = pipe.name
            session_of = {t.dia_id: t.session_id for t in conv.turns}
            questions = [(i, q) for i, q in enumerate(conv.questions) if q.evidence]
            for index, question in questions:
                hits = pipe.search(question.question, step=arch.steps, k=k, mode=arch.mode, branch=arch.branch)
                turns = ranked_leaf_keys(hits, question.question, lambda r: r.meta("chat.message_id"), k)
                add_question(tally, question, turns, session_of, question_id=f"{conv.sample_id}/q{index}")
                if qa and not question.adversarial:  # adversarial items have no answer to grade
                    from evals.qa import QAItem

                    qa_items.append(QAItem(question.question, question.answer, [h.content for h in hits[:qa_context]],
                                           CATEGORIES.get(question.category, str(question.category))))
            pipe.close()  # its store, caches and Dagster instance: one workspace held at a time
            log(f"  {arch.name}: {conv.sample_id} done ({len(questions)} questions)")
        qa_result = None
        if qa:
            from evals.qa import qa_accuracy

            qa_result = qa_accuracy(qa_items)
        results.append(tally.result(
            qa=qa_result, benchmark="locomo", pipeline=pipeline_name, architecture=arch.name, branch=arch.branch,
            mode=arch.mode, data=str(data), conversations=len(conversations)))
    return results
