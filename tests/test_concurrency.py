"""One writer per (project, branch): a second run on the same branch is refused in one line (or waits
with --wait), and the store ends up exactly as after one uninterrupted run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

import pytest
from conftest import PIPELINE_PY, env_without_openai, go_offline, load, write_project, write_small_export

SLOW = PIPELINE_PY.replace('return "Summarize this conversation.',
                           'import time; time.sleep(0.3)\n    return "Summarize this conversation.')
STEPS = ["chatgpt", "transcripts", "summaries", "monthly", "world-model"]


def start(root, *extra):
    return subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "run", "--project", str(root), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_without_openai())


def contents(root):
    pipe = load(root)
    out = {}
    for step in STEPS:
        records = pipe.records(step)
        assert max(Counter(r.id for r in records).values()) == 1  # no duplicate ids
        out[step] = sorted((r.id, r.content) for r in records)
    return out


_sleep = time.sleep


def _no_pause_in_prompts(seconds: float) -> None:
    if sys._getframe(1).f_globals.get("__name__") != "pipeline":  # SLOW's prompt runs as module "pipeline"
        _sleep(seconds)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The store after one uninterrupted run of SLOW: SLOW's own code (its hash is part of the record ids),
    run in this process without its pauses (they only matter to the races below)."""
    root = tmp_path_factory.mktemp("conc")
    export = write_small_export(root / "conversations.json")
    clean = write_project(root / "clean", export, SLOW)
    with pytest.MonkeyPatch.context() as mp:
        go_offline(mp)  # module fixtures run before the autouse offline_env
        mp.setattr(time, "sleep", _no_pause_in_prompts)
        load(clean).run()
    return export, contents(clean)


@pytest.mark.parametrize("gap", [0.1, 2.0])
def test_a_second_run_on_the_branch_is_refused_and_the_store_is_intact(tmp_path, uninterrupted, gap):
    export, expected = uninterrupted
    root = write_project(tmp_path / "proj", export, SLOW)
    first = start(root)
    time.sleep(gap)
    second = start(root)
    out2, err2 = second.communicate(timeout=300)
    out1, err1 = first.communicate(timeout=300)
    codes = sorted([first.returncode, second.returncode])
    assert codes == [0, 1], (out1, err1, out2, err2)
    refused = err2 if second.returncode else err1
    assert "is being written by run" in refused and "--wait" in refused and "Traceback" not in refused
    assert contents(root) == expected
    assert load(root).plan().steps == []


def test_with_wait_the_second_run_waits_then_finds_nothing_to_do(tmp_path, uninterrupted):
    export, expected = uninterrupted
    root = write_project(tmp_path / "proj", export, SLOW)
    first = start(root)
    time.sleep(2.0)
    second = start(root, "--wait")
    out2, err2 = second.communicate(timeout=300)
    first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, err2
    assert "waiting: branch 'main' is being written by run" in err2
    assert "everything up to date" in out2
    assert contents(root) == expected


def test_runs_on_other_branches_are_not_blocked(tmp_path, uninterrupted):
    export, _ = uninterrupted
    root = write_project(tmp_path / "proj", export, SLOW)
    from synthex.core.project import create_branch_file

    branch_file = create_branch_file(root, "experiment")  # overrides the summaries: it writes them too
    branch_file.write_text(branch_file.read_text() + (
        "    pipeline.transform('summaries', from_='transcripts', fn=lambda r: 'short: ' + r.content[:60])\n"))
    first = start(root)
    time.sleep(2.0)
    other = start(root, "--branch", "experiment")
    _, err_other = other.communicate(timeout=300)
    _, err_first = first.communicate(timeout=300)
    assert (first.returncode, other.returncode) == (0, 0), (err_first, err_other)
