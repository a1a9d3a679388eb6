"""What an importer leaves out is said, not silent: a Claude turn without text is a warning line."""

import json

from conftest import write_project
from test_cli import synthex

from synthex.core.project import render_template


def test_a_claude_turn_without_text_is_a_warning_on_plan(tmp_path):
    export = tmp_path / "claude.json"
    export.write_text(json.dumps([{
        "uuid": "c-1", "name": "Kyoto trip", "created_at": "2024-03-01T10:00:00Z",
        "chat_messages": [
            {"sender": "human", "text": "Plan three days in Kyoto.", "created_at": "2024-03-01T10:00:00Z"},
            {"sender": "assistant", "text": "", "content": [{"type": "tool_use", "name": "search"}],
             "created_at": "2024-03-01T10:00:05Z"},
            {"sender": "assistant", "text": "Day one: Fushimi Inari.", "created_at": "2024-03-01T10:00:09Z"}]}]))
    body = render_template("warn", [("claude", str(export), "claude-export")]).replace("{", "{{").replace("}", "}}")
    project = write_project(tmp_path / "proj", export, body)
    planned = synthex("plan", "--project", str(project))
    [warning] = [line for line in planned.stderr.splitlines() if line.startswith("warning: ")]
    assert str(export) in warning and "conversation #0 (c-1, 'Kyoto trip')" in warning and "message #1" in warning
    assert "has no text; left out" in warning
    plan_json = json.loads(synthex("plan", "--json", "--project", str(project)).stdout)
    assert plan_json["import_warnings"] == [warning.removeprefix("warning: ")]
    # `synthex run` prints them through the same function (echo_import_warnings) before it runs.
