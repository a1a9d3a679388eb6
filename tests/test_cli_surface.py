"""The CLI reads as one product: run summary with wall time, per-step run detail, search filters and a
header row, refused bad arguments, plugin commands present.

Exit codes and one-line refusals, and the installed command's plugin list, are checked on real processes
(`synthex`); what the other commands print, in this process (`cli`): the project is run once, in this
process, and shared read-only by every test here."""

from __future__ import annotations

import json

import pytest
from conftest import cli, go_offline, write_small_export
from test_cli import synthex


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    export = write_small_export(root / "conversations.json")
    synthex("init", "mem", "--from", str(export), cwd=root)
    proj = root / "mem"
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before the autouse offline_env
        go_offline(mp)
        done = cli("run", "--project", str(proj))
    return proj, done


def test_run_summary_shows_wall_and_step_time_then_nothing_to_do(ran):
    proj, done = ran
    assert "s wall (" in done.stdout and "s step time)" in done.stdout
    again = cli("run", "--project", str(proj))
    assert "everything up to date" in again.stdout


def test_runs_shows_one_runs_steps_by_unique_prefix(ran):
    proj, _ = ran
    [run] = json.loads(cli("runs", "--json", "--project", str(proj)).stdout)
    detail = cli("runs", run["id"][:8], "--project", str(proj)).stdout
    lines = detail.splitlines()
    assert lines[0].startswith(f"run {run['id']}") and "wall" in lines[0]
    assert lines[1].split()[:3] == ["step", "input", "created"]
    by_step = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(by_step) == {"chatgpt", "transcripts", "summaries", "monthly", "world-model"}
    assert by_step["summaries"][2] == "12"  # created


def test_search_filters_by_period_and_metadata_with_a_header(ran):
    proj, _ = ran
    every = json.loads(cli("search", "the", "--step", "summaries", "-k", "50", "--mode", "hybrid", "--json",
                               "--project", str(proj)).stdout)["hits"]
    period = every[0]["period"]
    in_period = json.loads(cli("search", "the", "--step", "summaries", "-k", "50", "--period", period, "--mode", "hybrid", "--json",
                                   "--project", str(proj)).stdout)["hits"]
    assert in_period and {h["period"] for h in in_period} == {period} and len(in_period) < len(every)
    conv = every[0]["metadata"]["chat"]["conversation_id"]
    one = json.loads(cli("search", "the", "--step", "summaries", "--metadata", f"chat.conversation_id={conv}",
                             "--mode", "hybrid", "--json", "--project", str(proj)).stdout)["hits"]
    assert [h["metadata"]["chat"]["conversation_id"] for h in one] == [conv]
    table = cli("search", "the", "--project", str(proj)).stdout.splitlines()
    assert table[0].split() == ["#", "score", "step", "id", "period", "content"]


@pytest.mark.parametrize("args", [["search", ""], ["search", "x", "-k", "0"], ["search", "x", "-k", "-5"],
                                  ["search", "x", "--metadata", "no-equals-sign"]])
def test_bad_search_arguments_are_refused_in_one_line(ran, args):
    proj, _ = ran
    proc = synthex(*args, "--project", str(proj), check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr


def test_init_writes_a_workspace_naming_the_location_after_the_project(ran):
    import yaml

    proj, _ = ran
    [entry] = yaml.safe_load((proj / "workspace.yaml").read_text())["load_from"]
    assert entry["python_module"]["location_name"] == "mem"
    assert entry["python_module"]["module_name"] == "synthex_assets.code_location"


def test_the_evals_plugin_adds_its_command(ran):
    assert "eval" in synthex("--help").stdout
    assert "locomo" in synthex("eval", "--help").stdout


def test_records_are_found_by_the_prefix_search_prints(ran):
    proj, _ = ran
    hit = json.loads(cli("search", "the", "--json", "--project", str(proj)).stdout)["hits"][0]
    shown = cli("search", "the", "--project", str(proj)).stdout.splitlines()[1].split()[3]
    assert shown == hit["id"][:8]
    got = json.loads(cli("get", shown, "--json", "--project", str(proj)).stdout)
    assert got["id"] == hit["id"]
    tree = json.loads(cli("lineage", shown, "--json", "--project", str(proj)).stdout)
    assert tree["id"] == hit["id"]
    missing = cli("get", "ffffffff", "--project", str(proj), check=False)
    assert missing.returncode == 1 and "no record with id 'ffffffff'" in missing.stderr


def test_search_json_says_which_branch_and_mode_answered_like_the_mcp_tool(ran):
    proj, _ = ran
    default = json.loads(cli("search", "the", "--json", "--project", str(proj)).stdout)
    named = json.loads(cli("search", "the", "--mode", "bm25", "--json", "--project", str(proj)).stdout)
    exact = json.loads(cli("search", "the", "--exact", "--json", "--project", str(proj)).stdout)
    assert (default["branch"], default["mode"]) == ("main", "hierarchical") and default["hits"]
    assert (named["mode"], exact["mode"]) == ("bm25", "exact") and named["hits"] and exact["hits"]
