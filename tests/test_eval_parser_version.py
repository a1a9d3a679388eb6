"""A parser change and what it rewrites. A format registered with its version (``VersionedParser``:
``pipeline.format(..., version=)``, a plugin's) puts that version in the version of the sources reading it,
so a changed parser rewrites their records and they carry what the new one records; an unchanged one skips.
The evals' own benchmark formats stay unversioned (their record ids, and so every eval figure, as before): an
eval workspace whose marker names another parser version is rebuilt cold instead. Real LanceDB and MiniLM;
runs are counted through ``Architecture.ingest``'s ``run_times``, never timed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evals.architectures import Architecture
from synthex.app.pipeline import Pipeline
from synthex.core.importers import SourceItem
from synthex_resources.embedder import MiniLMOnnxEmbedder

FORMAT = "test-turns"
TURNS = [{"id": f"s{n // 3}_{n % 3}", "text": f"turn {n}: we talked about the ryokan in Kyoto"} for n in range(6)]


def turns_v1(path: Path) -> list[SourceItem]:
    return [SourceItem(key=t["id"], content=t["text"], created_at="2024-01-05T00:00:00Z",
                       metadata={"chat": {"session_id": t["id"].split("_")[0]}}) for t in json.loads(path.read_text())]


def turns_v2(path: Path) -> list[SourceItem]:
    """v1's items, each also recording its place in its session (``chat.session_turn``)."""
    items = turns_v1(path)
    for item in items:
        item.metadata["chat"]["session_turn"] = int(item.key.split("_")[1])
    return items


def architecture(parse, version: str | None) -> Architecture:
    def build(data: Path, root: Path, fmt: str) -> Pipeline:
        pipe = Pipeline("parsed", project_dir=root)
        pipe.format(fmt, parse, version=version)
        pipe.source("turns", file=str(data), format=fmt)
        pipe.output("search", from_=["turns"], surface="search")
        return pipe

    return Architecture("parsed", build, workspace="parsed")


def ingest(root: Path, arch: Architecture, embedder) -> tuple[int, list[dict]]:
    """Runs the ingest started, and the workspace's turn records' chat metadata by key."""
    runs: list[float] = []
    pipe = arch.ingest(root, "turns.json", json.dumps(TURNS), FORMAT, embedder=embedder, run_times=runs)
    try:
        records = pipe.store().records.list(pipe.app.use_branch("main").scope(), steps=["turns"])
        return len(runs), sorted((r.meta("chat") for r in records), key=json.dumps)
    finally:
        pipe.close()


@pytest.fixture(scope="module")
def embedder():
    return MiniLMOnnxEmbedder()


def test_a_changed_parser_reingests_and_an_unchanged_one_skips(tmp_path, embedder):
    root = tmp_path / "workspace"
    runs, first = ingest(root, architecture(turns_v1, "v1"), embedder)
    assert runs == 1 and len(first) == len(TURNS)
    assert not any("session_turn" in chat for chat in first)
    assert ingest(root, architecture(turns_v1, "v1"), embedder) == (0, first)  # unchanged: skipped

    runs, second = ingest(root, architecture(turns_v2, "v2"), embedder)
    assert runs == 1  # the parser changed: ingested again
    assert len(second) == len(TURNS)  # the old parser's records replaced, none left beside the new
    assert sorted(chat["session_turn"] for chat in second) == [0, 0, 1, 1, 2, 2]
    assert ingest(root, architecture(turns_v2, "v2"), embedder) == (0, second)  # unchanged again: skipped

    runs, back = ingest(root, architecture(turns_v1, "v1"), embedder)  # and back: the field goes
    assert runs == 1 and back == first


def test_the_benchmark_formats_keep_their_record_ids_and_name_their_parsers_version():
    """The evals plugin's formats are registered unversioned, so a source reading one has the config (and its
    records the ids) it always had: a version would be part of every record id and move every eval figure
    (the hierarchical aggregates order their turns by id). Their parsers' versions, the hash of the module
    that parses, are what ``IngestMarker`` compares instead."""
    from evals.benchmarks.locomo import data as locomo
    from evals.benchmarks.longmemeval import data as longmemeval
    from evals.formats import benchmark_parser_versions
    from synthex.core.importers.formats import module_version

    pipe = Pipeline("formats", project_dir=Path("/nonexistent"))
    versions = benchmark_parser_versions()
    for fmt, module in [("longmemeval-turns-official", longmemeval), ("longmemeval-turns-any", longmemeval),
                        ("locomo-turns", locomo)]:
        pipe.source(fmt, file="data.json", format=fmt)
        assert "parser" not in pipe.steps[fmt].config()
        assert versions[fmt] == module_version(module)
    assert module_version(longmemeval) != module_version(locomo)


