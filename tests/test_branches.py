"""Branches: copy-on-write architecture experiments with diff and promote (design doc §4.5)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import cli, go_offline, load
from test_cli import synthex

from synthex.core.errors import PipelineDefinitionError, SynthexError
from synthex.core.project import create_branch_file

OVERRIDE = '''

def short_summary(record):
    return "In short: " + record.content[:80]


def overrides(pipeline):
    pipeline.transform("summaries", from_="transcripts", fn=short_summary)
'''
STEPS = ["chatgpt", "transcripts", "summaries", "monthly", "world-model"]


def make_branch(project, name="better-summaries", parent="main"):
    path = create_branch_file(project, name, parent)
    text = path.read_text()
    path.write_text(text[:text.index("def overrides")] + OVERRIDE.lstrip("\n"))
    return path


def own_rows(pipe, branch):
    from synthex_resources.store.filters import RecordFilter

    return pipe.store().records.rows(RecordFilter(branch=branch), ["id", "step"])


@pytest.fixture
def ran(tmp_path, ran_project):
    """The project after one clean run on main: a private copy of the session's (no run of its own)."""
    return ran_project.copy(tmp_path / "proj")


@pytest.fixture(scope="module")
def branch_ran_once(tmp_path_factory, ran_project):
    """``ran`` plus the better-summaries branch (make_branch), run once; shared read-only, see branch_ran."""
    root = ran_project.copy(tmp_path_factory.mktemp("branch-ran") / "proj")
    make_branch(root)
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        main = load(root)
        run = main.run(branch="better-summaries")
        main.close()
    assert run.status == "completed" and set(run.step_stats) == {"summaries", "monthly", "world-model"}
    return root


@pytest.fixture
def branch_ran(tmp_path, branch_ran_once):
    """A private copy of the project after ``make_branch`` and one run of that branch."""
    shutil.copytree(branch_ran_once, tmp_path / "proj", symlinks=True)
    return tmp_path / "proj"


def test_a_branch_reads_its_parent_and_recomputes_only_what_it_changes(ran):
    main = load(ran)
    make_branch(ran)
    branch = main.for_branch("better-summaries")
    assert own_rows(main, "better-summaries") == []  # creating a branch writes nothing
    assert branch.owned_steps() == ["summaries", "monthly", "world-model"]
    # Before it runs, the branch already serves its parent's sources and transcripts.
    assert [r.id for r in main.records("transcripts", branch="better-summaries")] == \
        [r.id for r in main.records("transcripts")]
    run = main.run(branch="better-summaries")
    assert set(run.step_stats) == {"summaries", "monthly", "world-model"}  # 0 source / transcript records
    assert {r["step"] for r in own_rows(main, "better-summaries")} == {"summaries", "monthly", "world-model"}
    ours = main.records("summaries", branch="better-summaries")
    assert ours and all(r.content.startswith("In short: ") for r in ours)
    assert not {r.id for r in ours} & {r.id for r in main.records("summaries")}
    assert main.run(branch="better-summaries").steps == []  # a no-change run computes nothing
    hits = main.search("conversation", step="summaries", branch="better-summaries", k=3, mode="hybrid")
    assert hits and {h.id for h in hits} <= {r.id for r in ours}
    # A lookup with a branch returns the row that branch reads.
    assert main.get(ours[0].id, branch="better-summaries").branch == "better-summaries"
    assert main.get(ours[0].id, branch="main") is None  # main does not read the branch's summaries
    transcript = main.records("transcripts")[0]
    assert main.get(transcript.id[:8], branch="better-summaries").branch == "main"  # read through main
    # Delete removes only the branch's own rows; main cannot go.
    before = {s: [r.id for r in main.records(s)] for s in STEPS}
    out = main.app.branches.delete("better-summaries")
    assert out["records_deleted"] > 0 and own_rows(main, "better-summaries") == []
    assert {s: [r.id for r in main.records(s)] for s in STEPS} == before
    assert not (ran / "branches" / "better-summaries.py").exists()
    with pytest.raises(SynthexError, match="main cannot be deleted"):
        main.app.branches.delete("main")


