"""`synthex eval locomo --compare main,BRANCH`: both in one table, the branch computing only what it owns."""

import json

from conftest import cli, write_json, write_project
from test_branches import make_branch
from test_eval_cli import fixture

from synthex_resources.record_store import RECORDS, open_store


def test_eval_compares_main_and_a_branch_in_one_table(tmp_path, small_export):
    data = write_json(tmp_path / "locomo10.json", fixture())
    project = write_project(tmp_path / "proj", small_export)
    make_branch(project)
    proc = cli("eval", "locomo", "--data", data, "--compare", "main,better-summaries", "--json", "--project", project,
               check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(r["architecture"], r["branch"]) for r in out["results"]] == [
        ("main", "main"), ("better-summaries", "better-summaries")]
    assert all(r["n_questions"] == 6 for r in out["results"]) and out["chart"].endswith(".png")
    assert all(r["metrics"]["session"]["recall_any@10"] >= 0.8 for r in out["results"]), out["results"]
    # One workspace per conversation holds both: the branch has rows only for the steps it overrides.
    workspaces = sorted((project / ".synthex" / "evals" / "work" / "locomo" / "project").glob("conv-*"))
    assert len(workspaces) == 2
    store = open_store(str(workspaces[0] / ".synthex" / "lancedb"))
    own = {r["step"] for r in store.tables.read(RECORDS, "branch = 'better-summaries'", ["step"])}
    assert own == {"summaries", "monthly", "world-model"}
    assert {r["step"] for r in store.tables.read(RECORDS, "branch = 'main'", ["step"])} >= {"chatgpt", "transcripts"}
