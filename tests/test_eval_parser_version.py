"""An eval workspace ingested by one version of a source format's parser is ingested again when the parser
changes (review finding): the parser's version (``VersionedParser``: a plugin's formats, ``pipeline.format(...,
version=)``) is part of the version of the sources reading the format, so the eval's ingest fingerprint
(``evals.architectures.ingest_fingerprint``, the definition's effective versions) changes, the run rewrites
the records the old parser made, and they carry what the new one records; an unchanged parser still skips the
runs. Real LanceDB and MiniLM; runs are counted through ``Architecture.ingest``'s ``run_times``, never timed."""

from __future__ import annotations

import json
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


def test_the_benchmark_formats_version_their_parsers_by_their_modules_source():
    """The evals plugin's formats: a source reading one has its parser's version in its step's config, the
    hash of the module that parses (an edit of ``_turn_items`` changes it)."""
    from evals.benchmarks.locomo import data as locomo
    from evals.benchmarks.longmemeval import data as longmemeval
    from synthex.core.importers.formats import module_version

    pipe = Pipeline("formats", project_dir=Path("/nonexistent"))
    for fmt, module in [("longmemeval-turns-official", longmemeval), ("longmemeval-turns-any", longmemeval),
                        ("locomo-turns", locomo)]:
        pipe.source(fmt, file="data.json", format=fmt)
        assert pipe.steps[fmt].config()["parser"] == module_version(module)
    assert module_version(longmemeval) != module_version(locomo)


def test_a_format_version_must_be_a_non_empty_string():
    from synthex.core.errors import PipelineDefinitionError

    with pytest.raises(PipelineDefinitionError, match=r"^format 'test-turns': version must be a non-empty "
                                                      r"string, not ''$"):
        Pipeline("parsed", project_dir=Path("/nonexistent")).format(FORMAT, turns_v1, version="")
