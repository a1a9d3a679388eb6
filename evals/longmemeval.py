"""LongMemEval (Wu et al., ICLR 2025) loader and its two retrieval protocols.

Files: ``longmemeval_s*.json``, ``longmemeval_m*.json``, ``longmemeval_oracle.json``: a list of
questions, each with its own haystack (``haystack_sessions``: lists of ``{role, content, has_answer}``).

Protocols:
- ``official`` (the benchmark's retrieval evaluation): documents are built from *user* turns only
  (a session document = its user turns; a turn document = one user turn, id ``<session>_<n>``);
  an evidence session with no ``has_answer`` turn is relabelled as non-evidence ("noans"); the
  abstention questions (``_abs`` ids) are excluded. Headline: ``recall_all@5``.
- ``any``: every question, gold = ``answer_session_ids`` as given, all turns; the figure most public
  repos report is ``recall_any@k`` under this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers import SourceItem, register_format
from synthex.core.importers.base import read_json_objects
from synthex.core.periods import iso

REQUIRED = ("question_id", "question_type", "question", "answer", "haystack_session_ids", "haystack_sessions",
            "answer_session_ids")
PROTOCOLS = ("official", "any")


@dataclass
class Document:
    doc_id: str
    session_id: str
    text: str
    created_at: str


@dataclass
class LMEQuestion:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    raw: dict[str, Any]

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")


def parse_lme_date(text: str | None) -> str:
    """'2023/05/20 (Sat) 02:21' -> ISO UTC; '' when absent."""
    if not text:
        return ""
    cleaned = " ".join(part for part in text.split() if not part.startswith("("))
    return iso(datetime.strptime(cleaned, "%Y/%m/%d %H:%M").replace(tzinfo=UTC))


def load_longmemeval(path: str | Path) -> list[LMEQuestion]:
    p = Path(path)
    out = []
    for index, item in read_json_objects(p, "LongMemEval", "question"):
        missing = [k for k in REQUIRED if k not in item]
        if missing:
            raise SourceError(f"{p}: question #{index} ({item.get('question_id', 'no id')}) lacks {', '.join(missing)}")
        if len(item["haystack_sessions"]) != len(item["haystack_session_ids"]):
            raise SourceError(f"{p}: question {item['question_id']}: haystack_sessions and haystack_session_ids differ in length")
        out.append(LMEQuestion(str(item["question_id"]), item["question_type"], item["question"], str(item["answer"]),
                               item.get("question_date", ""), item))
    return out


def documents(question: LMEQuestion, granularity: str, protocol: str) -> tuple[list[Document], set[str]]:
    """The question's haystack as documents, and the gold document ids, under ``protocol``."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
    raw = question.raw
    dates = raw.get("haystack_dates") or [""] * len(raw["haystack_sessions"])
    answer_sessions = set(raw["answer_session_ids"])
    docs: list[Document] = []
    gold: set[str] = set()
    for sid, session, date in zip(raw["haystack_session_ids"], raw["haystack_sessions"], dates, strict=True):
        created = parse_lme_date(date)
        turns = [(n, t) for n, t in enumerate(session) if protocol == "any" or t.get("role") == "user"]
        has_answer = any(t.get("has_answer") for _, t in turns)
        is_gold_session = sid in answer_sessions and (protocol == "any" or has_answer)
        if granularity == "session":
            text = "\n".join(t.get("content", "") for _, t in turns)
            docs.append(Document(sid, sid, text, created))
            if is_gold_session:
                gold.add(sid)
        elif granularity == "turn":
            for n, turn in turns:
                doc_id = f"{sid}_{n + 1}"
                docs.append(Document(doc_id, sid, turn.get("content", ""), created))
                if is_gold_session and (protocol == "any" or turn.get("has_answer")):
                    gold.add(doc_id)
        else:
            raise ValueError(f"granularity must be 'session' or 'turn', not {granularity!r}")
    return docs, gold


def questions_for(protocol: str, questions: list[LMEQuestion]) -> list[LMEQuestion]:
    """The official protocol leaves out abstention questions; 'any' keeps every question."""
    return [q for q in questions if not (protocol == "official" and q.abstention)]


def _turn_items(path: Path, protocol: str) -> list[SourceItem]:
    items = []
    for question in load_longmemeval(path):
        docs, _ = documents(question, "turn", protocol)
        for doc in docs:
            items.append(SourceItem(
                key=f"{question.question_id}/{doc.doc_id}", content=doc.text,
                created_at=doc.created_at or "2023-01-01T00:00:00Z",
                metadata={"time": {"created_at": doc.created_at or "2023-01-01T00:00:00Z"},
                          "chat": {"conversation_id": question.question_id, "message_id": doc.doc_id,
                                   "session_id": doc.session_id},
                          "source": {"type": "longmemeval", "path": str(path)}}))
    return items


for _protocol in PROTOCOLS:
    register_format(f"longmemeval-turns-{_protocol}", lambda path, _p=_protocol: _turn_items(path, _p))
