"""Benchmarks: one interface, one registry, one runner.

A benchmark is a class on ``Benchmark`` with four parts:

- ``load(data)``: parse the data file into conversations (the benchmark's own type: a LoCoMo sample, a
  LongMemEval question with its haystack...); bad data is a ``SourceError`` of one line naming the file;
- ``ingest(conversation)``: the conversation as a source file (``BenchmarkSource``: payload and source
  format) that an architecture's pipeline reads; the records must carry the turn id at ``turn_id_field``;
- ``questions(conversation)``: ``BenchmarkQuestion``\\ s, each with its gold turn and session ids, its
  category and, when the benchmark has one, the date it is asked;
- ``score(question, ranked_turns, conversation)``: per-question metrics at turn and session level
  (recall_any/all@k, nDCG, MRR: ``evals.metrics``); ``session_of`` says which session a turn is in.

Benchmarks are registered through the ``register_benchmarks(registry)`` hook of a plugin module
(``synthex.plugins``): the evals plugin registers LoCoMo and LongMemEval that way, and any installed
plugin adds its own. ``synthex eval <name>`` and the Dagster eval assets are built from the registry
(``evals.commands``, ``evals.dagster_evals``). ``evaluate`` runs one benchmark over architectures.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from inspect import isabstract
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from evals import metrics
from evals.scoring import QuestionScore, Tally
from synthex.core import hookspecs
from synthex.core.errors import BadInputError
from synthex.core.naming import path_segment
from synthex.core.plugins import PluginFailure, Registry, populate
from synthex_resources.search.rerankers import Rerankers

if TYPE_CHECKING:
    from evals.architectures import Architecture
    from evals.eval_progress import ConversationDone
    from evals.shared_embedder import MemoEmbedder

C = TypeVar("C")  # a benchmark's conversation: what one workspace ingests and its questions are asked of
HOOK = hookspecs.register_benchmarks
PLUGIN_MODULE = "evals.plugin"
EMBEDDING_CACHE = "embedding-cache"  # the folder under an eval dir keeping every text's vector across eval runs
# Threads one workspace's questions are searched on. Two: the lexical leg's FTS query waits ~8 ms per search
# outside the GIL (half the warm dev7 eval's search time, docs/benchmarks.md), so a second search overlaps it.
SEARCH_WORKERS = 2
Q = TypeVar("Q")
H = TypeVar("H")


@dataclass(frozen=True)
class BenchmarkQuestion:
    """One question as every benchmark gives it to the runner."""

    question_id: str  # stable across runs and architectures: the key of its eval_results row
    text: str
    gold_turns: frozenset[str]  # turn ids (``turn_id_field`` of the records); empty: scored at session level only
    gold_sessions: frozenset[str]
    category: str
    as_of: str | None = None  # ISO date the question is asked ("last week" is resolved against it)
    answer: str | None = None  # the gold answer for ``--qa``; None: nothing to grade (LoCoMo's adversarial items)


@dataclass(frozen=True)
class BenchmarkSource:
    """A conversation as a file an architecture's pipeline reads (``Architecture.ingest``)."""

    key: str  # names the conversation's workspace (one per conversation and architecture)
    filename: str
    payload: str
    source_format: str  # a format ``pipeline.source(format=...)`` knows: built-in ("jsonl") or registered


@dataclass(frozen=True)
class BenchmarkOption:
    """A benchmark's own command-line option (``--<name>``), passed to its constructor by keyword."""

    name: str
    help: str
    default: str
    choices: tuple[str, ...] = ()  # empty: any string


