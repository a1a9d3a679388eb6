"""A benchmark added from outside the package: a plugin module in a tmp dir, declared in a tmp ``*.dist-info``
(entry-point group ``synthex.plugins``), registered through ``register_benchmarks`` and run through
`synthex eval toy` in a subprocess; and the built-ins registered through the same hook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from conftest import env_without_openai, write_json

from evals.benchmarks import Benchmark, benchmark_registry
from evals.benchmarks.longmemeval.benchmark import LongMemEval
from synthex.core.errors import BadInputError
from synthex_resources.sql import eval_results_path

# The module a newcomer writes (docs/extending.md, "How to add a benchmark"): everything a benchmark needs.
TOY_PLUGIN = '''
"""A toy benchmark: conversations of turns in sessions, questions naming their evidence turns."""

import json
from pathlib import Path

from evals.benchmarks import Benchmark, BenchmarkQuestion, BenchmarkSource
from synthex.core.importers.base import read_json_objects


class Toy(Benchmark[dict]):
    name = "toy"
    title = "Toy"
    description = "Toy retrieval: each conversation's turns as JSONL records."

    def load(self, data: Path) -> list[dict]:
        return [conv for _, conv in read_json_objects(data, "a toy benchmark", "conversation")]

    def ingest(self, conversation: dict) -> BenchmarkSource:
        lines = [json.dumps({"id": t["id"], "content": t["text"], "created_at": t["date"],
                             "metadata": {"chat": {"message_id": t["id"], "session_id": t["session"]}}})
                 for t in conversation["turns"]]
        return BenchmarkSource(conversation["id"], "turns.jsonl", "\\n".join(lines), "jsonl")

    def questions(self, conversation: dict) -> list[BenchmarkQuestion]:
        return [BenchmarkQuestion(f"{conversation['id']}/q{i}", q["question"], frozenset(q["evidence"]),
                                  frozenset(self.session_of(conversation, e) for e in q["evidence"]), q["category"])
                for i, q in enumerate(conversation["questions"])]

    def session_of(self, conversation: dict, turn_id: str) -> str:
        return next((t["session"] for t in conversation["turns"] if t["id"] == turn_id), "?")


def register_benchmarks(registry):
    registry.register(Toy.name, Toy)
'''

BROKEN_PLUGIN = '''
def register_benchmarks(registry):
    raise RuntimeError("this plugin's benchmark hook is broken")
'''

NOT_A_BENCHMARK_PLUGIN = '''
def register_benchmarks(registry):
    registry.register("dict", dict)
'''


def write_plugin(site: Path, module: str, source: str) -> None:
    """``module`` importable from ``site`` and declared there as a ``synthex.plugins`` entry point (importlib.metadata
    finds ``*.dist-info`` folders on sys.path)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    dist = site / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[synthex.plugins]\n{module} = {module}\n")


def turn(turn_id: str, session: str, text: str) -> dict:
    return {"id": turn_id, "session": session, "text": text, "date": "2024-05-01T10:00:00Z"}


# Words chosen so that BM25 finds exactly what is meant: no word is shared between turns, and the "missed"
# question shares its words with a distractor turn only (another session than its gold turn's).
TOY_DATA = [
    {"id": "c1", "turns": [turn("t1", "s1", "Adopted ginger kitten Biscuit."),
                           turn("t2", "s1", "Orchard harvest ran late."),
                           turn("t3", "s2", "Sister practises cello nightly.")],
     "questions": [{"question": "ginger kitten?", "evidence": ["t1"], "category": "found"},
                   {"question": "orchard harvest?", "evidence": ["t3"], "category": "missed"}]},
    {"id": "c2", "turns": [turn("t1", "s1", "Finished Lisbon marathon proudly."),
                           turn("t2", "s2", "Sourdough starter bubbling nicely.")],
     "questions": [{"question": "Lisbon marathon?", "evidence": ["t1"], "category": "found"}]},
]


