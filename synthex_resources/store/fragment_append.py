"""Records built by several worker processes, each writing Lance fragments, committed once per batch.

The write-fragments-then-commit pattern of lance's own distributed writers (Ray, Spark): each worker turns
its shard of the batch into rows and writes them as data files of the table (``lance.fragment.write_fragments``:
no manifest, nothing visible yet); the coordinator then commits every worker's fragments in one
``LanceOperation.Append`` against the version it read. So a batch is all visible or not at all (a worker
that died leaves unreferenced files, never rows), there is one commit per batch however many workers wrote
it (one manifest PUT-if-absent on S3), and no two writers ever ``merge_insert`` the same keys (lance
issue #4585: concurrent merge_inserts on the same keys can duplicate rows). An append never replaces
a row: the caller gives it only rows whose ids the table does not hold (a backfill's new periods, new
memories); ``append_in_workers`` checks the batch's ids are unique and new before it commits.

Files of a batch that was not committed are referenced by no version, so they are never rows; they take
disk space until removed. ``append_in_workers`` removes them itself when it knows nothing was committed: a
refused batch (an id repeated or held), a commit that lost a race (a commit conflict; the retry writes its
fragments again), and a batch whose shard raised or whose worker died (the shards written by then). Left for
lance's cleanup: the shards being written when such a batch's pool was killed (their names never reached the
coordinator), a run killed mid-batch or mid-removal, and a commit that failed otherwise (its manifest may
have landed: an object store PUT that timed out). The store's ``optimize`` (``LanceTable.optimize``; the
index upkeep after a step's writes calls it once the table has ``COMPACT_FROM_FRAGMENTS`` fragments, and an
encrypted store's whenever rows are unindexed) calls lance's ``cleanup_old_versions`` without
``delete_unverified``, which removes a data file no manifest references only once it is 7 days old (a
younger one may be a writer's in flight); ``synthex purge``'s compaction removes them at once
(``delete_unverified=True``, under every branch's lock, so no run of the project writes meanwhile).
Checked with lance 14.0.2 (tests/test_fragment_append.py).

Row order in the table follows the shards' order (the fragments are committed in shard order), so the
table a run of N workers leaves is the one a single process leaves, row for row.

``synthex run --workers N`` writes a first ingest this way (synthex_assets/executor.py): ``IngestWorkers``
is the run's pool of N spawned processes, started on first use and kept for one step of the run (a
pipeline with two searched steps starts a pool for each). Each process runs one loop (``serve_shards``)
that holds its ``ShardWorker`` (the embedders it loaded) in a local for the process's life and writes shard
after shard with it, so each worker loads its embedder once a step, and nothing is kept in a module global:
the one-process path (``workers`` 1) builds a ``ShardWorker`` for its call only, so the run's process keeps
no model once the append returns.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

import pyarrow as pa

from synthex.core.errors import BadInputError
from synthex_resources.commits import is_commit_conflict
from synthex_resources.embedder import Embedder, WorkerEmbedder

# What a worker returns for a shard: its fragments' metadata (JSON, to cross the process boundary) and the ids.
ShardWritten = tuple[list[str], list[str]]


class HeldIdsError(ValueError):
    """The batch repeats an id or holds one the table has: nothing was committed."""


def max_workers() -> int:
    """The most ingest workers a run takes: this machine's cores (a worker is one embedding process)."""
    return os.cpu_count() or 1


def check_workers(workers: object) -> int:
    """``workers`` as a run's number of ingest processes, 1..cores; else a one-line BadInputError."""
    cap = max_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= cap:
        raise BadInputError(f"workers must be a whole number from 1 to {cap} (this machine's cores), not {workers!r}")
    return workers


def check_worker_embedder(embedder: object, workers: int) -> None:
    """Above one worker, ``embedder`` must be rebuildable in a worker process (``for_worker``); else a
    one-line BadInputError, before the run computes anything (every door asks this: the CLI and Python
    API through ``ProjectApp.check_ingest``, a UI or sensor run's ``synthex/workers`` tag in the step)."""
    if workers > 1 and not hasattr(embedder, "for_worker"):
        name = getattr(embedder, "name", type(embedder).__name__)
        raise BadInputError(f"workers={workers}: the embedder {name!r} cannot be rebuilt in a worker process "
                            f"(it has no for_worker()); run with one worker")


