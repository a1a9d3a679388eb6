"""`synthex eval locomo`: the LoCoMo benchmark (turn and session level retrieval), on ``evals.benchmarks``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.architectures import Architecture
from evals.benchmarks import Benchmark, BenchmarkQuestion, BenchmarkSource, evaluate
from evals.benchmarks.locomo.data import Conversation, load_locomo
from evals.benchmarks.locomo.scoring import add_question, category_name  # noqa: F401 - add_question: for the scripts
from evals.peers import peers_of
from synthex.core.naming import path_segment
from synthex_resources.embedder import Embedder

# The 7-conversation dev split beside the repository (the Dagster eval asset's default data).


@dataclass(frozen=True)
class LoCoMoSample:
    """One parsed conversation, the file's samples as read (its payload is its own sample, verbatim) and the
    session of each turn (dia_id)."""

    conversation: Conversation
    samples: list[dict[str, Any]]
    session_by_turn: dict[str, str]


def sample_payload(sample_id: str, raw: list[dict[str, Any]]) -> str:
    """The file's samples with this ``sample_id``, as the JSON file its workspace ingests."""
    return json.dumps([s for s in raw if s.get("sample_id") == sample_id])


class LoCoMo(Benchmark[LoCoMoSample]):
    """LoCoMo (``locomo10.json``, Maharana et al., ACL 2024): each conversation ingested as one record per
    turn (``locomo-turns``); the questions with evidence scored against their evidence turns."""

    name = "locomo"
    title = "LoCoMo"
    description = "LoCoMo retrieval: each conversation ingested through the architecture's sources."
    data_help = "The official locomo10.json (or a subset in the same format)."
    supports_qa = True
    peers = peers_of("locomo")
    temporal_categories = ("temporal",)  # category 2; LoCoMo has no knowledge-update questions

    def load(self, data: Path) -> list[LoCoMoSample]:
        conversations = load_locomo(data)  # validates; raises a one-line SourceError
        raw = json.loads(Path(data).read_text(encoding="utf-8"))
        return [LoCoMoSample(conv, raw, {t.dia_id: t.session_id for t in conv.turns}) for conv in conversations]

    def ingest(self, conversation: LoCoMoSample) -> BenchmarkSource:
        sample_id = conversation.conversation.sample_id
        return BenchmarkSource(sample_id, "conversation.json", sample_payload(sample_id, conversation.samples),
                               "locomo-turns")

    def questions(self, conversation: LoCoMoSample) -> list[BenchmarkQuestion]:
        """``<sample_id>/q<index in the sample's qa list>``; items without evidence cannot be scored."""
        conv = conversation.conversation
        return [BenchmarkQuestion(f"{conv.sample_id}/q{index}", q.question, frozenset(q.evidence),
                                  frozenset(q.evidence_sessions), category_name(q),
                                  answer=None if q.adversarial else q.answer)  # adversarial: no answer to grade
                for index, q in enumerate(conv.questions) if q.evidence]

    def session_of(self, conversation: LoCoMoSample, turn_id: str) -> str:
        return conversation.session_by_turn.get(turn_id, "?")


def ingest_conversation(arch: Architecture, sample_id: str, raw: list[dict[str, Any]], work_dir: Path,
                        embedder: Embedder | None = None):
    """One conversation fed through the architecture's pipeline, in its own workspace (as ``evaluate`` does;
    for the scripts that search it themselves)."""
    return arch.ingest(work_dir / arch.work_key / path_segment(sample_id), "conversation.json",
                       sample_payload(sample_id, raw), "locomo-turns", embedder)


def evaluate_locomo(data: Path, architectures: list[Architecture], work_dir: Path, limit: int | None = None,
                    k: int = 10, log: Callable[[str], None] = print, qa: bool = False,
                    qa_context: int = 5) -> list[dict[str, Any]]:
    """Retrieval metrics per architecture; with ``qa``, also answer + judge accuracy (real LLM only)."""
    return evaluate(LoCoMo(), data, architectures, work_dir, limit=limit, k=k, log=log, qa=qa, qa_context=qa_context)
