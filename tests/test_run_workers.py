"""``synthex run --workers N`` (issue 38 item 3): a first ingest's records embedded and written by N worker
processes as Lance fragments, committed once per chunk (synthex_resources/store/fragment_append.py).

The records a 2-worker run leaves are the ones a one-process run leaves (every column of the records table
but the run's own id and time, the run bookkeeping, Dagster's data versions); a run killed while its workers
embed (held at a gate the test owns, so the kill is before the commit whatever the load) leaves no row of
that batch, and running again completes with the same records. The reference is the session's shared
one-process run of the same pipeline and export (``ran_project``). Nothing here is timed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import lance
import pytest
from conftest import cli, env_without_openai, load, write_project

from synthex.core.errors import BadInputError
from synthex_resources.store.fragment_append import max_workers

WORKERS = "synthex/workers"  # the run tag, as the UI shows it

# What differs between any two runs of the same data (a run's own id, when its records were written).
RUN_SPECIFIC = ("run_id", "created_at")
SPREAD = "summaries"  # a search step (embedded at write time): its first ingest goes through the workers


def table_rows(root: Path) -> list[dict]:
    """Every row of the records table as stored (vectors, fingerprints, audit), without the run-specific
    columns, the project's path as ``<root>``; by step, id and branch."""
    rows = lance.dataset(str(root / ".synthex" / "lancedb" / "records.lance")).to_table().to_pylist()
    out = []
    for row in rows:
        kept = json.dumps({k: v for k, v in row.items() if k not in RUN_SPECIFIC})
        out.append(json.loads(kept.replace(json.dumps(str(root))[1:-1], "<root>")))
    return sorted(out, key=lambda r: (r["step"], r["id"], r["branch"]))


def bookkeeping(pipe) -> dict:
    """The completed run as `synthex runs` and the run_steps table hold it, and the data version Dagster
    recorded for each asset partition: without ids, times and durations."""
    from dagster import AssetKey

    from synthex_assets.naming import asset_name
    from synthex_resources.store.schemas import RUN_STEPS

    (run,) = [r for r in pipe.runs() if r.status == "completed"]
    data = run.to_dict()
    summary = {k: data[k] for k in ("pipeline", "branch", "steps", "status", "error")}
    summary["stats"] = {k: v for k, v in data["stats"].items() if k != "duration"}
    steps = sorted((r["step"], r["branch"], r["period"],
                    json.dumps({k: v for k, v in json.loads(r["stats"]).items() if k != "duration"}))
                   for r in pipe.store().tables.read(RUN_STEPS, f"run_id = '{run.id}'"))
    instance = pipe.app.instance
    versions = {}
    for step in pipe.order():
        for rec in instance.fetch_materializations(AssetKey(asset_name(step)), limit=1000).records:
            mat = rec.asset_materialization
            versions[(step, mat.partition)] = mat.tags.get("dagster/data_version")
    return {"run": summary, "run_steps": steps, "data_versions": sorted(versions.items())}


def appended_fragments(root: Path) -> int:
    """Fragments the records table's latest version holds (a one-process chunk write adds one; the
    workers add one per shard)."""
    return len(lance.dataset(str(root / ".synthex" / "lancedb" / "records.lance")).get_fragments())


@pytest.fixture(scope="module")
def reference(ran_project) -> tuple[list[dict], dict, int]:
    pipe = load(ran_project.root)
    try:
        return table_rows(ran_project.root), bookkeeping(pipe), appended_fragments(ran_project.root)
    finally:
        pipe.close()


@pytest.mark.skipif(max_workers() < 2, reason="needs 2 cores")
def test_two_workers_leave_the_records_and_bookkeeping_one_process_leaves(tmp_path, ran_project, reference):
    rows, kept, fragments = reference
    root = write_project(tmp_path / "workers", ran_project.export)
    pipe = load(root)
    try:
        assert pipe.run(workers=2).status == "completed"
        assert table_rows(root) == rows
        assert bookkeeping(pipe) == kept
        # The workers wrote the summaries: one fragment per worker's shard where one process writes one.
        assert appended_fragments(root) > fragments
        assert {r["step"] for r in rows} >= {SPREAD}
        assert pipe.plan().steps == []
    finally:
        pipe.close()