class Benchmark(ABC, Generic[C]):
    """Subclass, set the class attributes, implement ``load``, ``ingest``, ``questions`` and ``session_of``;
    register the class under ``name`` in a ``register_benchmarks(registry)`` hook. The constructor takes
    the ``options`` by keyword, each with its default, and rejects a bad value (``BadInputError``) before
    any work."""

    name: ClassVar[str]  # `synthex eval <name>`; the eval work folder
    title: ClassVar[str]  # in charts and asset descriptions ("LoCoMo")
    description: ClassVar[str]  # the command's help
    data_help: ClassVar[str] = "The benchmark's data file."
    unit: ClassVar[str] = "conversations"  # what --limit counts: the items ``load`` returns
    options: ClassVar[tuple[BenchmarkOption, ...]] = ()
    supports_qa: ClassVar[bool] = False  # offers --qa: answer from the top hits, judged by the configured LLM
    peers: ClassVar[tuple[str, ...]] = ()  # other systems ``evaluate_peer`` runs on the same data
    category_level: ClassVar[Literal["turn", "session"]] = "turn"  # the level ``by_category`` averages
    turn_id_field: ClassVar[str] = "chat.message_id"  # the record metadata holding a turn's id
    progress_every: ClassVar[int] = 1  # log after every N conversations
    # The scorecard (``evals.scorecard``): the question categories of temporal accuracy, and those whose
    # ``score`` gives freshness figures (``fresh@k`` in ``QuestionScore.extra``); empty: not measurable here.
    temporal_categories: ClassVar[tuple[str, ...]] = ()
    knowledge_update_categories: ClassVar[tuple[str, ...]] = ()
    # How many turns each question's ranking holds (searched with k = this, when above the eval's k): a
    # benchmark whose session metrics walk the turn ranking past k turns (LongMemEval's turn2session) needs
    # a deeper one. 0: the eval's k.
    ranking_depth: ClassVar[int] = 0

    @property
    def result_name(self) -> str:
        """The ``benchmark`` field of its results (and of their eval_results rows)."""
        return self.name

    @property
    def work_subdir(self) -> str:
        """A folder under the work dir that keeps apart workspaces the options make different."""
        return ""

    @abstractmethod
    def load(self, data: Path) -> Sequence[C]:
        """The conversations in ``data``; bad data: one-line ``SourceError`` naming the file and the item."""

    @abstractmethod
    def ingest(self, conversation: C) -> BenchmarkSource:
        """The conversation as a source file for an architecture's pipeline."""

    @abstractmethod
    def questions(self, conversation: C) -> list[BenchmarkQuestion]:
        """The questions asked of this conversation (only those that can be scored)."""

    @abstractmethod
    def session_of(self, conversation: C, turn_id: str) -> str:
        """The session a turn belongs to (a benchmark without sessions: the conversation's id)."""

    def score(self, question: BenchmarkQuestion, ranked_turns: Sequence[str], conversation: C) -> QuestionScore:
        """Turn-level metrics against the gold turns (none when there are none), session-level metrics of the
        turns' sessions in rank order against the gold sessions."""
        sessions = metrics.dedupe(self.session_of(conversation, t) for t in ranked_turns)
        return QuestionScore(
            turns=list(ranked_turns), sessions=sessions,
            turn=metrics.score(ranked_turns, question.gold_turns) if question.gold_turns else None,
            session=metrics.score(sessions, question.gold_sessions))

    def texts(self, conversation: C) -> list[str]:
        """The texts its workspace will embed whatever the architecture (its leaf turns, its questions), embedded
        ahead of its ingest (``EmbedAheadOfWorkspaces``); none by default (nothing is embedded ahead)."""
        return []

    def load_notes(self) -> Sequence[str]:
        """Lines about the last ``load`` for the eval's log (questions skipped as malformed, how many each
        protocol scores); none by default."""
        return ()

    def result_fields(self, data: Path, conversations: Sequence[C], scores: Sequence[QuestionScore]) -> dict[str, Any]:
        """Fields of one architecture's result after its identity (benchmark, pipeline, ..., mode)."""
        return {"data": str(data), "conversations": len(conversations)}

    def evaluate_peer(self, peer: str, data: Path, work_dir: Path, *, limit: int | None, k: int,
                      log: Callable[[str], None], embedding_cache: Path | None = None) -> dict[str, Any]:
        """One of ``peers`` fed the same data and scored the same way: a result like ``evaluate``'s, from the
        peer's runner for this benchmark in ``evals.peers.PEERS`` (a plugin's benchmark with peers of its own
        overrides this). ``embedding_cache``: the eval's (``evaluate``'s), for a peer that embeds through
        Synthex's model."""
        from evals.peers import PEERS, peer_runner

        if peer not in self.peers or self.name not in getattr(PEERS.get(peer), "runners", {}):
            raise BadInputError(f"benchmark {self.name!r} has no peer {peer!r}; "
                                f"peers: {', '.join(self.peers) or 'none'}")
        return peer_runner(peer, self.name)(self, data, work_dir, limit=limit, k=k, log=log,
                                            embedding_cache=embedding_cache)