LME_QUESTION = {"question_id": "q1", "question_type": "single-session-user", "question": "Where is the ryokan?",
                "answer": "Kyoto", "question_date": "2023/05/30 (Tue) 10:00", "haystack_session_ids": ["s1", "s2"],
                "haystack_dates": ["2023/05/20 (Sat) 10:00", "2023/05/21 (Sun) 10:00"], "answer_session_ids": ["s1"],
                "haystack_sessions": [[{"role": "user", "content": "We stayed at a ryokan in Kyoto.", "has_answer": True},
                                       {"role": "assistant", "content": "Lovely."}],
                                      [{"role": "user", "content": "I baked sourdough bread today."}]]}


def test_a_workspace_another_parser_version_made_is_rebuilt_cold_and_then_skipped(tmp_path, embedder):
    """A real LongMemEval workspace: ingested once, skipped when nothing changed; its marker naming another
    parser version (an edit of the LongMemEval loader since) -> the workspace is discarded and ingested cold
    (a file left in it is gone), the same records come back, and the next eval skips again."""
    from evals.architectures import IngestMarker, resolve

    [arch] = resolve(["raw-bm25"], None)
    root = tmp_path / "workspace"
    payload = json.dumps([LME_QUESTION])

    def ingest_lme() -> tuple[int, list[str]]:
        runs: list[float] = []
        pipe = arch.ingest(root, "question.json", payload, "longmemeval-turns-official", embedder=embedder,
                           run_times=runs)
        try:
            return len(runs), sorted(r.id for r in pipe.store().records.list(pipe.app.use_branch("main").scope()))
        finally:
            pipe.close()

    runs, ids = ingest_lme()
    assert runs == 1 and len(ids) >= 2
    assert ingest_lme() == (0, ids)
    marker = IngestMarker(root)
    stored = json.loads(marker.path.read_text())
    marker.path.write_text(json.dumps(stored | {"parser": "source:an-older-loader"}))
    (root / "left-by-the-old-ingest").write_text("x")
    assert ingest_lme() == (1, ids)  # rebuilt cold: one run, the same record ids
    assert not (root / "left-by-the-old-ingest").exists()
    assert list(tmp_path.glob(".workspace.discarded*")) == []
    assert ingest_lme() == (0, ids)


def test_a_discard_cut_short_is_finished_by_the_next_ingest(tmp_path):
    """A kill between the rename and the delete leaves the workspace aside: the next ingest's first step
    removes it (the kill cannot leave a half-deleted workspace in place: the rename is one step); whatever
    stands aside (a file too) is removed, and a workspace that is a link is unlinked, its target kept."""
    from evals.architectures import discard_workspace, drop_discarded

    root = tmp_path / "workspace"
    (root / ".synthex").mkdir(parents=True)
    (root / ".synthex" / "eval-ingest.json").write_text("{}")
    aside = tmp_path / ".workspace.discarded.1-1"
    os.replace(root, aside)  # where a kill after discard_workspace's rename leaves it
    drop_discarded(root)
    assert not aside.exists() and not root.exists()
    (tmp_path / ".workspace.discarded.2-2").write_text("x")  # not a folder: a fixed aside name would block
    root.mkdir()
    discard_workspace(root)
    assert not root.exists() and list(tmp_path.glob(".workspace.discarded*")) == []
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "kept").write_text("x")
    root.symlink_to(target)
    discard_workspace(root)
    assert not root.exists() and (target / "kept").exists()
    drop_discarded(root)
    assert list(tmp_path.glob(".workspace.discarded*")) == []


def test_a_format_version_must_be_a_non_empty_string():
    from synthex.core.errors import PipelineDefinitionError

    with pytest.raises(PipelineDefinitionError, match=r"^format 'test-turns': version must be a non-empty "
                                                      r"string, not ''$"):
        Pipeline("parsed", project_dir=Path("/nonexistent")).format(FORMAT, turns_v1, version="")
