"""What an eval scores: a memory architecture (a pipeline on a branch), fed the benchmark's data
through its sources and queried through its search.

- ``raw-bm25`` / ``raw-dense`` / ``raw-hybrid``: the leaf records searched directly, no processing
  (``raw-<mode>`` takes any search strategy of the registry, e.g. ``raw-hybrid-equal``).
- ``contextual-hybrid``: each turn indexed with the turn before it (a plain-Python transform).
- ``conversational``: the same pipeline with a stemmed BM25 index, searched with the
  ``conversational`` recipe (turns scored through their context records and their own text, smoothed
  over adjacent turns, date prior, speakers' names dropped from the query). No model anywhere.
- ``conversational-enriched``: ``conversational`` with each context record also indexed with the turn's
  entities, resolved dates and topics (``synthex.core.enrich``, no model).
- ``hierarchical-conversational``: ``conversational``'s turns plus key aggregates of them by speaker,
  entity and topic (``pipeline.aggregate(by=...)``, each a deterministic profile of its members:
  ``synthex.core.digest.key_profile``, no model), searched with the ``hierarchical`` strategy (the
  aggregates scored at their altitude lift the turns they gather, search/strategies/hierarchical_drill_down.py).
- ``hierarchical-speaker``: the same records (same workspace), searched with ``hierarchical-speaker``:
  also the turns of the one speaker the question names x 1.15 (multi-hop evidence is mostly one speaker's).
- ``hierarchical-expanded``: the same records, searched with ``hierarchical-expanded``: also the turns
  holding the question's words or their nearest words in the memory's vocabulary ranked higher
  (search/strategies/hierarchical_expanded.py).
- ``hierarchical-fresh``: the same records and ranking, then, for a question about the present state, among the
  top 5 hits the newer of two that say the same thing first (search/strategies/hierarchical_fresh.py: knowledge updates).
- ``hierarchical-fresh-asker``: the same, its gate also open for a question about the asker's own present state
  ("How many bikes do I own?"); ``hierarchical-reranked-fresh-asker``: the cross-encoder's order first, then that.
- any other name: the project's own pipeline (``pipeline.py``) on that branch, its sources pointed at
  the benchmark data (a source of another memory system's file reads the turns as that system's:
  ``into_workspace``); hits are drilled down to their leaves to score turns. ``branch@recipe``
  searches that branch with another search strategy of the registry (e.g. ``main@conversational``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from evals.peers import PEER_NAMES
from synthex import Pipeline
from synthex.app.facade import RunEngine
from synthex.core.atomic_file import write_file_atomic
from synthex.core.naming import MAIN
from synthex.core.record import Record
from synthex_resources.embedder import Embedder, EmbedderConfig
from synthex_resources.search.indexes.sidecar import TableState
from synthex_resources.search.tokenize import tokenize

if TYPE_CHECKING:
    from synthex.core.definition import PipelineDefinition
    from synthex.core.steps import SourceStep
    from synthex_resources.search.rerankers import Rerankers

# The key aggregates of ``hierarchical-conversational`` (named key functions of ``pipeline.aggregate(by=)``).
# Not "session": a session's aggregate lifted every turn of the best-matching session and cost recall
# on LoCoMo (--limit 2, evals/ablations/hierarchical.py); the turn leg's neighbour credit already covers it.
HIERARCHY_KEYS = ("speaker", "entity", "topic")


@dataclass
class Architecture:
    name: str
    build: Callable[[Path, Path, str], Pipeline]  # (benchmark file, project root, source format) -> pipeline
    mode: str = "hybrid"
    branch: str = "main"
    steps: list[str] | None = None  # None: the pipeline's search output steps
    workspace: str = ""  # architectures with the same pipeline share ingested data (default: the name)
    rerank: str | None = None  # a second stage of search/rerankers.py (None: the mode's ranking)

    @property
    def work_key(self) -> str:
        return self.workspace or self.name

    def ingest(self, root: Path, filename: str, payload: str, fmt: str, embedder: Embedder | None = None,
               run_times: list[float] | None = None, rerankers: Rerankers | None = None,
               engine: RunEngine = RunEngine.IN_PROCESS,
               parser_versions: Mapping[str, str] | None = None) -> Pipeline:
        """Feed ``payload`` (benchmark JSON) through this architecture's pipeline in workspace ``root``.

        The file is rewritten only when its content changed, so a re-run is incremental like any run.
        The caller closes the returned pipeline when done with it (``pipe.close()``). ``run_times``: the
        seconds of each run are appended to it (opening the store is not counted). ``engine``: who executes
        the runs (``eval_run``); the records are the same either way. ``parser_versions``: the benchmark
        formats' parser versions as this eval read them when it started (``benchmark_parser_versions``; None:
        read now), so an edit of a parser file during a long eval is not stamped on what the old code made.
        """
        from evals.formats import benchmark_parser_versions

        parser = (benchmark_parser_versions() if parser_versions is None else parser_versions).get(fmt)
        if IngestMarker(root).made_by_another_parser(parser):
            discard_workspace(root)  # its records came from another parser: rebuilt cold, ids as any cold build
        drop_discarded(root)
        root.mkdir(parents=True, exist_ok=True)
        data = root / filename
        if not data.exists() or data.read_text() != payload:
            data.write_text(payload)
        pipe = self.build(data, root, fmt)
        pipe.open(embedder=embedder, rerankers=rerankers)
        branches = ([MAIN] if self.branch != MAIN else []) + [self.branch]  # a branch reads the steps it does
        marker = IngestMarker(root)                                          # not override via main
        inputs = ingest_fingerprint(pipe, branches, payload, fmt, embedder)
        if marker.unchanged(inputs, records_state(pipe)):
            return pipe  # what the last completed ingest left, untouched since: a run would find nothing to do
        for branch in branches:
            started = time.perf_counter()
            eval_run(pipe, branch, engine)
            if run_times is not None:
                run_times.append(time.perf_counter() - started)
        marker.write(inputs, records_state(pipe), parser)
        return pipe


def discard_workspace(root: Path) -> None:
    """Move a workspace aside (one rename: a kill leaves it either in place or aside, never half gone), then
    delete it; ``drop_discarded`` finishes a delete a kill cut short. Each discard has a name of its own, so
    an aside folder a delete could not remove (an unreadable file) never blocks the next rename."""
    drop_discarded(root)
    os.replace(root, root.parent / f".{root.name}.discarded.{os.getpid()}-{time.time_ns()}")
    drop_discarded(root)


def drop_discarded(root: Path) -> None:
    """Remove what discards of ``root`` left aside (a link or a file is unlinked, a link never followed)."""
    for aside in root.parent.glob(f".{root.name}.discarded.*"):
        if aside.is_symlink() or not aside.is_dir():
            aside.unlink(missing_ok=True)
        else:
            shutil.rmtree(aside, ignore_errors=True)


def eval_run(pipe: Pipeline, branch: str, engine: RunEngine) -> None:
    """One run of a workspace's branch. ``RunEngine.IN_PROCESS`` (the evals' default): the dirty partitions
    executed in this process with no Dagster instance or run, and no change-tracking (CDC) state kept for the
    sources (no sensor ever ticks on an eval workspace): each question's haystack is its own memory, and these
    were most of a haystack's cost besides the model (docs/benchmarks.md). ``DAGSTER``: as ``synthex run``
    does. Same records either way (tests/test_in_process_runs.py)."""
    if engine is RunEngine.IN_PROCESS:
        pipe.app.run(branch=branch, engine=engine, track_changes=False)
    else:
        pipe.run(branch=branch)


def records_state(pipe: Pipeline) -> TableState | None:
    """Which rows the workspace's records table holds now (its fragments' data and deletion files; None: no
    table). An index update (the first search folding new rows into the FTS index) leaves it equal."""
    from synthex_resources.record_store import RECORDS

    ds = pipe.store().dataset(RECORDS)
    return TableState.of(ds) if ds is not None else None


def ingest_fingerprint(pipe: Pipeline, branches: list[str], payload: str, fmt: str,
                       embedder: Embedder | None) -> str:
    """What a workspace's ingest depends on: the benchmark file's content and format, each run branch's
    definition (every step's effective version, i.e. its code and its inputs' versions all the way up,
    the ingredients of the planner's materialization keys, and the pipeline's settings: outputs, lexical
    stemming, limits; a source's version holds its format parser's version when it is a ``VersionedParser``,
    so such a changed parser is a changed definition) and the embedding model. Equal fingerprints and an untouched table: a run
    plans nothing."""
    from synthex.core.hashing import fingerprint, stable_hash

    definitions = []
    for branch in branches:
        definition = pipe.app.use_branch(branch)
        definitions.append([branch, definition.effective_versions(), definition.to_toml_dict()])
    model = (embedder.name, embedder.dim) if embedder is not None else EmbedderConfig().resolved_kind()
    return stable_hash("eval-ingest/v1", fingerprint(payload), fmt, definitions, model)


class IngestMarker:
    """``.synthex/eval-ingest.json`` in a workspace: the inputs' fingerprint of its last completed ingest and
    the rows that ingest left in the records table (``TableState``: fragments with their data and deletion
    files, the search sidecar's test for "same rows"). A later eval whose fingerprint and rows are the same
    skips the runs (each a plan over the source and the store: ~0.5 s per conversation warm, more under
    load); a changed benchmark file, definition or embedder, or any row written or deleted since (another
    run, a purge, a compaction), runs as before. It also names the version of the benchmark format's parser
    that made the records (``evals.formats.benchmark_parser_versions``): a workspace made by another version
    (or before versions were recorded) is rebuilt cold (``discard_workspace``), since a parser that starts to
    record a new metadata field changes no text or key, so a run would find nothing to redo. Written only
    after the runs completed, through a temporary file and ``os.replace``: a killed ingest leaves the previous
    marker, whose rows no longer match."""

    def __init__(self, root: Path) -> None:
        self.path = root / ".synthex" / "eval-ingest.json"

    def unchanged(self, inputs: str, rows: TableState | None) -> bool:
        if rows is None:
            return False
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
            return stored["inputs"] == inputs and TableState.from_json(stored["rows"]).same_rows(rows)
        except (OSError, ValueError, TypeError, KeyError):  # none yet, or unreadable: the runs decide
            return False

    def made_by_another_parser(self, parser: str | None) -> bool:
        """The workspace's last completed ingest was made by a parser version other than ``parser`` (False
        when there is no readable marker: a new workspace, or a first ingest that did not complete)."""
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(stored, dict) and stored.get("parser") != parser

    def settle(self, rows: TableState | None) -> None:
        """After the workspace's questions: their searches may have written (a leaf step's vectors are
        embedded at the first search that scores them), so the rows they leave are the ones to find next time.
        Called only when this eval's ingest wrote or matched the marker, so its inputs are this eval's."""
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
            inputs, before, parser = stored["inputs"], TableState.from_json(stored["rows"]), stored.get("parser")
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return
        if rows is not None and not before.same_rows(rows):
            self.write(inputs, rows, parser)

    def write(self, inputs: str, rows: TableState | None, parser: str | None = None) -> None:
        if rows is None:
            return
        write_file_atomic(self.path, json.dumps({"inputs": inputs, "rows": rows.to_json(), "parser": parser}))


def _raw(data: Path, root: Path, fmt: str) -> Pipeline:
    pipe = Pipeline("raw", project_dir=root)
    pipe.source("turns", file=str(data), format=fmt)
    pipe.output("search", from_=["turns"], surface="search")
    return pipe


def _contextual(data: Path, root: Path, fmt: str, stem: bool = False, enriched: bool = False) -> Pipeline:
    from evals.benchmarks.locomo.data import with_previous_turn, with_previous_turn_enriched

    pipe = Pipeline("contextual", project_dir=root, lexical_stem=stem)
    pipe.source("turns", file=str(data), format=fmt)
    pipe.transform("turns-in-context", from_="turns",
                   fn=with_previous_turn_enriched if enriched else with_previous_turn)
    pipe.output("search", from_=["turns-in-context"], surface="search")
    return pipe


def _hierarchical(data: Path, root: Path, fmt: str, keys: tuple[str, ...] = HIERARCHY_KEYS) -> Pipeline:
    from evals.benchmarks.locomo.data import with_previous_turn
    from synthex.core.digest import key_profile

    pipe = Pipeline("hierarchical-conversational", project_dir=root, lexical_stem=True)
    pipe.source("turns", file=str(data), format=fmt)
    pipe.transform("turns-in-context", from_="turns", fn=with_previous_turn)
    for key in keys:
        pipe.aggregate(f"by-{key}", from_="turns", by=key, fn=key_profile)
    pipe.output("search", from_=["turns-in-context", *(f"by-{key}" for key in keys)], surface="search")
    return pipe


def into_workspace(definition: PipelineDefinition, data: Path, root: Path, fmt: str) -> None:
    """Move ``definition`` (a branch) and its ancestors into workspace ``root``, every source reading the
    benchmark file ``data`` (format ``fmt``), each once (a step shared by a branch and its parent too). A
    source that read another memory system's file reads the turns as that system's
    (``synthex.core.importers.migrate.turns``): an imported project's views and branches then select and
    group the benchmark's turns as they did the imported ones, instead of finding none of their kinds."""
    from synthex.core.importers.migrate.turns import turns_plan

    chain = []
    node: PipelineDefinition | None = definition
    while node is not None:
        chain.append(node)
        node = node.parent
    # Each source step once (main's order first), read as its name and format say: a branch's own copy of a
    # parent's source reads the turns as the parent's does, or the branch would see that source changed.
    steps = {id(s): s for node in reversed(chain) for s in node.sources().values()}
    keys = [(s.name, project_format(s)) for s in steps.values()]
    unique = list(dict.fromkeys(keys))
    plan = dict(zip(unique, turns_plan([f for _, f in unique]), strict=True))
    for node in chain:
        node.project_dir = root
        node.store_uri = str(root / ".synthex" / "lancedb")
    for step, key in zip(steps.values(), keys, strict=True):
        step.read_export(str(data), fmt, str(root), turns_as=plan[key])