def benchmark_registry() -> Registry[type[Benchmark]]:
    """Every registered benchmark class by name: the evals plugin's built-ins, then installed plugins'
    (a plugin whose hook fails is on ``.failures``). Built fresh per call: callers hold it for a command."""
    registry: Registry[type[Benchmark]] = Registry("benchmark")
    # The evals plugin is named as a built-in, so a source tree on PYTHONPATH (no entry point installed) has
    # its benchmarks too; where its entry point is installed as well, discovery loads it once.
    populate(registry, HOOK, builtins=(PLUGIN_MODULE,))
    valid: Registry[type[Benchmark]] = Registry("benchmark")
    valid.failures = list(registry.failures)
    for name, item in registry.items():
        problem = _not_a_benchmark(name, item)
        if problem is None:
            valid.register(name, item)
        else:  # reported like a plugin that failed to load; the other benchmarks stay usable
            valid.failures.append(PluginFailure(name, getattr(item, "__module__", "?"), f"{HOOK}: {problem}"))
    return valid


def _not_a_benchmark(name: str, item: object) -> str | None:
    """Why ``item`` registered as ``name`` cannot be run (None: it can)."""
    if not (isinstance(item, type) and issubclass(item, Benchmark)) or isabstract(item):
        return f"{item!r} is not a concrete subclass of evals.benchmarks.Benchmark"
    missing = [attr for attr in ("name", "title", "description") if not hasattr(item, attr)]
    if missing:
        return f"{item.__name__} does not set {', '.join(missing)}"
    if item.name != name:
        return f"{item.__name__} is registered as {name!r} but its name is {item.name!r}"
    return None


