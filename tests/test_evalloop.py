"""The experiment loop in Python (issue 21): ``pipeline.eval`` on main, a branch overridden in this process,
run, ``branch.eval``, ``compare`` / ``compare_chart``, promote; the same figures as ``synthex eval`` on the same
project, both doors writing the ``eval_results`` table; an unknown benchmark is one line."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from conftest import cli, go_offline, load, locomo_conversation, write_json
from test_branches import make_branch

from evals.result import EvalResult
from synthex.core.branch_files import branch_module
from synthex.core.errors import PipelineDefinitionError, SynthexError
from synthex_resources.sql import EVAL_RESULTS_FILE

BRANCH = "better-summaries"


def locomo_small() -> list[dict]:
    """Two conversations in LoCoMo's JSON format, questions of four categories (one adversarial, unscored)."""
    samples = []
    for c in range(2):
        conv, turns = locomo_conversation(shift=c, tag=str(c))
        by_id = {(s, t): (speaker, topic) for s, t, speaker, topic in turns}
        qa = [{"question": f"Who {by_id[(1, 1)][1]}?", "answer": by_id[(1, 1)][0], "evidence": ["D1:1"], "category": 4},
              {"question": f"When did {by_id[(2, 2)][0]} say they {by_id[(2, 2)][1]}?", "answer": "6 May 2023",
               "evidence": ["D2:2"], "category": 2},
              {"question": f"Did {by_id[(1, 3)][0]} {by_id[(1, 3)][1]} and {by_id[(3, 4)][1]}?", "answer": "yes",
               "evidence": ["D1:3", "D3:4"], "category": 1},
              {"question": "What did Ann never do?", "adversarial_answer": "x", "evidence": [], "category": 5}]
        samples.append({"sample_id": f"conv-{c}", "conversation": conv, "qa": qa})
    return samples


@pytest.fixture(scope="module")
def loop(tmp_path_factory, ran_project):
    """The loop of the issue, once, on a copy of the ran project: (project, data, main result, branch result,
    the comparison table, the chart, what promote copied)."""
    base = tmp_path_factory.mktemp("evalloop")
    root = ran_project.copy(base / "proj")
    data = write_json(base / "locomo_small.json", locomo_small())
    make_branch(root)  # branches/better-summaries.py: what promote writes into pipeline.py
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        pipeline = load(root)
        try:
            main = pipeline.eval("locomo", data=data)
            # the prompt the branch file defines: promote checks the branch made here is the file's
            better = branch_module(root, BRANCH).short_summary
            exp = pipeline.branch(BRANCH)
            exp.transform("summaries", from_="transcripts", fn=better)
            exp.run()
            result = exp.eval("locomo", data=data)
            table = result.compare(main)
            chart = result.compare_chart(main, base / "compare.png")
            promoted = None
            if result.turn["recall_all@10"] >= main.turn["recall_all@10"]:
                promoted = exp.promote()
        finally:
            pipeline.close()
    return root, data, main, result, table, chart, promoted


