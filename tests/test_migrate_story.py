"""The README's migration story, end to end on the Letta fixture (issue 37): import a Letta agent and its
archival passages, search them as they were, add a Synthex architecture over the imported messages on a
branch (a key aggregate, one record per conversation), run it, diff, promote; the imported records stay."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import cli
from test_migrate_letta import AGENT_FILE_V2, PASSAGES

README = Path(__file__).resolve().parent.parent / "README.md"
MARK = "branches/agg.py overrides: "


def readme_override() -> str:
    """branches/agg.py with the override the README's story shows (so the README cannot drift from this)."""
    line = next(line for line in README.read_text(encoding="utf-8").splitlines() if MARK in line)
    call = line.split(MARK, 1)[1].strip()
    return f'PARENT = "main"\n\nfrom synthex.prompts import member_digest\n\n\ndef overrides(pipeline):\n    {call}\n'


def search(project, query, *more):
    return json.loads(cli("search", query, "--json", *more, cwd=project).stdout)["hits"]


def test_the_readme_migration_story_runs_on_a_letta_agent(tmp_path):
    (tmp_path / "sailor.af").write_text(json.dumps(AGENT_FILE_V2))
    (tmp_path / "archival.json").write_text(json.dumps(PASSAGES))
    cli("init", "sailor", "--from", "sailor.af", "--from", "archival.json", cwd=tmp_path)
    project = tmp_path / "sailor"
    cli("run", cwd=project)
    before = search(project, "sailing")
    assert "I go sailing every Sunday" in [h["content"] for h in before if h["step"] == "letta_messages"]
    imported = {h["sources"][0] for h in before}  # the letta source records the searched ones came from

    cli("branch", "create", "agg", cwd=project)
    (project / "branches" / "agg.py").write_text(readme_override())
    cli("run", "--branch", "agg", cwd=project)
    diff = json.loads(cli("branch", "diff", "agg", "--json", cwd=project).stdout)
    assert diff["changed_steps"] == ["letta_messages"]
    threads = [h for h in search(project, "sailing", "--branch", "agg") if h["step"] == "letta_messages"]
    assert len(threads) == 1 and "(conversation, " in threads[0]["content"]  # one record for the agent's conversation
    assert [h["content"] for h in search(project, "sailing") if h["step"] == "letta_messages"] != [threads[0]["content"]]

    cli("branch", "promote", "agg", cwd=project)
    after = search(project, "sailing")
    assert [h["id"] for h in after if h["step"] == "letta_messages"] == [threads[0]["id"]]
    assert imported <= {s for h in after for s in h["sources"]}  # the imported records stayed as they were