def evaluate(benchmark: Benchmark[Any], data: Path, architectures: list[Architecture], work_dir: Path, *,
             limit: int | None = None, k: int = 10, log: Callable[[str], None] = print, qa: bool = False,
             qa_context: int = 5, progress: Callable[[ConversationDone], None] | None = None,
             embedding_cache: Path | None = None, embedder: MemoEmbedder | None = None,
             search_workers: int = SEARCH_WORKERS, embed_ahead: int = 2,
             engine: str = "in-process") -> list[dict[str, Any]]:
    """One result per architecture: each conversation ingested through the architecture's pipeline in its own
    workspace, each question searched there, its ranked turns scored. ``qa``: also answer from the top
    ``qa_context`` hits and judge (a real LLM only; refused before any work). ``progress`` gets a
    ``ConversationDone`` (with an ETA) after every ``progress_every``-th conversation and the last; None:
    those are logged as lines through ``log``. ``embedding_cache``: a folder keeping every text's vector
    across eval runs (``evals.shared_embedder.EmbeddingCache``; None: this run's memory only). ``embedder``:
    the memo every workspace embeds through (its ``computed`` counts what the model embedded); None: one
    over the configured model with ``embedding_cache``. ``search_workers``: threads a workspace's questions
    are searched on (``searched_in_order``; 1: one after another); figures are the same either way.
    ``embed_ahead``: how many conversations ahead of the one ingested ``benchmark.texts`` are embedded on a
    background thread (0: none); figures are the same either way. ``engine``: who executes the workspaces'
    runs (a ``synthex.app.facade.RunEngine`` value; "dagster": a Dagster instance and run per workspace, as
    ``synthex run``); figures are the same either way."""
    from evals.architectures import (
        IngestMarker,
        LeafCache,
        ranked_leaf_keys,
        records_state,
        unambiguous_records,
    )
    from evals.eval_progress import EtaClock
    from evals.formats import benchmark_parser_versions
    from evals.scorecard import ProvenanceCheck, ScorecardCollector, source_steps_of
    from evals.shared_embedder import EmbedAheadOfWorkspaces, MemoEmbedder
    from synthex.app.facade import RunEngine
    from synthex_resources.search.engine import SearchEngine

    run_engine = RunEngine(engine)  # a bad name fails here, before any work

    if qa:
        if not benchmark.supports_qa:
            raise BadInputError(f"benchmark {benchmark.name!r} has no QA scoring (--qa)")
        from synthex_resources.llm import LLMConfig

        if LLMConfig().is_offline():
            from evals.qa import qa_accuracy

            qa_accuracy([])  # raises the clear "needs a real LLM" error before any work
    conversations = list(benchmark.load(data))[: limit or None]
    for line in benchmark.load_notes():
        log(line)
    depth = max(k, benchmark.ranking_depth)  # the turns each question's ranking holds (metrics stay @k)
    results = []
    # One model, and one embedding per distinct text, for every workspace (and, with the cache, every run).
    if embedder is None:
        embedder = MemoEmbedder.with_disk_cache(embedding_cache, warn=log)
    rerankers = Rerankers()  # a reranker's model loads once for every workspace
    parser_versions = benchmark_parser_versions()  # as the parsers' files are now, for every workspace
    for arch in architectures:
        tally = Tally(category_level=benchmark.category_level)
        scores: list[QuestionScore] = []
        qa_items = []
        pipeline_name = arch.name
        card = ScorecardCollector(benchmark, k)
        clock = EtaClock(benchmark.result_name, arch.name, len(conversations))
        texts_of = [benchmark.texts(c) for c in conversations] if embed_ahead > 0 else []

        def prepare(index: int, arch: Architecture = arch) -> None:
            """Conversation ``index``'s workspace ingested ahead (on the embedding thread), so the texts only this
            architecture embeds are embedded while the current workspace is searched; the loop's own ingest of
            it then finds it done (``IngestMarker``)."""
            source = benchmark.ingest(conversations[index])
            arch.ingest(workspace_root(benchmark, work_dir, arch, source), source.filename, source.payload,
                        source.source_format, embedder, rerankers=rerankers, engine=run_engine,
                        parser_versions=parser_versions).close()

        # From the second conversation on: the first one's run is timed by the loop (the scorecard).
        ahead = (EmbedAheadOfWorkspaces(embedder, texts_of, ahead=embed_ahead, prepare=prepare, prepare_from=1)
                 if any(texts_of) else None)
        try:
            for index, conversation in enumerate(conversations, start=1):
                if ahead is not None:
                    ahead.reached(index - 1)
                    # The model's work is the cost here; its thread embeds in length-sorted chunks while the
                    # workspace would embed what is left a partition at a time (slower per text).
                    ahead.wait_embedded(index - 1)
                source = benchmark.ingest(conversation)
                root = workspace_root(benchmark, work_dir, arch, source)
                fresh = index == 1 and not (root / ".synthex").exists()  # its first run is timed (the scorecard)
                run_times: list[float] = []
                pipe = arch.ingest(root, source.filename, source.payload, source.source_format, embedder,
                                   run_times=run_times, rerankers=rerankers, engine=run_engine,
                                   parser_versions=parser_versions)
                if index == 1:
                    time_rerun(card, pipe, arch, fresh, sum(run_times), run_engine)
                provenance = ProvenanceCheck(source_steps_of(pipe))
                pipeline_name = pipe.name
                questions = benchmark.questions(conversation)
                leaf_cache = LeafCache(partial(unambiguous_records, pipe))  # read once for all its questions
                # One table version for all its questions: the dataset and its index caches stay warm across
                # searches instead of reopening per search (docs/benchmarks.md). A search that writes (the first
                # one embeds the leaf vectors) clears the pin, so the next reads the version it wrote.
                with pipe.store().pinned_version() as pin:
                    search = partial(_search_question, pipe, arch, depth, pin)
                    for question, hits in zip(questions, searched_in_order(questions, search, search_workers),
                                              strict=True):
                        card.check_provenance(provenance, hits)
                        turns = ranked_leaf_keys(hits, question.text, lambda r: r.meta(benchmark.turn_id_field), depth,
                                                 leaf_cache)
                        scored = benchmark.score(question, turns, conversation)
                        scores.append(scored)
                        card.record(question, scored)
                        tally.record(scored, question.gold_turns, question.gold_sessions, question.category,
                                     question_id=question.question_id, question=question.text)
                        if qa and question.answer is not None:
                            from evals.qa import QAItem

                            qa_items.append(QAItem(question.text, question.answer, [h.content for h in hits[:qa_context]],
                                                   question.category))
                # The first search rewrote the leaf rows (their vectors): the FTS index is rebuilt on the live rows
                # (same statistics: the texts did not change), so the next eval's lexical leg is the postings.
                SearchEngine(pipe.store()).settle_lexical_index()
                IngestMarker(root).settle(records_state(pipe))  # what its searches wrote is part of this ingest
                pipe.close()  # its store, caches and Dagster instance: one workspace held at a time
                embedder.save()  # after each workspace: a killed eval keeps what it embedded
                done = clock.done(index, source.key, len(questions))
                if index % benchmark.progress_every == 0 or done.last:  # LongMemEval: every 5th of 500 items
                    if progress is not None:
                        progress(done)
                    else:
                        log(f"  {done.line()}")
        finally:  # stops the embedding thread, also when a workspace raised
            if ahead is not None:
                ahead.close()
        head: dict[str, Any] = {}
        if benchmark.supports_qa:
            from evals.qa import qa_accuracy

            head["qa"] = qa_accuracy(qa_items) if qa else None
        # The embedding model is part of what was measured: two runs that differ only in it stay apart.
        head |= {"benchmark": benchmark.result_name, "pipeline": pipeline_name, "architecture": arch.name,
                 "branch": arch.branch, "mode": arch.mode, "embedder": embedder.name}
        results.append(tally.result(**head, **benchmark.result_fields(data, conversations, scores),
                                    scorecard=card.scorecard().to_dict()))
    return results