@pytest.mark.parametrize("workers", [0, -1, max_workers() + 1, "2", True])
def test_a_worker_count_out_of_range_is_one_line_before_anything_runs(project, workers):
    pipe = load(project)
    try:
        with pytest.raises(BadInputError, match=r"workers must be a whole number from 1 to \d+"):
            pipe.run(workers=workers)
        assert not (project / ".synthex" / "lancedb" / "records.lance").exists()
    finally:
        pipe.close()


def test_cli_refuses_a_bad_worker_count_in_one_line(project):
    result = cli("run", "--workers", "0", "--project", str(project), check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-2:] == [  # the line naming the project, then the refusal
        "Running pipeline 'test-memory' on branch 'main'...",
        f"error: workers must be a whole number from 1 to {max_workers()} (this machine's cores), not 0"]


KILLED_RUN = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from ingest_gate import GatedEmbedder
from synthex.core.project import load_pipeline
pipe = load_pipeline({root!r})
pipe.open(embedder=GatedEmbedder(Path({gate!r})))
pipe.run(workers=2)
"""


@pytest.mark.skipif(max_workers() < 2, reason="needs 2 cores")
def test_a_run_killed_while_its_workers_embed_leaves_no_row_and_runs_again(tmp_path, ran_project, reference):
    rows, _, _ = reference
    root = write_project(tmp_path / "killed", ran_project.export)
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "hold").write_text("")  # never removed: the killed run's workers cannot get past the gate
    script = KILLED_RUN.format(tests=str(Path(__file__).parent), root=str(root), gate=str(gate))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env_without_openai(), start_new_session=True)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and not list(gate.glob("waiting-*")) and proc.poll() is None:
            time.sleep(0.1)
        assert list(gate.glob("waiting-*")), f"no worker reached the gate (run exited {proc.poll()})"
        store = root / ".synthex" / "lancedb" / "records.lance"
        assert lance.dataset(str(store)).count_rows(f"step = '{SPREAD}'") == 0  # held at the gate: uncommitted
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert lance.dataset(str(store)).count_rows(f"step = '{SPREAD}'") == 0

    pipe = load(root)
    try:
        assert pipe.run(workers=2).status == "completed"  # started again, ungated
        assert table_rows(root) == rows
        assert max(Counter((r["id"], r["branch"]) for r in table_rows(root)).values()) == 1
        assert pipe.plan().steps == []
        runs = pipe.runs()
        assert sorted(r.status for r in runs) == ["completed", "failed"]
        (killed,) = [r for r in runs if r.status == "failed"]
        assert killed.error.startswith("killed")
    finally:
        pipe.close()


def test_a_ui_run_with_a_bad_workers_tag_fails_in_one_line_before_any_write(project):
    """The tag a launchpad user sets (the UI's run of the job over the plan's periods)."""
    from dagster import DagsterEventType

    from synthex_assets.dagster_internals import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )
    from synthex_assets.definitions import build_definitions
    from synthex_assets.naming import job_name
    from synthex_assets.partitions import register
    from synthex_assets.step_assets import WORKERS_TAG

    pipe = load(project)
    try:
        periods = pipe.plan().periods
        register(pipe.app.instance, "main", periods)
        result = build_definitions(pipe).resolve_job_def(job_name(pipe.name)).execute_in_process(
            instance=pipe.app.instance, raise_on_error=False, tags={
                ASSET_PARTITION_RANGE_START_TAG: f"main|{periods[0]}", ASSET_PARTITION_RANGE_END_TAG: f"main|{periods[-1]}",
                WORKERS_TAG: "many"})
        assert not result.success
        (failure,) = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
        assert failure.event_specific_data.user_failure_data.description == (
            f"step 'chatgpt': tag synthex/workers: workers must be a whole number from 1 to {max_workers()} "
            f"(this machine's cores), not 'many'")
        assert not (project / ".synthex" / "lancedb" / "records.lance").exists()
    finally:
        pipe.close()


@pytest.mark.skipif(max_workers() < 2, reason="needs 2 cores")
def test_append_new_writes_the_rows_upsert_writes_in_an_encrypted_store(tmp_path):
    """At the store: blank texts (the zero vector), a text another step stored (its stored vector), a text
    twice across the shards, content and fingerprints encrypted (AES-SIV: deterministic, so rows compare)."""
    from synthex.core.record import Record
    from synthex_resources.embedder import MiniLMOnnxEmbedder
    from synthex_resources.encryption import generate_key
    from synthex_resources.record_store import RecordStore
    from synthex_resources.store.fragment_append import IngestWorkers

    key, embedder = generate_key(), MiniLMOnnxEmbedder()
    seed = Record(id="seed", content="a text another step stored", step="notes", branch="main", period="2024-01")
    texts = ["a text another step stored", "", "  ", *[f"turn {i} about the ryokan" for i in range(6)],
             "turn 1 about the ryokan"]

    def batch() -> list[Record]:
        return [Record(id=f"r{i}", content=t, step="turns", branch="main", period="2024-01", run_id="run-1",
                       metadata={"n": i}) for i, t in enumerate(texts)]

    def raw(store: RecordStore) -> list[dict]:
        return sorted(store.tables.read_arrow("records", None).to_pylist(), key=lambda r: (r["id"], r["branch"]))

    one = RecordStore(str(tmp_path / "one"), embedder=embedder, encryption_key=key)
    one.records.upsert([seed])
    one.records.upsert(batch())
    two = RecordStore(str(tmp_path / "two"), embedder=embedder, encryption_key=key)
    two.records.upsert([seed])
    workers = IngestWorkers(2)
    try:
        assert two.records.append_new(batch(), workers)
        assert raw(two) == raw(one)
        assert raw(two)[0]["content"] != texts[0]  # encrypted
        version = two.records_table().version
        # An id the table holds: nothing written, the caller takes the one-process path.
        assert not two.records.append_new([*batch()[:1], Record(id="new", content="x", step="turns", branch="main",
                                                                period="2024-01")], workers)
        assert two.records_table().version == version
    finally:
        workers.close()


@pytest.mark.parametrize("tag", ["many", "²", "0", "-1", "1.5", str(max_workers() + 1)])
def test_a_bad_workers_tag_is_one_line_not_a_traceback(tag):
    """A launchpad user's ``synthex/workers`` value: a SynthexError naming it (the step turns it into one
    Failure line); "²" passes str.isdigit() but not int()."""
    from synthex.core.errors import SynthexError
    from synthex_assets.step_assets import ingest_workers

    with pytest.raises(SynthexError, match=r"workers must be a whole number from 1 to \d+ \(this machine's cores\)"):
        ingest_workers(tag)


def test_an_embedder_without_for_worker_is_refused_in_one_line_above_one_worker():
    """Every door asks it before the run computes anything (a UI run's tag too, not only the CLI)."""
    from synthex.core.errors import BadInputError
    from synthex_resources.store.fragment_append import check_worker_embedder

    class PluginEmbedder:
        name = "plugin-model"
        dim = 4

    check_worker_embedder(PluginEmbedder(), 1)  # one worker: today's path, nothing to rebuild
    with pytest.raises(BadInputError, match=r"^workers=2: the embedder 'plugin-model' cannot be rebuilt in a "
                                            r"worker process \(it has no for_worker\(\)\); run with one worker$"):
        check_worker_embedder(PluginEmbedder(), 2)


@pytest.mark.skipif(max_workers() < 2, reason="needs 2 cores")
def test_each_worker_loads_its_model_once_and_the_run_process_loads_none(tmp_path, ran_project):
    """A 2-worker run's first ingest: the embedding is the workers' (each loads its model once for a step),
    and the run's own process keeps no model of its own (it embeds nothing itself)."""
    from counted_embedder import CountedEmbedder, events

    root = write_project(tmp_path / "counted", ran_project.export)
    log = tmp_path / "embedder-events"
    pipe = load(root)
    pipe.open(embedder=CountedEmbedder(log))
    try:
        assert pipe.run(workers=2).status == "completed"
    finally:
        pipe.close()
    assert lance.dataset(str(root / ".synthex" / "lancedb" / "records.lance")).count_rows(f"step = '{SPREAD}'") > 0
    loads, embeds = events(log, "load"), events(log, "embed")
    assert embeds, "nothing was embedded"
    assert os.getpid() not in loads and os.getpid() not in embeds
    assert set(loads.values()) == {1}  # one model per worker process
    assert set(embeds) == set(loads)


@pytest.mark.skipif(max_workers() < 2, reason="needs 2 cores")
def test_a_worker_embeds_every_shard_of_its_pool_with_one_model(tmp_path):
    """At the store: three appends through one pool of 2 workers, 2 shards each: each worker loads its
    model on its first shard and embeds the next ones with it; the caller's process loads none."""
    from counted_embedder import CountedEmbedder, events

    from synthex.core.record import Record
    from synthex_resources.record_store import RecordStore
    from synthex_resources.store.fragment_append import IngestWorkers

    log = tmp_path / "embedder-events"
    store = RecordStore(str(tmp_path / "store"), embedder=CountedEmbedder(log))
    workers = IngestWorkers(2)
    try:
        for batch in range(3):
            records = [Record(id=f"b{batch}-r{i}", content=f"batch {batch}, turn {i} about the ryokan", step="turns",
                              branch="main", period="2024-01") for i in range(6)]
            assert store.records.append_new(records, workers)
    finally:
        workers.close()
    loads, embeds = events(log, "load"), events(log, "embed")
    assert len(loads) == 2 and set(loads.values()) == {1}  # two workers, one load each
    assert embeds == Counter(dict.fromkeys(loads, 3))  # each embedded its shard of each of the 3 appends
    assert os.getpid() not in loads
    assert store.records_table().count_rows() == 18


def test_the_one_process_append_keeps_no_model_once_it_returns(tmp_path):
    """``append_in_workers`` with 1 worker embeds in the caller's process with a worker of that call only:
    one load for its shards, and once it returns no model is held (a second call loads its own)."""
    import gc

    import pyarrow as pa
    from counted_embedder import CountedEmbedder, events

    from synthex_resources.embedder import MINILM_DIM
    from synthex_resources.store.fragment_append import append_in_workers
    from synthex_resources.store.vectors import EmbedShard, embed_shard

    log = tmp_path / "embedder-events"
    spec = CountedEmbedder(log).for_worker()
    schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), MINILM_DIM))])

    def shard(first: int) -> EmbedShard:
        ids = [f"r{first + i}" for i in range(3)]
        rows = pa.table({"id": ids, "vector": pa.nulls(3, schema.field("vector").type)}, schema=schema)
        return EmbedShard(rows, tuple((i, f"turn {first + i} about the ryokan") for i in range(3)), spec)

    uri = str(tmp_path / "t.lance")
    for call in range(2):
        append_in_workers(uri, schema, embed_shard, [shard(6 * call), shard(6 * call + 3)], workers=1)
        gc.collect()
        assert not [o for o in gc.get_objects() if isinstance(o, CountedEmbedder)]  # nothing pinned it
        assert events(log, "load") == Counter({os.getpid(): call + 1})  # one load per call, for both shards
    assert events(log, "embed") == Counter({os.getpid(): 4})
    assert lance.dataset(uri).count_rows("vector IS NOT NULL") == 12


