"""LongMemEval (Wu et al., ICLR 2025) loader and its retrieval protocols.

Files: ``longmemeval_s*.json``, ``longmemeval_m*.json``, ``longmemeval_oracle.json``, each also as
``.json.gz``: a list of questions, each with its own haystack (``haystack_sessions``: lists of
``{role, content, has_answer}``).

A repeated session (the real S files hold 13 in 498 haystacks: the same id and content at two positions)
is one document, at its first position, gold when its id is gold; the same id with other content is a
malformed question. A malformed question is one line naming the file, the question (index and id) and the
field; the other questions run (``read_longmemeval``).

Protocols:
- ``official``: the paper's retrieval evaluation, as xiaowu0162/LongMemEval computes it
  (``src/retrieval/run_retrieval.py``: ``process_item_flat_index`` builds the corpus, ``main`` averages;
  ``src/retrieval/eval_utils.py`` scores). Documents are *user* turns only (turn id ``<session>_<n>``,
  n counting every turn from 1); in an evidence session a turn without ``has_answer`` is relabelled
  non-evidence ("noans"), and an evidence session with no such user turn is relabelled as a whole. Left
  out of the averages: abstention questions (``_abs`` ids, the paper's ``ignored_qs_abstention``) and
  questions with no ``has_answer`` user turn in their haystack (``ignored_qs_no_target``). Turn metrics
  over the ranked turns; session metrics from them as ``evaluate_retrieval_turn2session`` does
  (``paper_session_metrics``). Headline: session ``recall_all@5``. The paper marks evidence by the
  substring "answer" in a session id; this module reads ``answer_session_ids``: on the real dev file
  the two are the same sessions in all 201 haystacks.
- ``any``: as public repositories (peers) report LongMemEval: every turn (user and assistant), every
  non-abstention question, gold = ``answer_session_ids`` as given; their figure is session ``recall_any@k``.
- ``mempalace``: MemPalace's own benchmark (``benchmarks/longmemeval_bench.py`` of MemPalace/mempalace, its
  default "raw" mode and session granularity, whose session recall_any@5 is its published 96.6 % on S). Every
  question of the file, abstention ones included; gold = ``answer_session_ids`` as given (no relabelling), and
  every user turn of a gold session a gold turn; documents are user turns (the official protocol's turn
  records, so its workspaces are shared), and MemPalace's own corpus is one document per session holding a user
  turn (its user turns joined by newlines). Metrics over the ranked sessions: recall_any/recall_all@k of the
  top k, and its nDCG (``mempalace_ndcg``: the textbook discount, the ideal being the top k's own relevances
  sorted). Only a haystack without any user turn is left out, as its script skips an empty corpus.
  Headline: session ``recall_any@5``. One difference stays: a repeated session is one document here, two in
  its corpus (so it takes one place of the top k here, two there).
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from synthex.core.errors import SourceError
from synthex.core.importers import SourceItem
from synthex.core.importers.base import loads, read_json
from synthex.core.limits import Limits
from synthex.core.periods import iso

PROTOCOLS = ("official", "any", "mempalace")
PAPER_KS = (1, 3, 5, 10)
# the reasons a question is left out of the averages
ABSTENTION, NO_TARGET, NO_USER_TURN = "abstention", "no_target", "no_user_turn"
# The protocol whose turn records a protocol ingests: MemPalace's are the official ones (user turns, same ids and
# texts; only the gold differs), so the two share their workspaces and vectors.
TURN_RECORDS = {"official": "official", "any": "any", "mempalace": "official"}


@dataclass
class Document:
    doc_id: str
    session_id: str
    text: str
    created_at: str


@dataclass(frozen=True)
class Session:
    session_id: str
    date: str  # as in the file ("2023/05/20 (Sat) 02:21"); "" when the file has no haystack_dates
    turns: list[dict[str, Any]]


@dataclass
class LMEQuestion:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    raw: dict[str, Any]
    sessions: list[Session] = field(default_factory=list)  # the haystack, a repeated session once

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    @property
    def has_user_target(self) -> bool:
        """A ``has_answer`` user turn anywhere in the haystack (the paper's test for ``ignored_qs_no_target``)."""
        return any(t.get("role") == "user" and t.get("has_answer") is True for s in self.sessions for t in s.turns)


@dataclass
class LoadedLME:
    """A file's questions that parse, and one line per question that does not (those are left out)."""

    questions: list[LMEQuestion]
    problems: list[str]

    def require_questions(self) -> LoadedLME:
        """Itself, unless no question parsed: then a ``SourceError`` of its first problem."""
        if self.problems and not self.questions:
            more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            raise SourceError(self.problems[0] + more)
        return self


def parse_lme_date(text: str | None) -> str:
    """'2023/05/20 (Sat) 02:21' -> ISO UTC; '' when absent."""
    if not text:
        return ""
    cleaned = " ".join(part for part in text.split() if not part.startswith("("))
    return iso(datetime.strptime(cleaned, "%Y/%m/%d %H:%M").replace(tzinfo=UTC))


class _Malformed(ValueError):
    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")


def _list_of(item: dict[str, Any], key: str) -> list[Any]:
    value = item.get(key)
    if not isinstance(value, list):
        raise _Malformed(key, "missing" if value is None else f"expected a list, found {type(value).__name__}")
    return value


def _text(item: dict[str, Any], key: str, required: bool = True) -> str:
    value = item.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise _Malformed(key, "missing" if value is None else f"expected text, found {type(value).__name__}")
    return value


def _date(value: object, field_name: str) -> str:
    if value in (None, ""):
        return ""
    try:
        parse_lme_date(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _Malformed(field_name, f"not a date like '2023/05/20 (Sat) 02:21': {str(value)[:40]!r}") from None
    return str(value)


def parse_question(item: dict[str, Any]) -> LMEQuestion:
    """One question of the file; ``_Malformed`` names the field that is wrong."""
    qid, qtype, text = _text(item, "question_id"), _text(item, "question_type"), _text(item, "question")
    if "answer" not in item:
        raise _Malformed("answer", "missing")
    question_date = _date(item.get("question_date"), "question_date")
    sids, sessions = _list_of(item, "haystack_session_ids"), _list_of(item, "haystack_sessions")
    if len(sids) != len(sessions):
        raise _Malformed("haystack_sessions", f"{len(sessions)} sessions for {len(sids)} haystack_session_ids")
    dates = item.get("haystack_dates")
    if dates is None:
        dates = [""] * len(sids)
    elif not isinstance(dates, list) or len(dates) != len(sids):
        raise _Malformed("haystack_dates", f"expected a list of {len(sids)} dates")
    answer_ids = _list_of(item, "answer_session_ids")
    if not all(isinstance(a, str) for a in answer_ids):
        raise _Malformed("answer_session_ids", "expected a list of session ids")
    kept: dict[str, Session] = {}
    for n, (sid, session, date) in enumerate(zip(sids, sessions, dates, strict=True)):
        where = f"haystack_sessions[{n}]"
        if not isinstance(sid, str) or not sid:
            raise _Malformed(f"haystack_session_ids[{n}]", "expected a session id")
        if not isinstance(session, list) or not all(
                isinstance(t, dict) and isinstance(t.get("role"), str) and isinstance(t.get("content"), str)
                for t in session):
            raise _Malformed(where, "expected a list of turns, each with text role and content")
        date = _date(date, f"haystack_dates[{n}]")
        if sid in kept:  # a repeated session: one document, at its first position
            if kept[sid].turns != session:
                raise _Malformed(where, f"session {sid!r} repeats an earlier session's id with other turns")
            continue
        kept[sid] = Session(sid, date, session)
    return LMEQuestion(qid, qtype, text, str(item["answer"]), question_date, item, list(kept.values()))


def _read_items(path: Path) -> Iterable[tuple[int, Any]]:
    """(index, item) of the file's list, each item as it is (a non-object item is that question's problem)."""
    if path.suffix != ".gz":
        data = read_json(path)
        if not isinstance(data, list):
            raise SourceError(f"{path}: expected LongMemEval (a JSON list of questions), found {type(data).__name__}")
        return enumerate(data)
    cap = Limits().source_file_bytes  # decompressed, bounded like any source file
    try:
        with gzip.open(path, "rb") as stream:
            raw = stream.read(cap + 1)
    except (OSError, EOFError) as exc:
        raise SourceError(f"{path}: not a readable gzip file ({exc})") from exc
    if len(raw) > cap:
        raise SourceError(f"{path}: over the source_file_bytes bound of {cap} bytes once decompressed")
    try:
        data = loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SourceError(f"{path}: invalid JSON once decompressed ({exc})") from exc
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected LongMemEval (a JSON list of questions), found {type(data).__name__}")
    return enumerate(data)


def read_longmemeval(path: str | Path) -> LoadedLME:
    """The questions of a ``.json`` or ``.json.gz`` file; a malformed question is a problem line, not an error.
    A file that is not a list of questions at all is a ``SourceError``."""
    p = Path(path)
    loaded = LoadedLME([], [])
    seen: set[str] = set()
    for index, item in _read_items(p):
        qid = item.get("question_id") if isinstance(item, dict) else None
        label = f"{p}: question #{index} ({qid if isinstance(qid, str) else 'no id'})"
        if not isinstance(item, dict):
            loaded.problems.append(f"{label}: expected an object, found {type(item).__name__}")
            continue
        try:
            question = parse_question(item)
        except _Malformed as exc:
            loaded.problems.append(f"{label}: {exc}")
            continue
        if question.question_id in seen:
            loaded.problems.append(f"{label}: question_id: repeats an earlier question's id")
            continue
        seen.add(question.question_id)
        loaded.questions.append(question)
    return loaded


def load_longmemeval(path: str | Path, warn: Callable[[str], None] | None = None) -> list[LMEQuestion]:
    """``read_longmemeval``'s questions, each problem line through ``warn``; a file none of whose questions
    parse is a ``SourceError`` (its first problem)."""
    loaded = read_longmemeval(path).require_questions()
    for line in loaded.problems:
        if warn is not None:
            warn(line)
    return loaded.questions


def documents(question: LMEQuestion, granularity: str, protocol: str) -> tuple[list[Document], set[str]]:
    """The question's haystack as documents, and the gold document ids, under ``protocol``."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
    answer_sessions = set(question.raw["answer_session_ids"])
    relabelled = protocol == "official"  # evidence is a has_answer user turn, not a whole answer session
    docs: list[Document] = []
    gold: set[str] = set()
    for session in question.sessions:
        sid = session.session_id
        created = parse_lme_date(session.date)
        turns = [(n, t) for n, t in enumerate(session.turns) if protocol == "any" or t.get("role") == "user"]
        has_answer = any(t.get("has_answer") is True for _, t in turns)
        is_gold_session = sid in answer_sessions and (not relabelled or has_answer)
        if granularity == "session":
            if protocol == "mempalace" and not turns:
                continue  # MemPalace's corpus has no document for a session without a user turn
            text = "\n".join(t.get("content", "") for _, t in turns)
            docs.append(Document(sid, sid, text, created))
            if is_gold_session:
                gold.add(sid)
        elif granularity == "turn":
            for n, turn in turns:
                doc_id = f"{sid}_{n + 1}"
                docs.append(Document(doc_id, sid, turn.get("content", ""), created))
                if is_gold_session and (not relabelled or turn.get("has_answer") is True):
                    gold.add(doc_id)
        else:
            raise ValueError(f"granularity must be 'session' or 'turn', not {granularity!r}")
    if protocol == "mempalace" and granularity == "session":
        gold = answer_sessions  # as given, also a session its corpus has no document for
    return docs, gold


def excluded_because(protocol: str, question: LMEQuestion) -> str | None:
    """Why ``question`` is left out of ``protocol``'s averages (``ABSTENTION``, ``NO_TARGET``, ``NO_USER_TURN``),
    or None."""
    if protocol == "mempalace":  # every question, abstention included; its script skips only an empty corpus
        has_user_turn = any(t.get("role") == "user" for s in question.sessions for t in s.turns)
        return None if has_user_turn else NO_USER_TURN
    if question.abstention:
        return ABSTENTION
    if protocol == "official" and not question.has_user_target:
        return NO_TARGET
    return None


def questions_for(protocol: str, questions: list[LMEQuestion]) -> list[LMEQuestion]:
    """The questions ``protocol`` scores: official and any leave out abstention questions, the official one also
    those with no target turn on the user side; mempalace only a haystack without a user turn."""
    return [q for q in questions if excluded_because(protocol, q) is None]


# -- the paper's metrics (src/retrieval/eval_utils.py) ---------------------------------------------------

def paper_dcg(relevances: Sequence[float], k: int) -> float:
    """The paper's DCG: the first item undiscounted, the item at 0-based position i >= 1 divided by log2(i + 1)
    (so the first two count fully; not the textbook 1/log2(i + 2))."""
    top = list(relevances[:k])
    return (top[0] + sum(r / math.log2(i + 1) for i, r in enumerate(top[1:], start=1))) if top else 0.0


def paper_ndcg(relevant_ranked: Sequence[bool], n_relevant: int, k: int) -> float:
    """nDCG@k of a ranking whose items are relevant or not, against the ideal of ``n_relevant`` relevant
    items in the corpus (the paper's ideal sorts the whole corpus's relevances)."""
    ideal = paper_dcg([1.0] * n_relevant, k)
    return paper_dcg([float(r) for r in relevant_ranked], k) / ideal if ideal else 0.0


def paper_metrics(ranked: Sequence[Any], gold: Set[Any], relevant: Sequence[bool], n_relevant: int,
                  k: int) -> dict[str, float]:
    recalled = set(ranked[:k])
    return {f"recall_any@{k}": float(any(g in recalled for g in gold)),
            f"recall_all@{k}": float(all(g in recalled for g in gold)),
            f"ndcg_any@{k}": paper_ndcg(relevant, n_relevant, k)}


def paper_turn_metrics(ranked_turns: Sequence[str], gold_turns: Set[str],
                       ks: Sequence[int] = PAPER_KS) -> dict[str, float]:
    """``evaluate_retrieval`` at each k over the ranked user turns (no gold: recall_all 1, recall_any 0)."""
    relevant = [t in gold_turns for t in ranked_turns]
    out: dict[str, float] = {}
    for k in ks:
        out |= paper_metrics(ranked_turns, gold_turns, relevant, len(gold_turns), k)
    return out


def paper_session_metrics(ranked_turns: Sequence[str], gold_turns: Set[str], session_of: Callable[[str], str],
                          ks: Sequence[int] = PAPER_KS) -> dict[str, float]:
    """``evaluate_retrieval_turn2session`` at each k. A turn stands for its session, but a non-evidence turn
    of an evidence session stands for that session's relabelled "noans" twin (its id had "answer" replaced):
    a gold session is found only through a gold turn. k grows to the shortest prefix of the ranking holding k
    distinct (twin) sessions; nDCG then counts the gold *turns* in that prefix."""
    keys = [(session_of(t), t in gold_turns) for t in ranked_turns]
    gold = {(session_of(t), True) for t in gold_turns}
    relevant = [t in gold_turns for t in ranked_turns]
    out: dict[str, float] = {}
    for k in ks:
        effective, seen = len(keys), set()
        for i, key in enumerate(keys):
            seen.add(key)
            if len(seen) >= k:
                effective = max(k, i + 1)
                break
        scored = paper_metrics(keys, gold, relevant, len(gold_turns), effective)
        out |= {name.replace(f"@{effective}", f"@{k}"): value for name, value in scored.items()}
    return out


# -- MemPalace's metrics (benchmarks/longmemeval_bench.py of MemPalace/mempalace) ------------------------------

def mempalace_ndcg(ranked: Sequence[str], gold: Set[str], k: int) -> float:
    """MemPalace's nDCG@k: the textbook DCG (1 / log2(i + 2)) of the top k, over the DCG of the same top k's
    relevances sorted (its ideal is the retrieved items' own, not the gold's: any ranking that has its relevant
    items first scores 1)."""
    relevances = [1.0 if r in gold else 0.0 for r in ranked[:k]]
    ideal = sorted(relevances, reverse=True)
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return sum(r / math.log2(i + 2) for i, r in enumerate(relevances)) / idcg if idcg else 0.0


def mempalace_metrics(ranked: Sequence[str], gold: Set[str], ks: Sequence[int] = PAPER_KS) -> dict[str, float]:
    """recall_any@k, recall_all@k (1 for no gold, as its ``all()``) and ``mempalace_ndcg`` at each k."""
    out: dict[str, float] = {}
    for k in ks:
        top = set(ranked[:k])
        out |= {f"recall_any@{k}": float(any(g in top for g in gold)),
                f"recall_all@{k}": float(all(g in top for g in gold)),
                f"ndcg_any@{k}": mempalace_ndcg(ranked, gold, k)}
    return out


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



def turn_items(protocol: str) -> Callable[[Path, Any], list[SourceItem]]:
    """Source format ``longmemeval-turns-<protocol>``'s parser (registered by the evals plugin)."""
    return lambda path, _intake: _turn_items(path, protocol)