def synthex(*args: str, site: Path) -> subprocess.CompletedProcess:
    env = env_without_openai()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_a_benchmark_plugin_from_outside_runs_through_synthex_eval(tmp_path):
    site = tmp_path / "site"
    write_plugin(site, "toy_benchmark", TOY_PLUGIN)
    write_plugin(site, "broken_benchmarks", BROKEN_PLUGIN)
    write_plugin(site, "not_a_benchmark", NOT_A_BENCHMARK_PLUGIN)
    data = write_json(tmp_path / "toy.json", TOY_DATA)
    project = tmp_path / "proj"
    project.mkdir()

    listing = synthex("eval", "--help", site=site)
    assert listing.returncode == 0, listing.stderr
    commands = listing.stdout.split("Commands:")[1].split()
    assert {"locomo", "longmemeval", "report", "toy"} <= set(commands)
    # The broken plugin is reported, one line, and does not take the others down.
    assert ("warning: plugin 'broken_benchmarks' (broken_benchmarks) failed to load: register_benchmarks: "
            "RuntimeError: this plugin's benchmark hook is broken") in listing.stderr.splitlines()
    assert ("warning: plugin 'dict' (builtins) failed to load: register_benchmarks: <class 'dict'> is not a "
            "concrete subclass of evals.benchmarks.Benchmark") in listing.stderr.splitlines()
    assert "dict" not in commands and len(listing.stderr.splitlines()) == 2  # each failure said once

    proc = synthex("eval", "toy", "--data", str(data), "--compare", "raw-bm25", "--json", "--run-id", "toy-run",
                   "--project", str(project), site=site)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["benchmark"], result["architecture"], result["conversations"]) == ("toy", "raw-bm25", 2)
    assert result["n_questions"] == 3 and "qa" not in result
    found, missed = result["by_category"]["found"], result["by_category"]["missed"]
    assert found["n"] == 2 and found["recall_any@10"] == 1.0 and found["mrr"] == 1.0
    assert missed["n"] == 1 and missed["recall_any@10"] == 0.0 and missed["mrr"] == 0.0
    assert result["metrics"]["turn"]["recall_any@10"] == round(2 / 3, 4)
    assert result["metrics"]["session"]["recall_any@1"] == round(2 / 3, 4)  # the distractor's session is not s2

    # One eval_results row per question, under the ids the toy gave them.
    with duckdb.connect(str(eval_results_path(project / ".synthex")), read_only=True) as con:
        rows = con.execute("select question_id, category, hits, recall_any_at_10, session_recall_any_at_10 "
                           "from eval_results where eval_run_id = 'toy-run' order by question_id").fetchall()
    assert rows == [("c1/q0", "found", ["t1"], 1.0, 1.0), ("c1/q1", "missed", ["t2"], 0.0, 0.0),
                    ("c2/q0", "found", ["t1"], 1.0, 1.0)]

    # Bad data: one line naming the file, exit 2 (bad input), before any work.
    bad = write_json(tmp_path / "bad.json", {"not": "a list"})
    refused = synthex("eval", "toy", "--data", str(bad), "--compare", "raw-bm25", "--project", str(project), site=site)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [error] = [line for line in refused.stderr.splitlines() if not line.startswith("warning: ")]
    assert error.startswith(f"error: {bad}: expected a toy benchmark (a JSON list of conversations), found an object")


def test_the_built_in_benchmarks_come_through_the_same_hook():
    registry = benchmark_registry()
    assert registry.names()[:2] == ["locomo", "longmemeval"] and registry.failures == []
    assert all(issubclass(cls, Benchmark) for _, cls in registry.items())
    assert LongMemEval("any").result_name == "longmemeval-any"
    with pytest.raises(BadInputError, match="longmemeval: unknown protocol 'oracle'; expected one of official, any"):
        LongMemEval("oracle")


def test_a_peer_the_benchmark_does_not_have_is_refused_in_one_line(tmp_path):
    # LongMemEval has the mem0 peer now (issue 34 item 3); the toy plugin's benchmark has none.
    site = tmp_path / "site"
    write_plugin(site, "toy_benchmark", TOY_PLUGIN)
    data = write_json(tmp_path / "toy.json", [])  # refused before the data is read
    out = synthex("eval", "toy", "--data", str(data), "--compare", "raw-bm25,mem0", "--project", str(tmp_path),
                  site=site)
    assert out.returncode == 2
    assert out.stderr.strip() == "error: benchmark 'toy' has no peer 'mem0'; peers: none"
    assert "mem0" in LongMemEval.peers
