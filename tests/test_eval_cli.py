"""`synthex eval locomo` end to end on a small fixture in the official format (the CLI in this process); then
`--compare main,BRANCH` on the same project: both in one table, the branch computing only what it owns."""

import json
import sys
from pathlib import Path

from conftest import cli, locomo_conversation, write_json, write_project

from synthex_resources.record_store import RECORDS, open_store


def fixture():
    samples = []
    for c in range(2):
        conv, turns = locomo_conversation(shift=c, tag=str(c))
        qa = [{"question": f"Who {topic}?", "answer": speaker, "evidence": [f"D{s}:{t}"], "category": 4}
              for s, t, speaker, topic in turns if t == 1]
        qa.append({"question": "What did Ann never do?", "adversarial_answer": "x", "evidence": [], "category": 5})
        samples.append({"sample_id": f"conv-{c}", "conversation": conv, "qa": qa})
    return samples


def test_eval_locomo_compare_json_chart_and_report(tmp_path, small_export, monkeypatch):
    data = write_json(tmp_path / "locomo10.json", fixture())
    project = write_project(tmp_path / "proj", small_export)
    # Keep Mem0's state out of ~: Mem0 reads MEM0_DIR when first imported (by this command, in this process);
    # if something imported it earlier, point its module-level copy here too.
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0home"))
    for module in ("mem0.memory.setup", "mem0.memory.main"):
        if module in sys.modules:
            monkeypatch.setattr(sys.modules[module], "mem0_dir", str(tmp_path / "mem0home"))
    proc = cli("eval", "locomo", "--data", data, "--compare", "raw-bm25,raw-hybrid,main,mem0,conversational",
               "--json", "--project", project, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [r["architecture"] for r in out["results"]] == ["raw-bm25", "raw-hybrid", "main", "conversational", "mem0"]
    mem0 = out["results"][4]
    conversational = out["results"][3]
    assert conversational["mode"] == "conversational" and conversational["metrics"]["turn"]["recall_any@10"] >= 0.8
    assert mem0["n_questions"] == 6 and mem0["metrics"]["turn"]["recall_any@10"] >= 0.8
    first = out["results"][0]
    assert {"benchmark", "pipeline", "branch", "n_questions", "metrics", "by_category"} <= set(first)
    assert first["n_questions"] == 6  # the evidence-less adversarial items have no gold
    assert {"recall_any@5", "recall_all@10", "ndcg_any@10", "mrr"} <= set(first["metrics"]["turn"])
    assert first["metrics"]["turn"]["recall_any@10"] >= 0.8  # distinctive wording: lexical finds it
    main = out["results"][2]
    assert main["pipeline"] == "test-memory"  # the project's own pipeline, fed the benchmark's turns
    assert main["metrics"]["session"]["recall_any@10"] >= 0.8  # 1.0 when measured: drill-down reaches the turns
    assert out["chart"].endswith(".png") and (project / ".synthex" / "evals").exists()
    assert Path(out["chart"]).stat().st_size > 10_000
    report = cli("eval", "report", "--project", project, check=False)
    assert report.returncode == 0 and "| raw-hybrid |" in report.stdout
    compare_main_and_a_branch(project, data)  # the same project: main's workspaces are built already


def compare_main_and_a_branch(project: Path, data: Path) -> None:
    """`synthex eval locomo --compare main,BRANCH`: both in one table, the branch computing only what it owns
    (was test_branch_eval, which built main's workspaces again on a project of its own)."""
    from test_branches import make_branch

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
