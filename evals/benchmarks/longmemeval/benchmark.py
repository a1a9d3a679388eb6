"""`synthex eval longmemeval`: the LongMemEval benchmark, on ``evals.benchmarks``: each question's haystack
ingested through the architecture, then searched as of the question's date.

Turn records follow the protocol (official: user turns only). Official protocol: the paper's metrics
(``evals.benchmarks.longmemeval.data.paper_turn_metrics`` / ``paper_session_metrics``: session figures from the ranked turns
as the paper's ``evaluate_retrieval_turn2session``) over the questions it scores; headline session
recall_all@5. ``any``: the peers' figure, session recall_any@5 of the ranked turns' sessions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from evals import metrics
from evals.architectures import Architecture
from evals.benchmarks import Benchmark, BenchmarkOption, BenchmarkQuestion, BenchmarkSource, evaluate
from evals.benchmarks.longmemeval.data import (
    ABSTENTION,
    NO_TARGET,
    NO_USER_TURN,
    PROTOCOLS,
    TURN_RECORDS,
    LMEQuestion,
    documents,
    excluded_because,
    mempalace_metrics,
    paper_session_metrics,
    paper_turn_metrics,
    read_longmemeval,
)
from evals.metrics import freshness, mean
from evals.peers import peers_of
from evals.scoring import QuestionScore
from synthex.core.errors import BadInputError

HEADLINES = {"official": "session recall_all@5",
             "any": "session recall_any@5 (the peers' protocol: all turns, every non-abstention question)",
             "mempalace": "session recall_any@5 (MemPalace's own benchmark protocol: every question, gold = "
                          "answer_session_ids, its nDCG; its published figure on S is 96.6 %)"}
FRESHNESS_K = 5


def evidence_by_time(question: LMEQuestion, gold_sessions: set[str] | frozenset[str]) -> list[str]:
    """The question's evidence sessions, oldest first (haystack dates; haystack order breaks ties)."""
    raw = question.raw
    dates = raw.get("haystack_dates") or [""] * len(raw["haystack_session_ids"])
    order = [(d, i, sid) for i, (sid, d) in enumerate(zip(raw["haystack_session_ids"], dates, strict=True))
             if sid in gold_sessions]
    return [sid for _, _, sid in sorted(order)]


