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

Row order in the table follows the shards' order (the fragments are committed in shard order), so the
table a run of N workers leaves is the one a single process leaves, row for row.

``synthex run --workers N`` writes a first ingest this way (synthex_assets/executor.py): ``IngestWorkers``
is the run's pool of N spawned processes, started on first use and kept for one step of the run (a
pipeline with two searched steps starts a pool for each), so each worker loads its embedder once a step.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from synthex.core.errors import BadInputError


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


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    # spawn: a worker imports what it needs itself (no fork of a process holding lance's runtime threads)
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


class IngestWorkers:
    """A run's ingest processes: ``workers`` spawned processes, started when first asked for (a run with
    nothing new to append starts none) and stopped by ``close``. ``workers`` 1: none (today's path)."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = check_workers(workers)
        self._pool: ProcessPoolExecutor | None = None

    @property
    def spread(self) -> bool:
        return self.workers > 1

    def pool(self) -> Executor:
        if self._pool is None:
            self._pool = spawn_pool(self.workers)
        return self._pool

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class ShardJob:
    """One worker's part of a batch: ``build(shard)`` returns its rows (a module-level function, so a
    worker process can import it)."""

    uri: str
    schema: pa.Schema
    build: Callable[[Any], pa.Table]
    shard: Any
    storage_options: dict[str, str] | None = None


def write_shard(job: ShardJob) -> tuple[list[str], list[str]]:
    """In a worker: the shard's rows written as fragments of the table at ``job.uri``. Returns the fragments'
    metadata (JSON, to cross the process boundary) and the ids written."""
    from lance.fragment import write_fragments

    table = job.build(job.shard).cast(job.schema)
    fragments = write_fragments(table, job.uri, schema=job.schema, storage_options=job.storage_options)
    return [json.dumps(f.to_json()) for f in fragments], table.column("id").to_pylist()


def append_in_workers(uri: str, schema: pa.Schema, build: Callable[[Any], pa.Table], shards: Sequence[Any], *,
                      workers: int, storage_options: dict[str, str] | None = None,
                      pool: Executor | None = None) -> int:
    """Build and write ``shards`` with ``workers`` processes (1: in this process; ``pool``: that pool's
    processes), then commit all their fragments as one append. The table is created (empty, ``schema``)
    when it does not exist. Returns the table's new version. Raises HeldIdsError (a ValueError),
    committing nothing, when the batch repeats an id or holds one the table has."""
    import lance
    from lance import LanceOperation
    from lance.fragment import FragmentMetadata

    try:
        dataset = lance.dataset(uri, storage_options=storage_options)
    except (FileNotFoundError, ValueError):
        dataset = lance.write_dataset(schema.empty_table(), uri, schema=schema, storage_options=storage_options)
    jobs = [ShardJob(uri, schema, build, shard, storage_options) for shard in shards]
    if pool is not None:
        results = list(pool.map(write_shard, jobs))
    elif workers <= 1:
        results = [write_shard(job) for job in jobs]
    else:
        with spawn_pool(workers) as own:
            results = list(own.map(write_shard, jobs))
    ids = [i for _, shard_ids in results for i in shard_ids]
    # Checked and committed against the latest version, not the one read before the workers ran (another
    # writer may have committed meanwhile: an Append is rebased on anything it does not conflict with).
    dataset = lance.dataset(uri, storage_options=storage_options)
    if len(set(ids)) != len(ids):
        raise HeldIdsError(f"{uri}: the batch repeats a record id; nothing committed")
    held = _held_ids(dataset, ids)
    if held:
        raise HeldIdsError(f"{uri}: the batch holds {len(held)} id(s) the table has (e.g. {held[0]}): an append adds "
                         f"new rows only; nothing committed")
    fragments = [FragmentMetadata.from_json(f) for fragment_json, _ in results for f in fragment_json]
    committed = lance.LanceDataset.commit(uri, LanceOperation.Append(fragments), read_version=dataset.version,
                                          storage_options=storage_options)
    return committed.version


def _held_ids(dataset: Any, ids: list[str], chunk: int = 500) -> list[str]:
    held: list[str] = []
    if dataset.count_rows() == 0:
        return held
    for start in range(0, len(ids), chunk):
        part = ids[start:start + chunk]
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in part)
        held += dataset.to_table(columns=["id"], filter=f"id IN ({quoted})").column("id").to_pylist()
    return held