def usable_declared_workers(declared: int, embedder: object) -> tuple[int, str | None]:
    """A pipeline's declared ``ingest_workers`` on this machine. A ceiling, not a demand: one pipeline.py runs
    on hosts with other core counts (a laptop, a 2-core run pod), so it takes at most this machine's cores,
    and one process when the embedder cannot be rebuilt in a worker (no ``for_worker``). With the line that
    says why it was lowered (None: as declared). An explicit count (``--workers``, ``workers=``, a UI tag) is
    checked strictly instead (``check_workers``)."""
    if declared > 1 and not hasattr(embedder, "for_worker"):  # first: no core count helps this embedder
        name = getattr(embedder, "name", type(embedder).__name__)
        return 1, (f"ingest_workers={declared} declared; the embedder {name!r} cannot be rebuilt in a worker "
                   "process (no for_worker()): one process used")
    cap = max_workers()
    if declared > cap:
        return cap, f"ingest_workers={declared} declared; this machine has {cap} core(s): {cap} used"
    return declared, None


class WorkerDiedError(RuntimeError):
    """An ingest worker process ended before it returned its shard (killed, out of memory): nothing was
    committed, and the pool's other workers are stopped."""


class WorkerTraceback(Exception):
    """Where a worker's shard raised: its traceback text, the cause of the exception raised in the run."""


class ShardWorker:
    """One ingest worker's state, for as long as it writes shards (a worker process's whole life, or one
    one-process append): the embedders it loaded, one per spec, so a model loads once however many shards
    it embeds. Passed to each shard's ``build``."""

    def __init__(self) -> None:
        self._embedders: dict[WorkerEmbedder, Embedder] = {}

    def embedder(self, spec: WorkerEmbedder) -> Embedder:
        """The embedder ``spec`` rebuilds, created on this worker's first shard that names it."""
        if spec not in self._embedders:
            self._embedders[spec] = spec.create()
        return self._embedders[spec]


@dataclass(frozen=True)
class ShardFailed:
    """What a worker sends back for a shard whose build raised: the exception (or, when it does not
    pickle and load back, a RuntimeError naming it) and the worker's traceback text."""

    error: BaseException
    trace: str


def serve_shards(conn: Connection) -> None:
    """A worker process's life (module level, so a spawned process imports it): one ``ShardWorker`` in a
    local, then each ``ShardJob`` received written with it, until told to stop (None) or the pool's end of
    the pipe closes (the run's process ended)."""
    worker = ShardWorker()
    try:
        while (job := conn.recv()) is not None:
            try:
                outcome: Any = write_shard(job, worker)
            except Exception as exc:  # noqa: BLE001 - sent to the run's process, which raises it
                outcome = ShardFailed(exc, traceback.format_exc())
                try:  # both ways: an exception whose __init__ takes other arguments pickles but does not load
                    pickle.loads(pickle.dumps(outcome))
                except Exception:  # noqa: BLE001 - an exception that does not round-trip is named instead
                    outcome = ShardFailed(RuntimeError(f"{type(exc).__name__}: {exc}"), outcome.trace)
            conn.send(outcome)
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return  # the run's process is gone or stopping: nothing to write for it
    finally:
        conn.close()


