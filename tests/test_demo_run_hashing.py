"""Issue 24, the demo's full run: a run hashes each prompt function's source once (not once per work item,
record and audit), and writes its records without importing lancedb (the store's write path is pylance's).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import env_without_openai, load, write_project

from synthex.core.demo.generate import generate
from synthex.core.steps.base import SourceHashes, callable_source_hash

# A `synthex run` (the CLI's own entry point) in this process, counting how often each function's source is
# hashed: the project's hash function is wrapped, not replaced (it still computes every hash).
RUN_COUNTING_HASHES = """
import collections, json, sys
import synthex.core.steps.base as base

counts = collections.Counter()
hash_source = base.callable_source_hash

def counting(fn):
    counts[fn.__qualname__] += 1
    return hash_source(fn)

base.callable_source_hash = counting
from synthex.surfaces.cli import main

main(["run"], standalone_mode=False)
print(json.dumps({"hashed": counts, "lancedb": "lancedb" in sys.modules, "dagster": "dagster" in sys.modules}))
"""


@pytest.fixture(scope="module")
def ran_in_a_subprocess(tmp_path_factory):
    """A tiny project (4 conversations, one month) run once by ``synthex run`` in its own process."""
    base = tmp_path_factory.mktemp("demorun")
    export = base / "exports" / "conversations.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(generate(conversations=4, months=1, seed=3)))
    root = write_project(base / "proj", export)
    proc = subprocess.run([sys.executable, "-c", RUN_COUNTING_HASHES], cwd=root, capture_output=True, text=True,
                          env=env_without_openai(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_run_hashes_each_prompt_functions_source_once(ran_in_a_subprocess):
    root, seen = ran_in_a_subprocess
    pipe = load(root)
    try:
        records = {name: pipe.records(name) for name in pipe.steps if name != "chatgpt"}
    finally:
        pipe.close()
    # Every step made records (version_hash was asked per work item and per record, the audit per record:
    # hundreds of times in all before), and each function of the template was hashed exactly once.
    assert all(records.values()) and sum(len(r) for r in records.values()) >= 2 * len(records)
    assert seen["hashed"] == {"extract_transcript": 1, "summarize": 1, "monthly_reflection": 1,
                              "world_model_prompt": 1}
    # ... and the records carry that hash, as they did when it was computed per record.
    from synthex.prompts import world_model_prompt

    [state] = records["world-model"][-1:]
    assert state.audit["prompt_template_hash"] == callable_source_hash(world_model_prompt)


def test_a_run_writes_without_importing_lancedb(ran_in_a_subprocess):
    root, seen = ran_in_a_subprocess
    assert seen["dagster"] is True  # the run went through Dagster (the check below is not vacuous)
    assert seen["lancedb"] is False
    pipe = load(root)
    try:
        # What it wrote reads back, and the index maintenance the run did is there (pylance built it).
        names = {i.name for i in pipe.store().records_table().list_indices()}
        hits = pipe.search("the", mode="bm25")
    finally:
        pipe.close()
    assert {"content_idx", "id_idx", "step_idx", "branch_idx"} <= names
    assert hits


def test_source_hashes_compute_once_per_function_and_follow_a_new_function():
    hashes = SourceHashes()

    def prompt(record):
        return "a"

    def edited(record):
        return "b"

    assert hashes.of(prompt) == hashes.of(prompt) == callable_source_hash(prompt)
    assert hashes.computed == 1
    assert hashes.of(edited) == callable_source_hash(edited) != hashes.of(prompt)
    assert hashes.computed == 2 and hashes.of(None) is None