def test_diff_promote_then_main_computes_nothing(branch_ran):
    ran = branch_ran  # make_branch, then one run of the branch
    main = load(ran)
    branch = main.for_branch("better-summaries")
    diff = branch.diff()
    assert diff.changed_steps == ["summaries", "monthly", "world-model"]
    summaries = diff.steps[0]
    assert summaries.changed == len(main.records("summaries")) and summaries.added == summaries.removed == 0
    assert summaries.samples and summaries.samples[0]["parent"] != summaries.samples[0]["branch"]
    promoted_ids = sorted(r.id for r in main.records("summaries", branch="better-summaries"))

    copied = branch.promote()
    assert copied["summaries"] == len(promoted_ids)
    assert sorted(r.id for r in main.records("summaries")) == promoted_ids  # main serves the branch's records
    assert "apply_branch('better-summaries', __file__)" in (ran / "pipeline.py").read_text()
    assert main.run().steps == []  # no recompute, in this process ...
    fresh = load(ran)
    assert fresh.plan().steps == []  # ... and in a new one, from the rewritten pipeline.py
    assert own_rows(fresh, "better-summaries") == []  # the branch now reads main
    assert fresh.for_branch("better-summaries").owned_steps() == []


def test_a_branch_whose_file_is_gone_is_one_line(project):
    ran = project  # nothing needs to have run
    main = load(ran)
    with pytest.raises(PipelineDefinitionError, match=r"branch 'nope': its definition .*branches/nope.py is gone"):
        main.stats(branch="nope")
    proc = synthex("stats", "--branch", "nope", "--project", str(ran), check=False)
    assert proc.returncode == 2 and "is gone" in proc.stderr and "Traceback" not in proc.stderr


def test_overrides_keep_names_and_inputs(project):
    main = load(project)
    branch = main.branch("x")
    with pytest.raises(PipelineDefinitionError, match="keeps the step's inputs"):
        branch.transform("summaries", from_="chatgpt", prompt=lambda r: "x")
    with pytest.raises(PipelineDefinitionError, match="not a step of its parent"):
        branch.transform("extra", from_="summaries", prompt=lambda r: "x")


def test_the_cli_round_trip(ran):
    p = ["--project", str(ran)]
    assert "created branch 'better-summaries'" in cli("branch", "create", "better-summaries", *p).stdout
    make_branch_file = ran / "branches" / "better-summaries.py"
    text = make_branch_file.read_text()
    make_branch_file.write_text(text[:text.index("def overrides")] + OVERRIDE.lstrip("\n"))
    cli("branch", "switch", "better-summaries", *p)
    assert "on branch 'better-summaries'" in cli("run", *p).stderr  # switch sets the default branch
    listed = cli("branch", "list", *p).stdout
    assert "* better-summaries" in listed and "summaries, monthly, world-model" in listed
    diff = json.loads(cli("branch", "diff", "better-summaries", "--json", *p).stdout)
    assert diff["changed_steps"] == ["summaries", "monthly", "world-model"]
    assert "promoted" in cli("branch", "promote", "better-summaries", *p).stdout
    cli("branch", "switch", "main", *p)
    assert "everything up to date" in cli("run", *p).stdout


def test_a_fold_on_a_branch_refolds_only_from_the_first_changed_period(ran, small_export):
    """The branch reads another export whose last month differs: every earlier period's records, the
    fold's states included, are the parent's (same ids) and are copied, not recomputed."""
    main = load(ran)
    conversations = json.loads(small_export.read_text())
    last_period = max(r.period for r in main.records("chatgpt"))
    edited = [dict(c, title=c["title"] + " (edited)") if _period_of(c) == last_period else c
              for c in conversations]
    other = small_export.parent / "edited.json"
    other.write_text(json.dumps(edited))
    path = create_branch_file(ran, "edited")
    text = path.read_text()
    path.write_text(text[:text.index("def overrides")]
                    + f"def overrides(pipeline):\n    pipeline.source('chatgpt', file={str(other)!r}, format='auto')\n")
    run = main.run(branch="edited")
    periods = sorted({r.period for r in main.records("world-model")})
    fold = run.step_stats["world-model"]
    assert fold.reused == len(periods) - 1 and fold.output == 1  # only the last period is re-folded
    assert {r.id for r in main.records("world-model", branch="edited")} - {r.id for r in main.records("world-model")} \
        == {r.id for r in main.records("world-model", branch="edited") if r.period == last_period}


def _period_of(conversation: dict) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(conversation["create_time"], tz=UTC).strftime("%Y-%m")


def test_promote_refuses_a_branch_with_work_pending_and_main_keeps_its_records(ran):
    main = load(ran)
    make_branch(ran)
    before = sorted(r.id for r in main.records("summaries"))
    with pytest.raises(SynthexError, match="has work pending .* run `synthex run --branch better-summaries` first"):
        main.app.branches.promote("better-summaries")
    assert sorted(r.id for r in main.records("summaries")) == before
    assert "apply_branch" not in (ran / "pipeline.py").read_text()