class ShardPool:
    """``workers`` spawned processes, each running ``serve_shards`` until ``close``. Spawned, not forked:
    a worker imports what it needs itself (no fork of a process holding lance's runtime threads). Daemon
    processes: a run's process that ends without closing the pool takes its workers with it."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._procs: list[tuple[BaseProcess, Connection]] = []
        context = multiprocessing.get_context("spawn")
        try:
            for _ in range(workers):
                ours, theirs = context.Pipe()
                process = context.Process(target=serve_shards, args=(theirs,), name="synthex-ingest", daemon=True)
                process.start()
                theirs.close()
                self._procs.append((process, ours))
        except BaseException:
            self.kill()
            raise

    @property
    def closed(self) -> bool:
        return not self._procs

    def written(self, jobs: Sequence[ShardJob]) -> Iterator[tuple[int, ShardWritten]]:
        """Each job written by the next idle worker: (its place in ``jobs``, ``write_shard``'s result) as each
        comes back. A job that raised raises its exception here, and a worker that died raises
        WorkerDiedError; either way (or when the caller stops early) the pool is killed first, the shards
        still being written dropped, and the pool ``closed``."""
        if self.closed:
            raise RuntimeError("this pool of ingest workers is closed")
        todo = iter(enumerate(jobs))
        busy: dict[Connection, tuple[int, BaseProcess]] = {}

        def hand_out(process: BaseProcess, conn: Connection) -> None:
            nxt = next(todo, None)
            if nxt is not None:
                conn.send(nxt[1])
                busy[conn] = (nxt[0], process)

        try:
            for process, conn in self._procs:
                hand_out(process, conn)
            while busy:
                for ready in wait(list(busy)):
                    assert isinstance(ready, Connection)
                    index, process = busy.pop(ready)
                    try:
                        outcome = ready.recv()
                    except EOFError:
                        process.join(timeout=5)
                        raise WorkerDiedError(f"ingest worker {process.pid} ended (exit code {process.exitcode}) "
                                              f"before it wrote its shard; nothing committed") from None
                    if isinstance(outcome, ShardFailed):
                        # The worker's traceback as the cause (as concurrent.futures does), not in the
                        # message: a BadInputError from a worker stays its one line.
                        raise outcome.error from WorkerTraceback(f"in ingest worker {process.pid}:\n{outcome.trace}")
                    hand_out(process, ready)
                    yield index, outcome
        except BaseException:
            self.kill()
            raise

    def close(self) -> None:
        """Stop every worker once it is idle (between batches: ``written`` ends only when none is busy, and
        kills the pool when it stops before)."""
        procs, self._procs = self._procs, []
        for _, conn in procs:
            try:
                conn.send(None)
            except OSError:  # that worker is gone already
                pass
        for process, conn in procs:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()
            conn.close()

    def kill(self) -> None:
        """Stop every worker now, whatever it is doing (its shard's files are referenced by no version)."""
        procs, self._procs = self._procs, []
        for process, _ in procs:
            process.kill()
        for process, conn in procs:
            process.join()
            conn.close()

    def __enter__(self) -> ShardPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class IngestWorkers:
    """A run's ingest processes: ``workers`` spawned processes, started when first asked for (a run with
    nothing new to append starts none; a pool killed by a failed shard is started again) and stopped by
    ``close``. ``workers`` 1: none (today's path)."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = check_workers(workers)
        self._pool: ShardPool | None = None

    @property
    def spread(self) -> bool:
        return self.workers > 1

    def pool(self) -> ShardPool:
        if self._pool is None or self._pool.closed:
            self._pool = ShardPool(self.workers)
        return self._pool

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


@dataclass(frozen=True)
class ShardJob:
    """One worker's part of a batch: ``build(shard, worker)`` returns its rows (a module-level function, so
    a worker process can import it; ``worker`` is the ``ShardWorker`` writing it, which keeps its models)."""

    uri: str
    schema: pa.Schema
    build: Callable[[Any, ShardWorker], pa.Table]
    shard: Any
    storage_options: dict[str, str] | None = None


def write_shard(job: ShardJob, worker: ShardWorker) -> ShardWritten:
    """In a worker: the shard's rows, built by ``worker``, written as fragments of the table at ``job.uri``.
    Returns the fragments' metadata (JSON, to cross the process boundary) and the ids written."""
    from lance.fragment import write_fragments

    table = job.build(job.shard, worker).cast(job.schema)
    fragments = write_fragments(table, job.uri, schema=job.schema, storage_options=job.storage_options)
    return [json.dumps(f.to_json()) for f in fragments], table.column("id").to_pylist()


def append_in_workers(uri: str, schema: pa.Schema, build: Callable[[Any, ShardWorker], pa.Table],
                      shards: Sequence[Any], *, workers: int, storage_options: dict[str, str] | None = None,
                      pool: ShardPool | None = None) -> int:
    """Build and write ``shards`` with ``workers`` processes (1: in this process, with a ``ShardWorker`` of
    this call only; ``pool``: that pool's processes), then commit all their fragments as one append. The
    table is created (empty, ``schema``) when it does not exist. Returns the table's new version. Raises
    HeldIdsError (a ValueError), committing nothing, when the batch repeats an id or holds one the table
    has. A batch not committed leaves no file it knows of (module docstring)."""
    import lance
    from lance import LanceOperation
    from lance.fragment import FragmentMetadata

    try:
        dataset = lance.dataset(uri, storage_options=storage_options)
    except (FileNotFoundError, ValueError):
        dataset = lance.write_dataset(schema.empty_table(), uri, schema=schema, storage_options=storage_options)
    jobs = [ShardJob(uri, schema, build, shard, storage_options) for shard in shards]
    done: dict[int, ShardWritten] = {}
    try:
        for index, result in _write_shards(jobs, workers, pool):
            done[index] = result
    except BaseException:
        # A shard failed: the ones written already are removed (the ones being written when the pool was
        # killed are left, unnamed, to lance's cleanup).
        _remove_uncommitted(dataset, [FragmentMetadata.from_json(f) for fragment_json, _ in done.values()
                                      for f in fragment_json])
        raise
    results = [done[i] for i in range(len(jobs))]
    fragments = [FragmentMetadata.from_json(f) for fragment_json, _ in results for f in fragment_json]
    ids = [i for _, shard_ids in results for i in shard_ids]
    try:
        # Checked and committed against the latest version, not the one read before the workers ran (another
        # writer may have committed meanwhile: an Append is rebased on anything it does not conflict with).
        dataset = lance.dataset(uri, storage_options=storage_options)
        if len(set(ids)) != len(ids):
            raise HeldIdsError(f"{uri}: the batch repeats a record id; nothing committed")
        held = _held_ids(dataset, ids)
        if held:
            raise HeldIdsError(f"{uri}: the batch holds {len(held)} id(s) the table has (e.g. {held[0]}): an append "
                               f"adds new rows only; nothing committed")
    except BaseException:
        _remove_uncommitted(dataset, fragments)  # no commit was tried: no version can reference them
        raise
    try:
        committed = lance.LanceDataset.commit(uri, LanceOperation.Append(fragments), read_version=dataset.version,
                                              storage_options=storage_options)
    except (OSError, RuntimeError, ValueError) as error:
        # A lost commit race committed nothing (the retry writes its own fragments again); any other failure
        # may have left the manifest written (an object store's PUT that timed out after it landed), so its
        # files stay, for lance's cleanup of files no version references (module docstring).
        if is_commit_conflict(error):
            _remove_uncommitted(dataset, fragments)
        raise
    return committed.version


def _write_shards(jobs: list[ShardJob], workers: int, pool: ShardPool | None) -> Iterator[tuple[int, ShardWritten]]:
    """(place, result) of each job as it is written: by ``pool``, in this process (``workers`` 1, with a
    ``ShardWorker`` of this call only, dropped on return with any model it loaded), or by a pool of its own."""
    if pool is not None:
        yield from pool.written(jobs)
    elif workers <= 1:
        worker = ShardWorker()
        for index, job in enumerate(jobs):
            yield index, write_shard(job, worker)
    else:
        with ShardPool(workers) as own:
            yield from own.written(jobs)


def _remove_uncommitted(dataset: Any, fragments: Sequence[Any]) -> None:
    """Delete the data files of ``fragments``, which no version of ``dataset`` references (this batch's, not
    committed). Safe at any time: their names are fresh (lance names a data file by a new UUID), so no reader
    or other writer knows them. A kill part way leaves the rest to lance's cleanup (module docstring); a file
    already gone is skipped. Never raises: it runs while the batch's own error is raised, and a file it
    cannot remove (the store unreachable) is left to that cleanup too."""
    paths = [f"data/{data_file.path}" for fragment in fragments for data_file in fragment.data_files()
             if data_file.base_id is None]  # a file under another base path: not ours to guess at
    if not paths:
        return
    try:
        session = dataset.new_file_session()
    except OSError:
        return
    for path in paths:
        try:
            session.delete_file(path)
        except OSError:
            continue


def _held_ids(dataset: Any, ids: list[str], chunk: int = 500) -> list[str]:
    held: list[str] = []
    if dataset.count_rows() == 0:
        return held
    for start in range(0, len(ids), chunk):
        part = ids[start:start + chunk]
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in part)
        held += dataset.to_table(columns=["id"], filter=f"id IN ({quoted})").column("id").to_pylist()
    return held