def declared_workers(body: str, workers: object) -> str:
    """``body`` (a pipeline.py) whose ``Pipeline(...)`` declares ``ingest_workers=workers``."""
    for agent in ("agent='tester'", 'agent="tester"'):
        if agent in body:
            return body.replace(agent, f"{agent}, ingest_workers={workers!r}", 1)
    raise AssertionError("no agent='tester' in the pipeline.py")


@pytest.mark.skipif(max_workers() < 2, reason="needs 2 cores")
def test_a_sync_takes_the_pipelines_ingest_workers_and_writes_the_records_one_process_writes(
        tmp_path, ran_project, reference):
    """`synthex sync` names no worker count: it takes the pipeline's ``ingest_workers=2``, says so on its run
    (``synthex/workers``) and its workers wrote the first ingest (more fragments), and the records are the
    one-process run's."""
    from conftest import PIPELINE_PY

    from synthex_assets.step_assets import WORKERS_TAG

    rows, _, fragments = reference
    root = write_project(tmp_path / "declared", ran_project.export, declared_workers(PIPELINE_PY, 2))
    cli("sync", "--project", root)
    assert table_rows(root) == rows
    assert appended_fragments(root) > fragments
    pipe = load(root)
    try:
        assert pipe.ingest_workers == 2
        (run,) = pipe.app.instance.get_runs()
        assert run.tags[WORKERS_TAG] == "2"
        assert pipe.plan().steps == []
    finally:
        pipe.close()


