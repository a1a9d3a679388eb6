"""QA accuracy: answer each question from the retrieved context with the configured LLM, then have
the LLM judge the answer against the gold answer. Only with a real model: the offline stand-in is
extractive and would make the number meaningless, so it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from synthex.core.errors import SynthexError
from synthex_resources.llm import LLMConfig

ANSWER_PROMPT = """You answer questions about a long-running conversation between two people, using only the
conversation excerpts below. Answer with a short phrase. If the excerpts do not contain the answer,
say "not mentioned".

Excerpts:
{context}

Question: {question}
Answer:"""

JUDGE_PROMPT = """You grade an answer to a question about a conversation. The answer counts as correct when it
states the same fact as the gold answer; wording, extra detail and date formats may differ; an answer
that contradicts the gold answer or leaves out its key fact is wrong.

Question: {question}
Gold answer: {gold}
Answer to grade: {predicted}

Reply with one word, CORRECT or WRONG."""


@dataclass
class QAItem:
    question: str
    gold: str
    context: list[str]
    category: str


def qa_accuracy(items: list[QAItem], llm: LLMConfig | None = None) -> dict:
    llm = llm or LLMConfig()
    if llm.is_offline():
        raise SynthexError("QA accuracy needs a real LLM: set OPENAI_API_KEY and/or OPENAI_BASE_URL "
                           "(the offline stand-in is extractive and is never used to report QA accuracy)")
    completer = llm.get_completer()
    model = llm.resolved()["model"]
    answers = completer.complete_many(
        [ANSWER_PROMPT.format(context="\n".join(f"- {c}" for c in it.context), question=it.question) for it in items],
        model, 0.0)
    verdicts = completer.complete_many(
        [JUDGE_PROMPT.format(question=it.question, gold=it.gold, predicted=a.text) for it, a in zip(items, answers, strict=True)],
        model, 0.0)
    correct = [v.text.strip().upper().startswith("CORRECT") for v in verdicts]
    by_cat: dict[str, list[bool]] = {}
    for it, ok in zip(items, correct, strict=True):
        by_cat.setdefault(it.category, []).append(ok)
    return {"model": model, "n": len(items), "accuracy": round(sum(correct) / max(len(items), 1), 4),
            "by_category": {c: {"accuracy": round(sum(v) / len(v), 4), "n": len(v)} for c, v in sorted(by_cat.items())}}
