"""Issue 24, the no-change ``synthex run``: when every source's change token is the one stored, the run
knows it from ``cdc.tokens.json`` (``TokenSnapshot``) without importing DuckDB; a changed source still
goes to the CDC state in DuckDB and is detected; every token write removes the snapshot first, so it
never disagrees with the database."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli, env_without_openai, load

from synthex_resources.cdc_state import CDC_FILE, TOKENS_FILE, CdcState, TokenSnapshot, open_cdc_state

NO_CHANGE_RUN = """
import json, sys
from click.testing import CliRunner
from synthex.surfaces.cli import main

result = CliRunner().invoke(main, ["run"], catch_exceptions=False)
print(json.dumps({"exit": result.exit_code, "output": result.stdout,
                  "imported": sorted(m for m in ("duckdb", "lancedb", "dagster") if m in sys.modules)}))
"""


@pytest.fixture(scope="module")
def project(ran_project, tmp_path_factory) -> Path:
    """The ran project (copied: its CDC file is a new inode, so its snapshot no longer counts) after one more
    run, which finds nothing to do and writes the snapshot from DuckDB."""
    root = ran_project.copy(tmp_path_factory.mktemp("nochange") / "proj")
    assert TokenSnapshot.load(root / ".synthex") is None  # the copied snapshot names the original file
    assert "nothing to run" in cli("run", cwd=root).stdout
    return root


def test_a_no_change_run_imports_no_duckdb_and_says_nothing_to_do(project):
    snapshot = TokenSnapshot.load(project / ".synthex")
    assert snapshot is not None and snapshot.tokens  # what lets the run skip DuckDB
    proc = subprocess.run([sys.executable, "-c", NO_CHANGE_RUN], cwd=project, capture_output=True, text=True,
                          env=env_without_openai(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["exit"] == 0 and "nothing to run" in seen["output"], seen["output"]
    assert seen["imported"] == []


def test_a_changed_source_is_detected_on_the_same_path(project, tmp_path):
    root = shutil.copytree(project, tmp_path / "proj", symlinks=True)
    export = tmp_path / "conversations.json"  # the shared export is read-only: edit a copy
    pipeline_py = root / "pipeline.py"
    shared = next(line for line in pipeline_py.read_text().splitlines() if "conversations.json" in line)
    shared_path = shared.split("file=")[1].split(",")[0].strip("'\"")
    shutil.copy(shared_path, export)
    pipeline_py.write_text(pipeline_py.read_text().replace(shared_path, str(export)))
    pipe = load(root)
    try:
        with open_cdc_state(root / ".synthex") as cdc:  # the export moved: its state is the copy's from now on
            from synthex_resources.source_sync import commit_changes, detect_changes

            commit_changes(pipe, cdc, detect_changes(pipe, cdc, pull=False))
        (unchanged,) = pipe.app._detect_source_changes("main", None, None)
        assert unchanged.token_unchanged  # answered by the snapshot
        conversations = json.loads(export.read_text())
        last = conversations[0]["mapping"][conversations[0]["current_node"]]  # on the path the transcript takes
        last["message"]["content"]["parts"] = ["an edited last message"]
        export.write_text(json.dumps(conversations))
        os.utime(export, ns=(1, 1))  # a new stat signature whatever the clock's resolution
    finally:
        pipe.close()
    pipe = load(root)  # a new process would: the origin reads the file again
    try:
        (changed,) = pipe.app._detect_source_changes("main", None, None)
    finally:
        pipe.close()
    assert not changed.token_unchanged and changed.changed and not changed.new and not changed.deleted


def test_every_token_write_removes_the_snapshot_and_open_writes_it_from_duckdb(project, tmp_path):
    import duckdb

    data = Path(shutil.copytree(project / ".synthex", tmp_path / "data", ignore=shutil.ignore_patterns("dagster")))
    with open_cdc_state(data):  # a fresh inode: the snapshot is rewritten at the exit
        pass
    before = TokenSnapshot.load(data)
    assert before is not None and len(before.tokens) == 1
    (source, origin), _token = next(iter(before.tokens.items()))
    # A writer that is not the CLI (a sensor: dagster-duckdb's connection), then one that is.
    conn = duckdb.connect(str(data / CDC_FILE))
    try:
        CdcState(conn).forget(source)
        assert not (data / TOKENS_FILE).exists() and TokenSnapshot.load(data) is None
    finally:
        conn.close()
    with open_cdc_state(data) as cdc:
        assert cdc.sources() == []
    after = TokenSnapshot.load(data)
    assert after is not None and after.tokens == {}  # as DuckDB says: the forgotten token is not kept
    # A CDC file replaced (a purge's rebuild, a user's reset) makes the snapshot count for nothing.
    (data / CDC_FILE).rename(data / "old.duckdb")
    shutil.copy(data / "old.duckdb", data / CDC_FILE)
    assert TokenSnapshot.load(data) is None