def test_a_promote_cut_short_finishes_when_run_again(branch_ran, monkeypatch):
    ran = branch_ran  # make_branch, then one run of the branch
    expected = promote_cut_short_after_summaries(ran, monkeypatch)["summaries"]
    fresh = load(ran)  # a new process: pipeline.py already applies the branch
    copied = fresh.app.branches.promote("better-summaries")
    assert set(copied) == {"summaries", "monthly", "world-model"}
    assert sorted(r.id for r in fresh.records("summaries")) == expected
    assert own_rows(fresh, "better-summaries") == [] and fresh.plan().steps == []


def test_a_parent_cycle_and_an_unknown_branch_are_one_line(project):
    ran = project  # nothing needs to have run
    for name, parent in (("x", "y"), ("y", "x")):
        create_branch_file(ran, name, parent)
    proc = synthex("stats", "--branch", "x", "--project", str(ran), check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: branch 'x': PARENT cycle x -> y -> x"]
    gone = synthex("branch", "delete", "typo", "--project", str(ran), check=False)
    assert gone.returncode == 2 and gone.stderr.startswith("error: no branch 'typo'")



def promote_cut_short_after_summaries(project, monkeypatch) -> dict[str, list[str]]:
    """Promote better-summaries, interrupted once it moved `summaries` (a known point); returns the record
    ids per moved step that main must hold once the promote is finished."""
    from synthex_resources.store.records import Records

    main = load(project)
    expected = {s: sorted(r.id for r in main.records(s, branch="better-summaries"))
                for s in ("summaries", "monthly", "world-model")}
    real = Records.move_step_rows

    def crash_after_first_step(self, step, *args):
        if step != "summaries":
            raise KeyboardInterrupt("killed mid-promote")
        return real(self, step, *args)

    monkeypatch.setattr(Records, "move_step_rows", crash_after_first_step)
    with pytest.raises(KeyboardInterrupt):
        main.app.branches.promote("better-summaries")
    monkeypatch.setattr(Records, "move_step_rows", real)
    main.close()
    return expected


def test_doctor_repair_finishes_an_interrupted_promote(branch_ran, monkeypatch):
    expected = promote_cut_short_after_summaries(branch_ran, monkeypatch)
    fixed = json.loads(cli("doctor", "--repair", "--json", "--project", str(branch_ran), check=False).stdout)
    assert fixed["repaired"] is True and [x["branch"] for x in fixed["interrupted_promotes"]] == ["better-summaries"]
    assert json.loads(cli("doctor", "--json", "--project", str(branch_ran)).stdout)["healthy"] is True
    fresh = load(branch_ran)
    assert {s: sorted(r.id for r in fresh.records(s)) for s in expected} == expected
    assert own_rows(fresh, "better-summaries") == [] and fresh.plan().steps == []


def test_status_and_doctor_send_an_interrupted_promote_to_promote_and_it_finishes(branch_ran, monkeypatch):
    """Issue 32 item 10: cut short after it moved `summaries` (pipeline.py applies the branch, so main
    looks stale), `synthex status` says to re-run the promote, not a run (a run recomputes what the
    promote copies and leaves the branch's copies and the journal); doctor reports it; re-running the
    promote finishes it."""
    p = ("--project", str(branch_ran))
    expected = promote_cut_short_after_summaries(branch_ran, monkeypatch)
    finish = "run `synthex branch promote better-summaries` to finish it"
    status = cli("status", *p).stdout
    assert status.splitlines()[0] == (
        "a promote of branch 'better-summaries' into main was interrupted before it finished (it moves summaries, "
        f"monthly, world-model): {finish} (it copies the branch's records; a run would recompute them)"), status
    [main_row] = [line for line in status.splitlines() if line.startswith("  main ")]
    assert "monthly" in main_row and main_row.endswith("; `synthex branch promote better-summaries` finishes first")
    assert "a run computes" not in main_row
    pending = json.loads(cli("status", "--json", *p).stdout)["interrupted_promotes"]
    assert [(x["branch"], x["command"]) for x in pending] == [("better-summaries",
                                                                 "synthex branch promote better-summaries")]
    doctor = json.loads(cli("doctor", "--json", *p, check=False).stdout)
    assert doctor["healthy"] is False and [x["branch"] for x in doctor["interrupted_promotes"]] == ["better-summaries"]

    assert "promoted 'better-summaries' into main" in cli("branch", "promote", "better-summaries", *p).stdout
    status = cli("status", *p).stdout
    assert "interrupted" not in status and "  main                 up to date" in status, status
    assert json.loads(cli("doctor", "--json", *p).stdout)["healthy"] is True
    fresh = load(branch_ran)
    assert {s: sorted(r.id for r in fresh.records(s)) for s in expected} == expected
    assert own_rows(fresh, "better-summaries") == [] and fresh.plan().steps == []
