"""Issue 24, the demo's full run (session 5): what a run spends is counted, not timed.

- A searched step's records are embedded on a background thread while the step computes its next
  partitions (``store.vectors.EmbedAhead``): each distinct text once, the same vectors bit for bit.
- The embedding model starts loading as soon as the plan has work for a searched step, and not on a
  run with nothing to do.
- While a run executes, Dagster's "does this partition exist" questions (four per partition's metadata,
  more per materialization) are answered from one read of the dynamic partitions
  (``SqliteEventLog.dynamic_partitions_held``), and every partition still gets its materialization
  with its metadata (what the UI shows).
"""

from __future__ import annotations

import json
import threading
from collections import Counter

import numpy as np
import pytest
from conftest import load, write_project
from sqlalchemy import event
from sqlalchemy.engine import Engine

from synthex.core.demo.generate import generate
from synthex_resources.embedder import MiniLMOnnxEmbedder


class CountingMiniLM(MiniLMOnnxEmbedder):
    """The real offline embedder, counting the texts it embeds (by thread) and its background loads."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.by_thread: Counter[str] = Counter()
        self.background_loads = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        self.by_thread[threading.current_thread().name.split("_")[0]] += len(texts)
        return super().embed(texts)

    def load_in_background(self) -> None:
        self.background_loads += 1
        super().load_in_background()


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """A small demo project (8 conversations over 3 months) run once in this process, counting the SQL
    statements that read Dagster's dynamic partitions table during the run, then run again (no change)."""
    base = tmp_path_factory.mktemp("demo-project")
    export = base / "exports" / "conversations.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(generate(conversations=8, months=3, seed=5)))
    root = write_project(base / "proj", export)
    embedder = CountingMiniLM()
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if "dynamic_partitions" in statement and statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    pipe = load(root)
    app = pipe.open(embedder=embedder)
    event.listen(Engine, "before_cursor_execute", count)
    try:
        run = app.run()
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    loads_after_first = embedder.background_loads
    second = app.run()
    yield {"pipe": pipe, "app": app, "run": run, "second": second, "embedder": embedder,
           "partition_reads": list(statements), "loads_after_first": loads_after_first}
    pipe.close()


def test_searched_records_are_embedded_once_per_text_off_the_main_thread(ran):
    app, embedder = ran["app"], ran["embedder"]
    searched = set(app.pipeline.search_steps())
    rows = app.store.records.scan(["step", "content", "vector"])
    assert rows and {r["step"] for r in rows} > searched  # the run wrote searched and unsearched steps
    texts = {r["content"] for r in rows if r["step"] in searched and r["content"].strip()}
    assert len(texts) >= 4
    # Each distinct text of a searched step embedded exactly once, and nothing else embedded.
    assert sorted(embedder.texts) == sorted(texts)
    # ... all of it on the run's embedding thread, while the main thread computed partitions.
    assert set(embedder.by_thread) == {"synthex-embed"}, embedder.by_thread
    # Vectors where search needs them, none elsewhere (written at first dense search).
    assert all((r["vector"] is not None) == (r["step"] in searched) for r in rows)


def test_pipelined_vectors_are_the_bits_a_direct_embedding_gives(ran):
    app = ran["app"]
    searched = set(app.pipeline.search_steps())
    rows = [r for r in app.store.records.scan(["step", "content", "vector"]) if r["step"] in searched]
    rows = list({r["content"]: r for r in rows}.values())
    # All texts in one call (other batches than the run's), through the run's loaded model, not counted.
    direct = MiniLMOnnxEmbedder.embed(ran["embedder"], [r["content"] for r in rows])
    stored = np.array([r["vector"] for r in rows], dtype=np.float32)
    assert len(rows) >= 4  # never vacuous
    assert stored.shape == direct.shape and np.array_equal(stored, direct)


def test_the_model_loads_early_only_when_a_searched_step_has_work(ran):
    assert ran["run"].steps and ran["loads_after_first"] == 1
    assert ran["second"].steps == [] and ran["embedder"].background_loads == 1  # nothing to do: no load


def test_a_run_reads_the_dynamic_partitions_once_not_per_partition(ran):
    app, run = ran["app"], ran["run"]
    from dagster import DagsterEventType

    materialized = app.instance.all_logs(run.id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
    partitions = {(e.dagster_event.asset_key.to_user_string(), e.dagster_event.partition) for e in materialized}
    # What the UI shows is all there: one materialization per (step, partition), each with its figures.
    assert len(materialized) == len(partitions) >= 10
    assert all("records_total" in e.dagster_event.event_specific_data.materialization.metadata
               for e in materialized)
    # Before: four existence queries per partition's metadata and more per materialization (hundreds on
    # the demo); now a few reads for the whole run (registering partitions, the range, one per definition).
    assert 0 < len(ran["partition_reads"]) <= 8, ran["partition_reads"]