def project_format(step: SourceStep) -> str:
    """The format the source reads in the project (``auto``: the one detected in its file, if it is there)."""
    if step.origin_kind != "file" or step.format != "auto":
        return step.format
    from synthex.core.importers.migrate import detect_migration_format

    path = step.path()
    return (detect_migration_format(path, step.limits.source_file_bytes) if path.is_file() else None) or "auto"


def project_architecture(project: Path, branch: str) -> Architecture:
    """The user's pipeline with every source reading the benchmark file instead of their exports."""

    def build(data: Path, root: Path, fmt: str) -> Pipeline:
        from synthex.core.project import load_pipeline

        pipe = load_pipeline(project).for_branch(branch)  # branches/<branch>.py over pipeline.py
        into_workspace(pipe, data, root, fmt)
        return pipe  # type: ignore[return-value]

    from synthex.core.project import load_pipeline

    # Searched as the project searches (its search output's mode=, else hybrid). Every branch of the
    # project shares one workspace: a branch reuses main's records there.
    definition = load_pipeline(project)
    try:
        mode = definition.for_branch(branch).search_mode()
    finally:
        definition.close()
    return Architecture(name=branch, build=build, mode=mode, branch=branch, workspace="project")


def check_mode(name: str, mode: str) -> None:
    """``mode`` is a search strategy of the registry (built-ins and installed plugins), as every door's."""
    from synthex_resources.search.strategies.registry import load_search_strategies

    names = load_search_strategies().names()
    if mode not in names:
        raise ValueError(f"architecture {name!r}: unknown search recipe {mode!r}; recipes: {', '.join(names)}")


