"""LoCoMo (`locomo10.json`, Maharana et al., ACL 2024) loader, and its turn-level source format.

Real quirks handled: category-5 items carry ``adversarial_answer`` instead of ``answer``; some
answers are integers; some evidence lists are empty; some evidence entries are malformed
(``"D8:6; D9:17"``, ``"D"``, ``"D:11:26"``, space-joined lists); a conversation can have more
``session_N_date_time`` keys than sessions. Session dates look like "1:56 pm on 8 May, 2023".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers import SourceItem
from synthex.core.importers.base import read_json_objects
from synthex.core.periods import iso
from synthex.core.record import Record

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    created_at: str
    caption: str = ""

    @property
    def session_id(self) -> str:
        return f"S{self.session}"


@dataclass
class Question:
    question: str
    answer: str
    evidence: list[str]
    category: int
    adversarial: bool = False

    @property
    def evidence_sessions(self) -> list[str]:
        return sorted({f"S{e.split(':')[0][1:]}" for e in self.evidence}, key=lambda s: int(s[1:]))


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    session_dates: dict[int, str] = field(default_factory=dict)


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> aware datetime (UTC; the benchmark gives no zone)."""
    cleaned = " ".join(text.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date {text!r}")


def normalize_evidence(raw: list[Any]) -> list[str]:
    """Every well-formed ``D<session>:<turn>`` found in the entries, in order, deduplicated."""
    found: list[str] = []
    for entry in raw or []:
        for s, t in _DIA.findall(str(entry)):
            dia = f"D{int(s)}:{int(t)}"
            if dia not in found:
                found.append(dia)
    return found


def load_locomo(path: str | Path) -> list[Conversation]:
    p = Path(path)
    conversations = []
    for index, sample in read_json_objects(p, "LoCoMo", "sample"):
        conv = sample.get("conversation")
        if not isinstance(conv, dict):
            raise SourceError(f"{p}: sample #{index} has no 'conversation'")
        sample_id = str(sample.get("sample_id", f"sample-{index}"))
        out = Conversation(sample_id, (conv.get("speaker_a", "A"), conv.get("speaker_b", "B")))
        sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
        for n in sessions:  # date keys without a session are ignored
            date_text = conv.get(f"session_{n}_date_time")
            if not date_text:
                raise SourceError(f"{p}: {sample_id} session_{n} has no session_{n}_date_time")
            start = parse_session_date(date_text)
            out.session_dates[n] = iso(start)
            for t_index, turn in enumerate(conv[f"session_{n}"]):
                if "dia_id" not in turn or "text" not in turn:
                    raise SourceError(f"{p}: {sample_id} session_{n} turn #{t_index} lacks 'dia_id' or 'text'")
                out.turns.append(Turn(
                    dia_id=turn["dia_id"], session=n, speaker=turn.get("speaker", ""), text=turn["text"],
                    created_at=iso(start + timedelta(seconds=30 * t_index)),
                    caption=turn.get("blip_caption", "") or ""))
        for qa in sample.get("qa", []):
            adversarial = "answer" not in qa and "adversarial_answer" in qa
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            out.questions.append(Question(question=str(qa["question"]), answer=str(answer),
                                          evidence=normalize_evidence(qa.get("evidence", [])),
                                          category=int(qa.get("category", 0)), adversarial=adversarial))
        conversations.append(out)
    return conversations


def turn_text(turn: Turn) -> str:
    text = f"{turn.speaker}: {turn.text}"
    return text + (f" [shared an image: {turn.caption}]" if turn.caption else "")


def parse_turns(path: Path) -> list[SourceItem]:
    """Source format ``locomo-turns``: one record per dialogue turn."""
    items = []
    for conv in load_locomo(path):
        for index, turn in enumerate(conv.turns):
            previous = conv.turns[index - 1] if index and conv.turns[index - 1].session == turn.session else None
            items.append(SourceItem(
                key=f"{conv.sample_id}/{turn.dia_id}",
                content=turn_text(turn),
                created_at=turn.created_at,
                metadata={"time": {"created_at": turn.created_at},
                          "chat": {"conversation_id": conv.sample_id, "message_id": turn.dia_id,
                                   "author": turn.speaker, "session_id": turn.session_id,
                                   "previous": turn_text(previous) if previous else ""},
                          "source": {"type": "locomo", "path": str(path)}}))
    return items


def with_previous_turn(record: Record) -> str:
    """Write-time enrichment without a model: a turn indexed together with the turn it answers.

    Answers often lack the question's words ("Yes, last Tuesday!"); the previous turn carries them.
    """
    previous = record.meta("chat.previous") or ""
    return f"{previous}\n{record.content}" if previous else record.content


def with_previous_turn_enriched(record: Record) -> str:
    """``with_previous_turn`` plus the turn's entities, resolved dates and topics (``synthex.core.enrich``):
    "last Tuesday" said on 8 May 2023 is indexed as 2 May 2023 too."""
    from synthex.core.enrich import enrichment_text
    from synthex.core.enrich.steps import record_time

    line = enrichment_text(record.content, record_time(record))
    text = with_previous_turn(record)
    return f"{text}\n{line}" if line else text