class LongMemEval(Benchmark[LMEQuestion]):
    """LongMemEval (Wu et al., ICLR 2025): a "conversation" is one question with its own haystack; the
    knowledge-update questions also get the freshness figures (design doc §9.2)."""

    name = "longmemeval"
    title = "LongMemEval"
    description = "LongMemEval retrieval: each question's haystack ingested through the architecture's sources."
    data_help = "longmemeval_s_cleaned.json, longmemeval_m*.json or longmemeval_oracle.json."
    unit = "questions"
    options = (BenchmarkOption("protocol", "official: user turns, abstention questions left out; any: as given; "
                                           "mempalace: MemPalace's own benchmark (every question, its metrics).",
                               default="official", choices=PROTOCOLS),)
    category_level = "session"
    peers = peers_of("longmemeval")
    progress_every = 5  # a progress line (with its ETA) every 5 haystacks
    temporal_categories = ("temporal-reasoning",)
    knowledge_update_categories = ("knowledge-update",)  # ``score`` gives them fresh@5

    # The turns each question's ranking holds: the paper's session metrics walk the turn ranking until k
    # distinct sessions (``paper_session_metrics``), past k turns; 50 is the paper's deepest k.
    ranking_depth = 50

    def __init__(self, protocol: str = "official") -> None:
        if protocol not in PROTOCOLS:
            raise BadInputError(f"longmemeval: unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
        self.protocol = protocol
        self._notes: list[str] = []
        self._selection: dict[str, Any] = {}

    @property
    def result_name(self) -> str:
        return f"longmemeval-{self.protocol}"

    @property
    def work_subdir(self) -> str:
        return TURN_RECORDS[self.protocol]  # the protocol decides which turns are records

    def load(self, data: Path) -> list[LMEQuestion]:
        """The questions the protocol scores; the malformed ones and the counts left out go to ``load_notes``."""
        loaded = read_longmemeval(data).require_questions()
        excluded: dict[str, list[str]] = {ABSTENTION: [], NO_TARGET: [], NO_USER_TURN: []}
        kept = []
        for question in loaded.questions:
            reason = excluded_because(self.protocol, question)
            if reason is None:
                kept.append(question)
            else:
                excluded[reason].append(question.question_id)
        self._selection = {"in_file": len(loaded.questions) + len(loaded.problems), "malformed": len(loaded.problems),
                           "scored": len(kept), "excluded_abstention": len(excluded[ABSTENTION]),
                           "excluded_no_target": len(excluded[NO_TARGET])}
        if self.protocol == "mempalace":
            self._selection["excluded_no_user_turn"] = len(excluded[NO_USER_TURN])
            left_out = f"{len(excluded[NO_USER_TURN])} with no user turn (MemPalace's script skips an empty corpus)"
        else:
            left_out = (f"{len(excluded[ABSTENTION])} abstention (_abs)"
                        + (f", {len(excluded[NO_TARGET])} with no target turn on the user side (the paper's "
                           "ignored_qs_no_target)" if self.protocol == "official" else ""))
        self._notes = [*(f"skipped: {line}" for line in loaded.problems),
                       f"{self.result_name}: {data}: {self._selection['in_file']} questions, {len(kept)} scored; left "
                       f"out: {left_out}" + (f", {len(loaded.problems)} malformed" if loaded.problems else "")]
        return kept

    def load_notes(self) -> list[str]:
        return list(self._notes)

    def ingest(self, conversation: LMEQuestion) -> BenchmarkSource:
        return BenchmarkSource(conversation.question_id, "question.json", json.dumps([conversation.raw]),
                               f"longmemeval-turns-{TURN_RECORDS[self.protocol]}")

    def questions(self, conversation: LMEQuestion) -> list[BenchmarkQuestion]:
        _, gold_turns = documents(conversation, "turn", self.protocol)
        _, gold_sessions = documents(conversation, "session", self.protocol)
        return [BenchmarkQuestion(conversation.question_id, conversation.question, frozenset(gold_turns),
                                  frozenset(gold_sessions), conversation.question_type,
                                  as_of=conversation.question_date or None, answer=conversation.answer)]

    def texts(self, conversation: LMEQuestion) -> list[str]:
        """Its turn records' texts (the protocol's turns, as ``_turn_items`` writes them) and its question."""
        return [doc.text for doc in documents(conversation, "turn", self.protocol)[0]] + [conversation.question]

    def session_of(self, conversation: LMEQuestion, turn_id: str) -> str:
        return turn_id.rsplit("_", 1)[0]  # turn documents are "<session id>_<n>"

    def score(self, question: BenchmarkQuestion, ranked_turns: Sequence[str], conversation: LMEQuestion) -> QuestionScore:
        scored = super().score(question, ranked_turns, conversation)
        if self.protocol == "official":  # the paper's metrics, also for a question without gold turns
            scored = replace(scored, turn=paper_turn_metrics(ranked_turns, question.gold_turns) | {
                "mrr": metrics.mrr(ranked_turns, question.gold_turns)},
                session=paper_session_metrics(ranked_turns, question.gold_turns,
                                              lambda t: self.session_of(conversation, t))
                | {"mrr": metrics.mrr(scored.sessions, question.gold_sessions)})
        elif self.protocol == "mempalace":  # MemPalace's metrics, of the turns and of their sessions
            scored = replace(scored, turn=mempalace_metrics(ranked_turns, question.gold_turns) | {
                "mrr": metrics.mrr(ranked_turns, question.gold_turns)},
                session=mempalace_metrics(scored.sessions, question.gold_sessions)
                | {"mrr": metrics.mrr(scored.sessions, question.gold_sessions)})
        return self._fresh(scored, question, conversation)

    def score_sessions(self, question: BenchmarkQuestion, ranked_sessions: Sequence[str],
                       conversation: LMEQuestion) -> QuestionScore:
        """A ranking of session documents (a peer's, as MemPalace's own benchmark ranks them): session metrics
        only (``mempalace_metrics`` under the mempalace protocol, else the base ones)."""
        sessions = metrics.dedupe(ranked_sessions)
        score = (mempalace_metrics(sessions, question.gold_sessions) if self.protocol == "mempalace"
                 else metrics.score(sessions, question.gold_sessions))
        scored = QuestionScore(turns=list(sessions), sessions=sessions, turn=None,  # its hits: the sessions
                               session=score | {"mrr": metrics.mrr(sessions, question.gold_sessions)})
        return self._fresh(scored, question, conversation)

    def _fresh(self, scored: QuestionScore, question: BenchmarkQuestion, conversation: LMEQuestion) -> QuestionScore:
        """A knowledge-update question's score with its freshness (fresh@5 of its sessions), another's as it is."""
        if conversation.question_type != "knowledge-update":
            return scored
        evidence = evidence_by_time(conversation, question.gold_sessions)
        return replace(scored, extra=freshness(scored.sessions, evidence, FRESHNESS_K))

    def result_fields(self, data: Path, conversations: Sequence[LMEQuestion],
                      scores: Sequence[QuestionScore]) -> dict[str, Any]:
        fresh_rows = [s.extra for s in scores if s.extra is not None]
        return {"protocol": self.protocol, "data": str(data), "freshness": mean(fresh_rows) | {"n": len(fresh_rows)},
                "headline": HEADLINES[self.protocol], "selection": dict(self._selection)}


def evaluate_longmemeval(data: Path, architectures: list[Architecture], work_dir: Path, protocol: str = "official",
                         limit: int | None = None, k: int = 10,
                         log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    return evaluate(LongMemEval(protocol), data, architectures, work_dir, limit=limit, k=k, log=log)