def test_the_sensors_and_the_schedules_runs_carry_the_pipelines_ingest_workers(tmp_path):
    """A source sensor's and the reconcile schedule's run requests say the declared ingest workers (the tag the
    step reads); a pipeline that declares none says nothing (one process, as before)."""
    from dagster import SensorResult, build_schedule_context
    from test_sensors import PIPELINE, Live, dagster_instance, make_project

    from synthex_assets.step_assets import WORKERS_TAG

    for declared, expected in ((2, "2"), (None, None)):
        root = make_project(tmp_path / f"proj-{declared}")
        if declared is not None:
            (root / "pipeline.py").write_text(declared_workers((root / "pipeline.py").read_text(), declared))
        assert (root / "pipeline.py").read_text() != PIPELINE or declared is None
        with dagster_instance(tmp_path / f"dagster-{declared}") as instance:
            live = Live(root, instance)
            try:
                result = live.tick("notes")
                assert isinstance(result, SensorResult) and result.run_requests
                assert [r.tags.get(WORKERS_TAG) for r in result.run_requests] == [expected] * len(result.run_requests)
                schedule = live.defs.get_schedule_def("live_reconcile")
                requests = schedule(build_schedule_context(instance=instance,
                                                           resources={"cdc": live.defs.resources["cdc"]}))
                assert requests and [r.tags.get(WORKERS_TAG) for r in requests] == [expected] * len(requests)
            finally:
                live.pipeline.close()