def test_the_loop_end_to_end(loop):
    root, data, main, result, table, chart, promoted = loop
    assert isinstance(main, EvalResult) and isinstance(result, EvalResult)
    assert (main.benchmark, main.branch, main.pipeline) == ("locomo", "main", "test-memory")
    assert (result.benchmark, result.branch) == ("locomo", BRANCH)
    for r in (main, result):
        assert r.n_questions == 6  # 3 scored per conversation; the adversarial items have no evidence
        assert {"recall_any@10", "recall_all@10", "ndcg_any@10", "mrr"} <= set(r.turn) <= set(r.session) | set(r.turn)
        assert r.session["recall_any@10"] >= 0.8  # the project's summaries drill down to the evidence turns
        assert set(r.by_category) == {"multi-hop", "temporal", "single-hop"}
        assert [q["question_id"] for q in r.questions] == [f"conv-{c}/q{i}" for c in range(2) for i in range(3)]
        assert {"turn", "session", "by_category"} == set(r.protocol) and "top 10" in r.protocol["turn"]
        assert r.to_dict()["metrics"]["turn"] == r.turn and json.dumps(r.to_dict())
    lines = table.splitlines()
    assert lines[0] == f"| level | metric | {BRANCH} | main | delta |"
    row = next(line for line in lines if line.startswith("| turn | recall_all@10 |"))
    delta = result.turn["recall_all@10"] - main.turn["recall_all@10"]
    assert row == (f"| turn | recall_all@10 | {result.turn['recall_all@10']:.4f} | {main.turn['recall_all@10']:.4f} "
                   f"| {delta:+.4f} |")
    assert sum(line.startswith("| session |") for line in lines) >= 7
    assert chart.suffix == ".png" and chart.stat().st_size > 10_000
    # promote ran (the branch scored no worse): main now applies the branch and holds its summaries
    assert promoted and set(promoted) == {"summaries", "monthly", "world-model"}, promoted
    assert f'apply_branch("{BRANCH}"' in (root / "pipeline.py").read_text() or BRANCH in (root / "pipeline.py").read_text()
    main_summaries = load(root).records("summaries")
    assert main_summaries and all(r.content.startswith("In short: ") for r in main_summaries)
    # both results are in the eval_results table, one row per question, under their own eval runs
    con = duckdb.connect(str(root / ".synthex" / "evals" / EVAL_RESULTS_FILE), read_only=True)
    try:
        rows = con.execute("select eval_run_id, branch, count(*) from eval_results group by 1, 2 order by 2").fetchall()
    finally:
        con.close()
    assert sorted((b, n) for _, b, n in rows) == [(BRANCH, 6), ("main", 6)]
    assert {run for run, _, _ in rows} == {main.eval_run_id, result.eval_run_id}


def test_cli_and_python_give_the_same_figures(loop):
    """``synthex eval locomo --json`` and ``pipeline.eval`` on the same project and branch: the same figures,
    to four decimals, and the same ranked hits per question; both land in eval_results. Main only: after the
    promote it is the branch's definition, so it covers main's steps and the overridden ones (each door
    costs ~4 s even with nothing to compute)."""
    root, data, *_ = loop
    for branch in ("main",):
        proc = cli("eval", "locomo", "--data", data, "--compare", branch, "--run-id", f"cli-{branch}", "--json",
                   "--project", root)
        from_cli = json.loads(proc.stdout)
        from_cli = from_cli["results"][0] if "results" in from_cli else from_cli
        pipeline = load(root)
        try:
            from_python = pipeline.for_branch(branch).eval("locomo", data=data, run_id=f"py-{branch}")
        finally:
            pipeline.close()
        assert from_cli["n_questions"] == from_python.n_questions == 6
        for level in ("turn", "session"):
            assert {m: round(v, 4) for m, v in from_cli["metrics"][level].items()} == \
                   {m: round(v, 4) for m, v in from_python.metrics(level).items()}, level
        assert from_cli["by_category"] == from_python.by_category
        con = duckdb.connect(str(root / ".synthex" / "evals" / EVAL_RESULTS_FILE), read_only=True)
        try:
            hits = {run: con.execute("select question_id, hits, recall_all_at_10 from eval_results where "
                                     "eval_run_id = ? order by 1", [run]).fetchall()
                    for run in (f"cli-{branch}", f"py-{branch}")}
        finally:
            con.close()
        assert len(hits[f"cli-{branch}"]) == 6 and hits[f"cli-{branch}"] == hits[f"py-{branch}"]
        assert [(q["question_id"], q["hits"]) for q in from_python.questions] == \
               [(qid, list(h)) for qid, h, _ in hits[f"py-{branch}"]]


def test_unknown_benchmark_is_one_line_naming_the_known(loop, tmp_path, monkeypatch):
    root, data, *_ = loop
    pipeline = load(root)
    with pytest.raises(PipelineDefinitionError) as err:
        pipeline.eval("locomoo", data=data)
    message = str(err.value)
    assert "\n" not in message and "'locomoo'" in message and "locomo" in message and "longmemeval" in message
    # no plugin registers evaluators (evals not installed): one line saying so, before any work
    import synthex.core.plugins as plugins

    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    with pytest.raises(SynthexError) as err:
        pipeline.eval("locomo", data=data)
    assert "\n" not in str(err.value) and "no benchmark is installed" in str(err.value)
    assert not (tmp_path / "x").exists()
    assert Path(data).exists()
