"""Deletions are explicit: an empty or shrunken export stops the run and says what would go."""

from __future__ import annotations

import json

import pytest
from conftest import PIPELINE_PY, load, write_project
from test_cli import synthex

from synthex.core.errors import SynthexError


@pytest.fixture
def project(tmp_path, small_export):
    # The format named, as `synthex init` writes it (auto-detection already refuses an empty list).
    return write_project(tmp_path / "proj", small_export, PIPELINE_PY.replace("format='auto'", "format='chatgpt-export'"))


def test_an_emptied_export_is_refused_until_deletions_are_allowed(project, small_export):
    pipe = load(project)
    pipe.run()
    before = {s: len(pipe.records(s)) for s in pipe.steps}
    small_export.write_text("[]")
    pipe = load(project)
    with pytest.raises(SynthexError, match=r"refusing to delete memory: chatgpt: .* holds 0 item\(s\), the store 12"):
        pipe.run()
    assert {s: len(pipe.records(s)) for s in pipe.steps} == before  # nothing touched
    plan = json.loads(synthex("plan", "--json", "--project", str(project)).stdout)
    assert plan["source_deletions"] and "12 would be deleted" in plan["source_deletions"][0]
    shown = synthex("plan", "--project", str(project)).stdout
    assert shown.startswith("deletions: chatgpt:")
    pipe.run(allow_deletions=True)
    assert all(len(pipe.records(s)) == 0 for s in pipe.steps)


def test_a_small_shrink_proceeds_and_a_large_one_is_refused(project, small_export):
    pipe = load(project)
    pipe.run()
    conversations = json.loads(small_export.read_text())
    small_export.write_text(json.dumps(conversations[:11]))  # 1 of 12 gone: 8 %, below the 20 % threshold
    assert load(project).run().status == "completed"
    small_export.write_text(json.dumps(conversations[:6]))  # 5 of 11 gone: 45 %
    proc = synthex("run", "--project", str(project), check=False)
    assert proc.returncode == 1 and "refusing to delete memory" in proc.stderr and "--allow-deletions" in proc.stderr
    assert len(load(project).records("chatgpt")) == 11
