"""The `synthex` CLI as a user runs it (offline). Exit codes and what reaches the terminal are checked on
real processes (`synthex`, a subprocess); what a command prints or does, in this process (`cli`)."""

import json
import subprocess
import sys

from conftest import cli, env_without_openai


def synthex(*args, cwd=None, check=True):
    proc = subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env_without_openai(), timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"synthex {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_init_run_stats_get_lineage_plan_runs(tmp_path, small_export):
    synthex("init", "mem", "--from", str(small_export), cwd=tmp_path)  # the installed entry point, for real
    proj = tmp_path / "mem"
    assert (proj / "pipeline.py").exists()
    plan = json.loads(cli("plan", "--json", "--project", str(proj)).stdout)
    assert plan["steps"] == ["chatgpt", "transcripts", "summaries", "monthly", "world-model"]
    assert set(plan["estimates"]) >= {"records", "tokens", "cost"}
    done = cli("run", "--project", str(proj))
    assert "summaries" in done.stderr  # the per-step progress lines
    stats = json.loads(cli("stats", "--json", "--project", str(proj)).stdout)
    assert stats["branch"] == "main" and stats["steps"]["summaries"]["records"] == 12
    runs = json.loads(cli("runs", "--json", "--project", str(proj)).stdout)
    assert runs[0]["status"] == "completed" and runs[0]["stats"]["output"] > 0
    from synthex.core.project import load_pipeline

    monthly_id = load_pipeline(proj).records("monthly")[0].id
    record = json.loads(cli("get", monthly_id, "--json", "--project", str(proj)).stdout)
    assert record["id"] == monthly_id and record["step"] == "monthly" and record["sources"]
    tree = json.loads(cli("lineage", monthly_id, "--json", "--project", str(proj)).stdout)
    assert set(tree) == {"id", "step", "content", "sources"}
    assert tree["sources"][0]["sources"][0]["sources"][0]["step"] == "chatgpt"
    again = json.loads(cli("plan", "--json", "--project", str(proj)).stdout)
    assert again["steps"] == [] and again["estimates"]["records"] == 0
    toml = cli("export-toml", "--project", str(proj)).stdout
    assert 'kind = "fold"' in toml


def test_bad_inputs_exit_non_zero_with_a_clear_message(tmp_path):
    truncated = tmp_path / "conversations.json"
    truncated.write_text('[{"title": "x", "mapping": {')
    proc = synthex("init", "bad", "--from", str(truncated), cwd=tmp_path, check=False)
    assert proc.returncode == 2 and str(truncated) in proc.stderr and "invalid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = synthex("get", "nope", "--project", str(tmp_path), check=False)
    assert proc.returncode == 2 and "no pipeline.py" in proc.stderr


def test_init_is_idempotent_but_never_overwrites(tmp_path, small_export):
    cli("init", "mem", "--from", str(small_export), cwd=tmp_path)
    cli("init", "mem", "--from", str(small_export), cwd=tmp_path)  # same command again: fine
    (tmp_path / "mem" / "pipeline.py").write_text("# my edits\n")
    proc = synthex("init", "mem", "--from", str(small_export), cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert (tmp_path / "mem" / "pipeline.py").read_text() == "# my edits\n"


def test_a_failed_init_leaves_no_folder_behind(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"not": "an export"}')
    proc = synthex("init", "fresh", "--from", str(bad), cwd=tmp_path, check=False)
    assert proc.returncode == 2 and str(bad) in proc.stderr
    assert not (tmp_path / "fresh").exists()


def test_a_failing_step_is_one_line_and_the_dagster_log_only_with_verbose(tmp_path, small_export):
    from conftest import PIPELINE_PY, write_project

    broken = PIPELINE_PY.replace('return "Summarize this conversation.', 'raise ValueError("boom")\n    return "')
    proj = write_project(tmp_path / "proj", small_export, broken)
    proc = synthex("run", "--project", str(proj), check=False)
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("[")]  # progress bars
    assert proc.returncode == 1
    assert lines[-1].startswith("error: step 'summaries': prompt function pipeline:summarize raised ValueError: boom")
    assert len(lines) == 2 and "Traceback" not in proc.stderr and "STEP_FAILURE" not in proc.stderr
    listed = cli("runs", "--project", str(proj)).stdout.splitlines()
    assert len(listed) == 1 and " failed " in listed[0] and " err=1 " in listed[0]  # the errors are counted
    fresh = write_project(tmp_path / "fresh", small_export, broken)  # fails inside the Dagster run again
    # Dagster mirrors a step's log to stderr through a `tail` process it stops when the step ends, which drops
    # lines on a busy machine (dagster-io/dagster#23336): --verbose writes the step failure again from the
    # run's event log once the run is over (synthex_assets/launcher.py), so it is always there.
    verbose = synthex("run", "--verbose", "--project", str(fresh), check=False)
    assert verbose.returncode == 1 and "STEP_FAILURE" in verbose.stderr