class Built(NamedTuple):
    build: Callable[[Path, Path, str], Pipeline]
    mode: str
    workspace: str
    rerank: str | None = None


# The built-in pipelines: name -> (pipeline builder, search mode, workspace, reranker). Architectures that
# share a workspace share its ingested records and differ only in how they search them.
BUILT: dict[str, Built] = {
    "contextual-hybrid": (_contextual, "hybrid", "contextual"),
    "conversational": (partial(_contextual, stem=True), "conversational", "contextual-stemmed"),
    "conversational-enriched": (partial(_contextual, stem=True, enriched=True), "conversational",
                                "contextual-stemmed-enriched"),
    "hierarchical-conversational": (_hierarchical, "hierarchical", "hierarchical"),
    # the same records, the named speaker's turns ranked higher
    "hierarchical-speaker": (_hierarchical, "hierarchical-speaker", "hierarchical"),
    # the same records, also word-neighbour expansion (search/strategies/hierarchical_expanded.py)
    "hierarchical-expanded": (_hierarchical, "hierarchical-expanded", "hierarchical"),
    # the same ranking, newer statements of one fact first (search/strategies/hierarchical_fresh.py)
    "hierarchical-fresh": (_hierarchical, "hierarchical-fresh", "hierarchical"),
    # the same ranking, its top 30 reordered by the offline cross-encoder (search/cross_encoder.py)
    "hierarchical-reranked": (_hierarchical, "hierarchical-expanded", "hierarchical", "cross-encoder"),
    # newer statements first also for a question about the asker's own present state ("how many ... do I own?")
    "hierarchical-fresh-asker": (_hierarchical, "hierarchical-fresh-asker", "hierarchical"),
    # the cross-encoder's order of the top 30, then the newer statement of one fact first among its top 5
    "hierarchical-reranked-fresh-asker": (_hierarchical, "hierarchical-fresh-asker", "hierarchical", "cross-encoder"),
}
BUILTIN = ("raw-bm25", "raw-dense", "raw-hybrid", *BUILT)


