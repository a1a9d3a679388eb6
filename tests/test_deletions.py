"""Deletions are explicit: an empty or shrunken export stops the run and says what would go."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import PIPELINE_PY, cli, go_offline, load, write_project, write_small_export
from test_cli import synthex

from synthex.core.errors import SynthexError

EXPORT = "exports/conversations.json"  # inside the project (relative to it), so a copy has its own export


@pytest.fixture(scope="module")
def ran_once(tmp_path_factory) -> Path:
    """The project after one run, shared: each test takes a copy (with its export) and changes that."""
    root = tmp_path_factory.mktemp("deletions") / "proj"
    write_small_export(root / EXPORT)
    # The format named, as `synthex init` writes it (auto-detection already refuses an empty list).
    write_project(root, Path(EXPORT), PIPELINE_PY.replace("format='auto'", "format='chatgpt-export'"))
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        pipe = load(root)
        try:
            assert pipe.run().status == "completed"
        finally:
            pipe.close()
    return root


@pytest.fixture
def project(tmp_path, ran_once) -> Path:
    return Path(shutil.copytree(ran_once, tmp_path / "proj", symlinks=True))


@pytest.fixture
def small_export(project) -> Path:
    return project / EXPORT


def test_an_emptied_export_is_refused_until_deletions_are_allowed(project, small_export):
    pipe = load(project)  # after one run
    before = {s: len(pipe.records(s)) for s in pipe.steps}
    small_export.write_text("[]")
    pipe = load(project)
    with pytest.raises(SynthexError, match=r"refusing to delete memory: chatgpt: .* holds 0 item\(s\), the store 12"):
        pipe.run()
    assert {s: len(pipe.records(s)) for s in pipe.steps} == before  # nothing touched
    plan = json.loads(cli("plan", "--json", "--project", str(project)).stdout)  # what it prints: in this process
    assert plan["source_deletions"] and "12 would be deleted" in plan["source_deletions"][0]
    shown = cli("plan", "--project", str(project)).stdout
    assert shown.startswith("deletions: chatgpt:")
    pipe.run(allow_deletions=True)
    assert all(len(pipe.records(s)) == 0 for s in pipe.steps)


def test_a_small_shrink_proceeds_and_a_large_one_is_refused(project, small_export):
    # after one run
    conversations = json.loads(small_export.read_text())
    small_export.write_text(json.dumps(conversations[:11]))  # 1 of 12 gone: 8 %, below the 20 % threshold
    assert load(project).run().status == "completed"
    small_export.write_text(json.dumps(conversations[:6]))  # 5 of 11 gone: 45 %
    proc = synthex("run", "--project", str(project), check=False)
    assert proc.returncode == 1 and "refusing to delete memory" in proc.stderr and "--allow-deletions" in proc.stderr
    assert len(load(project).records("chatgpt")) == 11