def workspace_root(benchmark: Benchmark[Any], work_dir: Path, arch: Architecture, source: BenchmarkSource) -> Path:
    """The folder of ``source``'s workspace for ``arch`` (architectures sharing a ``work_key`` share it)."""
    return work_dir / benchmark.work_subdir / arch.work_key / path_segment(source.key)


def searched_in_order(questions: Sequence[Q], search: Callable[[Q], H], workers: int = SEARCH_WORKERS) -> Iterator[H]:
    """``search`` of each question, yielded in question order. The first is searched alone (it may write: it
    embeds the workspace's leaf vectors), the rest on ``workers`` threads while the caller scores the ones
    already yielded; ``workers`` 1: one after another on this thread. A search that raises raises here, at
    its turn, and the searches not started are cancelled."""
    if workers <= 1 or len(questions) <= 2:
        yield from map(search, questions)
        return
    yield search(questions[0])
    # Executor.map yields in order and raises at the failing item's turn; leaving the block (also when the
    # caller stops early) cancels what has not started and waits for the rest: nothing left running.
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="synthex-eval-search") as pool:
        yield from pool.map(search, questions[1:])


def _search_question(pipe: Any, arch: Architecture, k: int, pin: Any, question: BenchmarkQuestion) -> Any:
    """One question's hits in its workspace, reading the table version ``pin`` holds (the loop's, which a
    worker thread does not inherit: the store keeps the pin per thread)."""
    with pipe.store().pinned_version(pin):
        return pipe.search(question.text, step=arch.steps, k=k, mode=arch.mode, branch=arch.branch,
                           as_of=question.as_of, rerank=arch.rerank)


def time_rerun(card: Any, pipe: Any, arch: Architecture, fresh: bool, first_run_s: float, engine: Any = None) -> None:
    """The scorecard's incremental speedup: when the first conversation's workspace was fresh, its pipeline
    is run once more with nothing changed (by ``engine``, the first run's) and both run times go to ``card``
    (``ScorecardCollector``)."""
    from evals.architectures import eval_run
    from synthex.app.facade import RunEngine
    from synthex.core.naming import MAIN

    if not fresh:
        card.speedup_reason = ("the workspaces were ingested by an earlier eval (no first run to time); "
                               "delete .synthex/evals/work to measure it")
        return
    started = time.perf_counter()
    for branch in ([MAIN] if arch.branch != MAIN else []) + [arch.branch]:
        eval_run(pipe, branch, engine or RunEngine.IN_PROCESS)
    card.first_run_s, card.rerun_s = first_run_s, time.perf_counter() - started