def resolve(names: list[str], project: Path | None) -> list[Architecture]:
    out = []
    for name in names:
        if name in PEER_NAMES:
            continue  # peers are not pipelines; the eval runs them separately
        if name.startswith("raw-"):
            mode = name.split("-", 1)[1]
            check_mode(name, mode)
            out.append(Architecture(name, _raw, mode=mode, workspace="raw"))
        elif name in BUILT:
            build, mode, workspace, rerank = Built(*BUILT[name])
            out.append(Architecture(name, build, mode=mode, workspace=workspace, rerank=rerank))
        else:
            branch, _, mode = name.partition("@")  # "main@conversational": the branch searched with that recipe
            if project is None or not (project / "pipeline.py").exists():
                raise ValueError(f"architecture {name!r} is a branch of the project's pipeline, but there is "
                                 f"no pipeline.py in {project}; built-ins: {', '.join(BUILTIN)}")
            arch = project_architecture(project, branch)
            if mode:
                check_mode(name, mode)
                arch.name, arch.mode = name, mode  # same workspace and ingested data as the branch
            out.append(arch)
    return out


class LeafCache:
    """``Record.leaves()`` for the hits of one workspace, each record read from the store at most once.

    A drill-down reads the store once per provenance level per hit; the questions of a conversation hit the
    same records again and again, so without this the drill-down was 45 s of a 65 s second run of
    ``synthex eval locomo --limit 2`` (5,753 store reads). Same walk, same order as ``Record.leaves``
    (records are content addressed: any row of an id is that record): the walk is ``Record.leaves`` read
    through this cache as its resolver. Lives for one workspace's questions:
    the workspace is not written while they are asked."""

    def __init__(self, preload: Callable[[], Iterable[Record]] | None = None) -> None:
        self._records: dict[str, Record] = {}
        self._absent: set[str] = set()
        self._leaves: dict[str, list[Record]] = {}
        self._preload = preload  # read at the first drill-down that misses (a raw hit never drills down)
        self._via: Record | None = None  # the hit being drilled: its resolver reads what memory lacks

    def get_many(self, ids: list[str]) -> list[Record]:
        """``RecordResolver`` for ``Record.leaves``: from memory, else through the current hit's own resolver
        (a copy of the hit whose sources are the missing ids), remembered either way."""
        wanted = list(dict.fromkeys(ids))
        if self._preload is not None and any(i not in self._records for i in wanted):
            for rec in self._preload():
                self._records.setdefault(rec.id, rec)
            self._preload = None
        missing = [i for i in wanted if i not in self._records and i not in self._absent]
        if missing and self._via is not None:
            for rec in replace(self._via, source_ids=missing).sources():
                self._records[rec.id] = rec
            self._absent.update(i for i in missing if i not in self._records)
        return [self._records[i] for i in wanted if i in self._records]

    def leaves(self, hit: Record) -> list[Record]:
        """The source-step records under ``hit`` (``[hit]`` when it is one), oldest first (a new list):
        ``Record.leaves`` itself, read through this cache."""
        if hit.id not in self._leaves:
            self._via = hit
            self._leaves[hit.id] = hit.leaves(resolver=self)
        return list(self._leaves[hit.id])


