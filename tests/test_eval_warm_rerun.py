"""Issue 21 "Speed": a second eval of the same data with the same architecture runs nothing. Each workspace keeps
the fingerprint of its last completed ingest (benchmark file, the definition's effective step versions and
settings, the embedder) and the table version it left (``evals.architectures.IngestMarker``); when both still
hold, the eval goes straight to the questions (no plan, no Dagster run), with the same figures and per-question
hits. A changed benchmark file or a changed definition over the same workspace runs again. Runs are counted on
``Pipeline.run`` and in the workspace's Dagster instance, never timed."""

from __future__ import annotations

import copy

import pytest
from conftest import go_offline, write_json
from test_eval_embedding_cache import figures
from test_evalloop import locomo_small

from evals.architectures import Architecture, IngestMarker, _contextual, resolve
from evals.benchmarks import SEARCH_WORKERS, evaluate
from evals.benchmarks.locomo.benchmark import LoCoMo
from evals.shared_embedder import MemoEmbedder
from synthex.app.pipeline import Pipeline
from synthex_resources.embedder import MiniLMOnnxEmbedder


def dagster_runs(workspace) -> int:
    """Runs recorded in the workspace's own Dagster instance (what a run launches)."""
    from synthex_assets.instance import open_instance

    pipe = _contextual(workspace / "conversation.json", workspace, "locomo-turns", stem=True)
    instance = open_instance(pipe)
    try:
        return len(instance.get_runs())
    finally:
        instance.dispose()


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    """``conversational`` on one LoCoMo-format conversation: a first eval, the same again, then with one turn of
    the file changed, then a changed definition over the same workspace. Returns (results by step, Pipeline.run
    calls by step, Dagster runs in the workspace after each step, the workspace)."""
    base = tmp_path_factory.mktemp("evalwarm")
    samples = locomo_small()[:1]
    data = write_json(base / "locomo.json", samples)
    work = base / "work"
    memo = MemoEmbedder(MiniLMOnnxEmbedder())  # one model and memo for every step: nothing here is timed
    calls: dict[str, int] = {}
    results: dict[str, list[dict]] = {}
    instance_runs: dict[str, int] = {}
    workspace = work / "contextual-stemmed" / "conv-0"
    enriched = Architecture("conversational", lambda d, r, f: _contextual(d, r, f, stem=True, enriched=True),
                            mode="conversational", workspace="contextual-stemmed")  # same workspace, new step code
    steps = [("first", data, resolve(["conversational"], None)), ("second", data, resolve(["conversational"], None)),
             ("one search thread", data, resolve(["conversational"], None))]  # test_eval_parallel_search.py: same hits
    changed = copy.deepcopy(samples)
    changed[0]["conversation"]["session_1"][0]["text"] = "Ann says: I sold my old bicycle (note changed)."
    changed_data = write_json(base / "locomo_changed.json", changed)
    steps += [("changed data", changed_data, resolve(["conversational"], None)),
              ("changed architecture", changed_data, [enriched])]
    real_run = Pipeline.run
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        for name, path, archs in steps:
            count = [0]

            def counting_run(self, *args, _count=count, **kwargs):
                _count[0] += 1
                return real_run(self, *args, **kwargs)

            mp.setattr(Pipeline, "run", counting_run)
            # Dagster runs, as `synthex run` does (counted in the workspace's instance below); the evals' default
            # engine runs in-process and leaves the same records (test_in_process_runs.py).
            results[name] = evaluate(LoCoMo(), path, archs, work, log=lambda _line: None, embedder=memo,
                                     search_workers=1 if name == "one search thread" else SEARCH_WORKERS,
                                     engine="dagster")
            calls[name] = count[0]
            mp.setattr(Pipeline, "run", real_run)
            instance_runs[name] = dagster_runs(workspace)
    return results, calls, instance_runs, workspace


def test_a_second_eval_on_the_same_data_starts_no_run(evals):
    results, calls, instance_runs, workspace = evals
    assert calls["first"] >= 1 and instance_runs["first"] >= 1  # the first eval ingested through a real run
    assert calls["second"] == 0  # not even a planning no-op run
    assert instance_runs["second"] == instance_runs["first"]
    assert IngestMarker(workspace).path.is_file()


def test_the_second_eval_gives_the_same_figures_and_hits(evals):
    results = evals[0]
    questions = results["first"][0]["questions"]
    assert questions and all(q["hits"] for q in questions)  # something was ranked: equality means something
    assert figures(results["second"]) == figures(results["first"])
    # searched on SEARCH_WORKERS threads (first, second) or one after another: the same figures and hits
    assert figures(results["one search thread"]) == figures(results["first"])


def test_changed_data_or_a_changed_architecture_runs_again(evals):
    results, calls, instance_runs, _ = evals
    assert calls["changed data"] == 1 and instance_runs["changed data"] == instance_runs["second"] + 1
    assert calls["changed architecture"] == 1
    assert instance_runs["changed architecture"] == instance_runs["changed data"] + 1
    first = {q["question_id"]: q["hits"] for q in results["first"][0]["questions"]}
    changed = {q["question_id"]: q["hits"] for q in results["changed data"][0]["questions"]}
    assert changed != first  # the new turn text was ingested and searched, not the old store's
