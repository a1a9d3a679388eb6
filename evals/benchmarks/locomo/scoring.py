"""Scoring one LoCoMo question's ranked turns, for the benchmark and for scripts and peers that rank turns
themselves (a module of its own: the mem0 peer uses it and the benchmark loads the peer)."""

from __future__ import annotations

from evals.benchmarks.locomo.data import CATEGORIES, Question
from evals.metrics import dedupe
from evals.scoring import Tally


def category_name(question: Question) -> str:
    return CATEGORIES.get(question.category, str(question.category))



def add_question(tally: Tally, question: Question, turns: list[str], session_of: dict[str, str],
                 question_id: str | None = None) -> None:
    """Score one LoCoMo question's ranked turns (dia_ids) at turn and session level, as ``LoCoMo.score`` does
    (for the scripts and peers that rank turns themselves).

    ``question_id``: ``<sample_id>/q<index in the sample's qa list>`` (default: its position in the tally)."""
    tally.add(turns, set(question.evidence), dedupe(session_of.get(t, "?") for t in turns),
              set(question.evidence_sessions), category_name(question),
              question_id=question_id, question=question.question)