def unambiguous_records(pipe: Pipeline) -> list[Record]:
    """Every record of ``pipe``'s store whose id has one row, in one read (for ``LeafCache``). An id with a
    row per branch is left to the store's resolver, so the row a drill-down reads stays the resolver's choice."""
    from collections import Counter

    from synthex_resources.store.filters import RecordFilter

    records = pipe.store().records
    rows = records.rows(RecordFilter())
    count = Counter(row["id"] for row in rows)
    return [records.to_record(row) for row in rows if count[row["id"]] == 1]


def ranked_leaf_keys(hits: list, query: str, key: Callable, k: int, leaf_cache: LeafCache | None = None) -> list[str]:
    """Drill down: each hit's leaves, best-matching first, flattened to the first ``k`` distinct keys.
    ``leaf_cache``: one per workspace, so a record is read from the store once for all its questions."""
    words = set(tokenize(query))
    out: list[str] = []
    for hit in hits:
        if leaf_cache is not None:
            leaves = leaf_cache.leaves(hit)
        else:
            leaves = [hit] if not hit.source_ids else hit.leaves()
        leaves.sort(key=lambda r: (-len(words & set(tokenize(r.content))), r.meta("time.created_at") or "", r.id))
        for leaf in leaves:
            value = key(leaf)
            if value is not None and value not in out:
                out.append(value)
            if len(out) >= k:
                return out
    return out
