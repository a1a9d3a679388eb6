"""Issue 34 item 4: an eval workspace's runs executed in this process, without a Dagster instance or run
(``RunEngine.IN_PROCESS``), leave the records a Dagster run leaves: same ids, content, provenance, periods and
vectors, for a pipeline with a source, a transform and key aggregates (whose one partition spans periods). A
failing step is the same one line either way. Nothing here is timed."""

from __future__ import annotations

import pytest
from conftest import locomo_conversation, write_json

from evals.architectures import Architecture, _hierarchical
from evals.benchmarks.locomo.benchmark import LoCoMo
from synthex.app.facade import RunEngine
from synthex.core.errors import SynthexError
from synthex_resources.embedder import MiniLMOnnxEmbedder

# What differs between any two runs of the same data (a run's own id, when its records were written).
RUN_SPECIFIC = ("run_id", "created_at")


def stored(pipe, root) -> list[dict]:
    """Every record of the workspace's store, without the run-specific fields, with its vector, the workspace's
    path (in a source record's metadata) as ``<root>``; by step and id."""
    import json

    from synthex_resources.store.filters import RecordFilter

    records = pipe.store().records
    out = []
    for row in records.rows(RecordFilter()):
        data = records.to_record(row).to_dict(with_embedding=True)
        kept = json.dumps({k: v for k, v in data.items() if k not in RUN_SPECIFIC})
        out.append(json.loads(kept.replace(json.dumps(str(root))[1:-1], "<root>")))
    return sorted(out, key=lambda d: (d["step"], d["id"]))


@pytest.fixture(scope="module")
def locomo_payload(tmp_path_factory):
    conv, _turns = locomo_conversation(tag="ip")
    sample = [{"sample_id": "conv-ip", "conversation": conv, "qa": []}]
    path = write_json(tmp_path_factory.mktemp("lme-ip") / "locomo.json", sample)
    source = LoCoMo().ingest(LoCoMo().load(path)[0])
    return source.filename, source.payload, source.source_format


def test_in_process_runs_leave_the_records_a_dagster_run_leaves(tmp_path, locomo_payload):
    filename, payload, fmt = locomo_payload
    arch = Architecture("hierarchical-expanded", _hierarchical, mode="hierarchical-expanded")
    embedder = MiniLMOnnxEmbedder()
    by_engine = {}
    for engine in RunEngine:
        root = tmp_path / engine.value
        pipe = arch.ingest(root, filename, payload, fmt, embedder, engine=engine)
        try:
            by_engine[engine] = stored(pipe, root)
            runs = pipe.runs()
            assert [r.status.value for r in runs] == ["completed"], runs
            # The in-process run opened no Dagster instance; the Dagster one recorded its run there.
            assert pipe.dagster_home.exists() is (engine is RunEngine.DAGSTER)
            assert bool(runs[0].dagster_run_ids) is (engine is RunEngine.DAGSTER)
            again = pipe.app.run(engine=engine, track_changes=False)
            assert again.steps == []  # the in-process run left nothing dirty: a later run plans no work
        finally:
            pipe.close()
    dagster, in_process = by_engine[RunEngine.DAGSTER], by_engine[RunEngine.IN_PROCESS]
    assert {d["step"] for d in dagster} == {"turns", "turns-in-context", "by-speaker", "by-entity", "by-topic"}
    assert in_process == dagster


def failing(record):
    raise ValueError(f"cannot read {record.id[:4]}")


def test_a_failing_step_is_the_same_one_line_either_way(tmp_path, locomo_payload):
    from synthex import Pipeline

    filename, payload, fmt = locomo_payload

    def build(data, root, fmt):
        pipe = Pipeline("failing", project_dir=root)
        pipe.source("turns", file=str(data), format=fmt)
        pipe.transform("broken", from_="turns", fn=failing)
        pipe.output("search", from_=["broken"], surface="search")
        return pipe

    arch = Architecture("failing", build, mode="bm25")
    errors = {}
    for engine in RunEngine:
        with pytest.raises(SynthexError) as raised:
            arch.ingest(tmp_path / engine.value, filename, payload, fmt, engine=engine)
        errors[engine] = str(raised.value)
    assert "broken" in errors[RunEngine.DAGSTER] and "\n" not in errors[RunEngine.DAGSTER], errors
    assert errors[RunEngine.IN_PROCESS] == errors[RunEngine.DAGSTER]