@pytest.mark.parametrize("workers", [0, -2, True, "2", 1.5])
def test_a_declared_ingest_workers_that_is_not_a_count_is_one_line_when_pipeline_py_loads(tmp_path, small_export,
                                                                                           workers):
    from conftest import PIPELINE_PY

    from synthex.core.errors import PipelineDefinitionError
    from synthex.core.project import load_pipeline

    root = write_project(tmp_path / "p", small_export, declared_workers(PIPELINE_PY, workers))
    with pytest.raises(PipelineDefinitionError, match=r"ingest_workers: .* is not a whole number of processes"):
        load_pipeline(root)


def test_a_declared_ingest_workers_over_the_cores_is_a_ceiling_at_every_door_and_a_purge_finishes(
        tmp_path, small_export):
    """pipeline.py runs on hosts with other core counts: a declared count over this machine's cores is lowered
    to them with one warning line (`synthex sync` and `run`), a UI run without a synthex/workers tag (or with
    the declared count, as the sensors tag it) takes the same ceiling in its step, and a purge's re-run (one
    process) finishes in one go; an explicit count over the cores is still refused in one line."""
    from conftest import PIPELINE_PY
    from dagster import DagsterEventType

    from synthex_assets.dagster_internals import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )
    from synthex_assets.definitions import build_definitions
    from synthex_assets.naming import job_name
    from synthex_assets.partitions import register

    too_many = max_workers() + 1
    lowered = (f"warning: ingest_workers={too_many} declared; this machine has {max_workers()} core(s): "
               f"{max_workers()} used")
    root = write_project(tmp_path / "p", small_export, declared_workers(PIPELINE_PY, too_many))
    result = cli("run", "--project", root)
    assert lowered in result.stderr.splitlines(), result.stderr
    assert (root / ".synthex" / "lancedb" / "records.lance").exists()
    assert lowered in cli("sync", "--project", root).stderr.splitlines()
    refusal = f"workers must be a whole number from 1 to {max_workers()} (this machine's cores), not {too_many}"
    result = cli("run", "--workers", str(too_many), "--project", root, check=False)  # explicit: strict
    assert result.returncode != 0 and result.stderr.strip().splitlines()[-1] == f"error: {refusal}", result
    pipe = load(root)
    try:
        periods = pipe.plan(full=True).periods
        register(pipe.app.instance, "main", periods)
        job = build_definitions(pipe).resolve_job_def(job_name(pipe.name))
        span = {ASSET_PARTITION_RANGE_START_TAG: f"main|{periods[0]}", ASSET_PARTITION_RANGE_END_TAG: f"main|{periods[-1]}"}
        for tags in ({}, {WORKERS: str(too_many)}):  # no tag, and the declared count as a sensor tags it
            outcome = job.execute_in_process(instance=pipe.app.instance, raise_on_error=False, tags=span | tags)
            assert outcome.success
            said = [entry.user_message for entry in pipe.app.instance.all_logs(outcome.run_id)]
            assert any(lowered.removeprefix("warning: ") in line for line in said), said
        outcome = job.execute_in_process(instance=pipe.app.instance, raise_on_error=False,
                                         tags=span | {WORKERS: str(too_many + 1)})  # another count: strict
        assert not outcome.success
        (failure,) = [e for e in outcome.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
        assert failure.event_specific_data.user_failure_data.description.startswith(
            f"step 'chatgpt': tag {WORKERS}: workers must be a whole number from 1 to {max_workers()}")
        def source_ids() -> list[str]:
            return [r.id for r in pipe.store().records.list(pipe.app.use_branch("main").scope(), steps=["chatgpt"])]

        target = source_ids()[0]
        pipe.purge(target)  # its re-run takes one process: the purge completes in one go
        assert target not in source_ids()
        assert pipe.app.finish_interrupted_purge() is None  # nothing left to finish
        (rerun,) = pipe.app.instance.get_runs(limit=1)  # the purge's re-run: one process, whatever is declared
        assert rerun.tags.get(WORKERS) == "1", rerun.tags
    finally:
        pipe.close()


def test_a_declared_count_takes_one_process_for_an_embedder_no_worker_can_rebuild_whatever_the_cores():
    """The embedder is judged before the cores: a count over the cores with an embedder without for_worker()
    is one process (not the cores, which the store could not spread), with the line saying why."""
    from synthex_resources.store.fragment_append import usable_declared_workers

    class NoWorkerEmbedder:
        name = "no-worker"

    for declared in (2, max_workers() + 1):
        count, why = usable_declared_workers(declared, NoWorkerEmbedder())
        assert count == 1 and why == (f"ingest_workers={declared} declared; the embedder 'no-worker' cannot be "
                                      "rebuilt in a worker process (no for_worker()): one process used")
    assert usable_declared_workers(1, NoWorkerEmbedder()) == (1, None)


def test_sync_refuses_a_bad_worker_count_in_one_line_and_a_shared_toml_keeps_the_declared_one(project, tmp_path):
    from synthex import Pipeline

    result = cli("sync", "--workers", "0", "--project", str(project), check=False)
    assert result.returncode != 0 and result.stderr.strip().splitlines()[-1] == \
        f"error: workers must be a whole number from 1 to {max_workers()} (this machine's cores), not 0"
    pipe = load(project)
    try:
        with pytest.raises(BadInputError, match=r"^workers must be a whole number from 1 to \d+ .*, not 0$"):
            pipe.sync(workers=0)  # the Python API's sync: the same check
    finally:
        pipe.close()
    assert not (project / ".synthex" / "lancedb" / "records.lance").exists()
    path = tmp_path / "p.toml"
    Pipeline("m", ingest_workers=2, project_dir=tmp_path).to_toml(path)
    assert "ingest_workers = 2" in path.read_text()
    assert Pipeline.from_toml(path, project_dir=tmp_path).ingest_workers == 2
    Pipeline("m", project_dir=tmp_path).to_toml(path)
    assert "ingest_workers" not in path.read_text() and Pipeline.from_toml(path, project_dir=tmp_path).ingest_workers == 1
