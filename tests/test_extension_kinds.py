"""A step kind and a source kind added from outside the package, as a plugin: each a module in a tmp folder
registered by a tmp ``*.dist-info/entry_points.txt`` (``tests/plugin_helpers.py``), used in a project's
pipeline.py and run through the real door (``synthex`` subprocesses). Nothing else in the package knows
them: the planner, the executor, the Dagster asset and ``synthex sync`` work from what the kinds say."""

from __future__ import annotations

import json

from plugin_helpers import plugin_env, run_synthex, write_plugin

UPPERCASE_PLUGIN = '''
"""A toy step kind: one record in, its text upper-cased out (no model)."""

from dataclasses import dataclass
from typing import ClassVar

from synthex.core.hashing import fingerprint
from synthex.core.steps import Audit, Step


@dataclass
class UppercaseStep(Step):
    kind: ClassVar[str] = "uppercase"

    def work(self, ctx):
        version = self.version_hash()
        return [self.item(ctx, [fingerprint(r.content)], r.id, version, inputs=[r])
                for r in ctx.upstream(self.from_[0])]

    def produce(self, items, ctx):
        out = []
        for item in items:
            source = item.inputs[0]
            out.append(self.make_record(ctx, item, source.content.upper(), {"time": source.metadata.get("time", {})},
                                        Audit(model="python:uppercase")))
            ctx.progress(1)
        return out, 0


def register_step_kinds(registry):
    registry.register("uppercase", UppercaseStep)
'''

LINES_PLUGIN = '''
"""A toy source kind: a text file of "YYYY-MM-DD | text" lines, one item per line."""

from pathlib import Path

from synthex.core.errors import PipelineDefinitionError, SourceError
from synthex.core.importers import SourceItem
from synthex.core.sources import SourceKind, SourceOrigin


class LinesOrigin(SourceOrigin):
    kind = "lines"

    def __init__(self, path):
        self.path = path

    def items(self):
        if not self.path.exists():
            raise SourceError(f"{self.path}: no such file")
        out = []
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            if line.strip():
                day, _, text = line.partition(" | ")
                out.append(SourceItem(key=f"line-{number}", content=text.strip(), created_at=f"{day}T00:00:00Z"))
        return out

    def token(self):
        stat = self.path.stat()
        return f"{stat.st_size}:{stat.st_mtime_ns}"

    def describe(self):
        return str(self.path)


class LinesKind(SourceKind):
    options = ("path",)  # no keyword of its own: pipeline.source(name, kind="lines", path=...)

    def fields(self, source, args):
        if not isinstance(args.get("path"), str):
            raise PipelineDefinitionError(f"source {source!r}: a lines source needs path= (a text file)")
        return {"options": {"path": args["path"]}}

    def origin(self, step):
        return LinesOrigin(Path(step.base_dir) / step.options["path"])


def register_source_kinds(registry):
    registry.register("lines", LinesKind())
'''

BROKEN_PLUGIN = '''
def register_step_kinds(registry):
    raise RuntimeError("boom while registering")
'''


def sql(project, query, env) -> list[dict]:
    return json.loads(run_synthex("sql", query, "--json", "--project", str(project), env=env).stdout)


def plan(project, env) -> dict:
    return json.loads(run_synthex("plan", "--json", "--project", str(project), env=env).stdout)


def test_a_plugin_step_kind_plans_runs_and_is_up_to_date_after(tmp_path):
    env = plugin_env(write_plugin(tmp_path / "plugins", "toy_uppercase", UPPERCASE_PLUGIN))
    project = tmp_path / "proj"
    project.mkdir()
    notes = project / "notes.jsonl"
    notes.write_text('{"id": "a", "text": "first note", "created_at": "2024-01-02"}\n'
                     '{"id": "b", "text": "second note", "created_at": "2024-01-20"}\n'
                     '{"id": "c", "text": "a note in march", "created_at": "2024-03-05"}\n')
    (project / "pipeline.py").write_text(
        'from synthex import Pipeline\n\n'
        'pipeline = Pipeline("toy-steps")\n'
        'pipeline.source("notes", file="notes.jsonl", format="jsonl")\n'
        'pipeline.step("uppercase", "shout", from_="notes")\n')

    before = plan(project, env)
    assert before["steps"] == ["notes", "shout"]
    assert before["per_step"]["shout"]["kind"] == "uppercase" and before["per_step"]["shout"]["records"] == 3
    assert before["per_step"]["shout"]["periods"] == ["2024-01", "2024-03"]

    run_synthex("run", "--project", str(project), env=env)  # exits 0: every asset check passed too
    rows = sql(project, "select content, period from records where step = 'shout' order by content", env)
    assert rows == [{"content": "A NOTE IN MARCH", "period": "2024-03"},
                    {"content": "FIRST NOTE", "period": "2024-01"},
                    {"content": "SECOND NOTE", "period": "2024-01"}]
    assert plan(project, env)["steps"] == []  # nothing left to do

    with notes.open("a") as handle:
        handle.write('{"id": "d", "text": "one more", "created_at": "2024-03-09"}\n')
    after = plan(project, env)  # the new note makes its source's March dirty, and the plugin step's after it
    assert after["per_step"]["notes"]["records"] == 1 and after["per_step"]["shout"]["periods"] == ["2024-03"]
    # Its inputs are not stored yet: the step's default estimate, one output per input of the partition.
    assert after["per_step"]["shout"]["records"] == 2
    assert 'kind = "uppercase"' in run_synthex("export-toml", "--project", str(project), env=env).stdout


def test_a_plugin_source_kind_runs_and_syncs(tmp_path):
    env = plugin_env(write_plugin(tmp_path / "plugins", "toy_lines", LINES_PLUGIN))
    project = tmp_path / "proj"
    project.mkdir()
    diary = project / "diary.txt"
    diary.write_text("2024-02-03 | bought a red bike\n2024-04-11 | rode it to the lake\n")
    (project / "pipeline.py").write_text(
        'from synthex import Pipeline\n\n'
        'def tag(record):\n'
        '    return "diary: " + record.content\n\n'
        'pipeline = Pipeline("toy-sources")\n'
        'pipeline.source("diary", kind="lines", path="diary.txt")\n'
        'pipeline.transform("entries", from_="diary", fn=tag)\n')

    run_synthex("run", "--project", str(project), env=env)
    rows = sql(project, "select step, content, period from records order by step, period", env)
    assert rows == [{"step": "diary", "content": "bought a red bike", "period": "2024-02"},
                    {"step": "diary", "content": "rode it to the lake", "period": "2024-04"},
                    {"step": "entries", "content": "diary: bought a red bike", "period": "2024-02"},
                    {"step": "entries", "content": "diary: rode it to the lake", "period": "2024-04"}]

    with diary.open("a") as handle:
        handle.write("2024-04-20 | fixed a flat tyre\n")
    report = json.loads(run_synthex("sync", "--json", "--project", str(project), env=env).stdout)
    assert [s["source"] for s in report["sources"]] == ["diary"]
    assert report["run"]["status"] == "completed" and report["run"]["steps"] == ["diary", "entries"]
    rows = sql(project, "select content from records where step = 'entries' and period = '2024-04' "
                        "order by content", env)
    assert [r["content"] for r in rows] == ["diary: fixed a flat tyre", "diary: rode it to the lake"]
    assert plan(project, env)["steps"] == []
    toml = run_synthex("export-toml", "--project", str(project), env=env).stdout
    assert 'source_kind = "lines"' in toml and 'path = "diary.txt"' in toml


def test_a_plugin_whose_hook_raises_is_named_when_its_kind_is_asked_for(tmp_path):
    env = plugin_env(write_plugin(tmp_path / "plugins", "toy_broken", BROKEN_PLUGIN))
    project = tmp_path / "proj"
    project.mkdir()
    (project / "notes.jsonl").write_text('{"id": "a", "text": "a note", "created_at": "2024-01-02"}\n')
    (project / "pipeline.py").write_text(
        'from synthex import Pipeline\n\n'
        'pipeline = Pipeline("toy-broken")\n'
        'pipeline.source("notes", file="notes.jsonl", format="jsonl")\n'
        'pipeline.step("sparkle", "shiny", from_="notes")\n')
    proc = run_synthex("plan", "--project", str(project), env=env, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "step 'shiny': unknown step kind 'sparkle'" in proc.stderr
    assert "plugin 'toy_broken' (toy_broken) failed to load: register_step_kinds: RuntimeError: boom" in proc.stderr


# -- the registries' built-ins, in this process (no run) ---------------------------------------------------

def test_the_builtin_kinds_are_registry_entries_and_their_argument_errors_read_as_before(tmp_path):
    import pytest

    from synthex.core.definition import PipelineDefinition
    from synthex.core.errors import PipelineDefinitionError
    from synthex.core.sources import source_kinds
    from synthex.core.steps import step_kinds

    assert step_kinds().names()[:5] == ["source", "transform", "aggregate", "fold", "merge"]
    assert source_kinds().names()[:5] == ["file", "folder", "table", "stream", "api"]
    pipe = PipelineDefinition("kinds", project_dir=tmp_path)
    cases = [
        ({}, "source 'x': give exactly one of file=, folder=, table=, stream=, api= (got none)"),
        ({"file": "a.json", "folder": "notes"}, "(got file, folder)"),
        ({"folder": "notes", "dsn": "sqlite:///x.sqlite"},
         "source 'x': dsn=, pk=, updated_at=, created_at= and text= belong to a table= source"),
        ({"table": "t", "dsn": "sqlite:///x.sqlite"}, "source 'x': a table= source needs dsn= and pk="),
        ({"api": "not.callable"}, "source 'x': api= must be a callable fetch(cursor) yielding pages"),
        ({"kind": "nope"}, "source 'x': unknown source kind 'nope'; expected one of file, folder, table, stream, api"),
        ({"stream": "in.jsonl", "pii": "scramble"}, "step 'x': pii='scramble'; expected one of redact, detect, flag"),
    ]
    for args, message in cases:
        with pytest.raises(PipelineDefinitionError) as raised:
            pipe.source("x", **args)
        assert message in str(raised.value), (args, str(raised.value))
    with pytest.raises(PipelineDefinitionError, match=r"transform 't': unknown argument bogus=; a transform step takes"):
        pipe.step("transform", "t", from_="x", fn=str, bogus=1)
    with pytest.raises(PipelineDefinitionError, match=r"step 't': unknown step kind 'nope'; expected one of source, "):
        pipe.step("nope", "t")
    assert pipe.steps == {}  # nothing half-added


def test_the_generic_builders_make_the_same_steps_as_the_named_ones(tmp_path):
    from synthex.core.definition import PipelineDefinition
    from synthex.prompts import extract_transcript, world_model_prompt

    named, generic = PipelineDefinition("a", project_dir=tmp_path), PipelineDefinition("a", project_dir=tmp_path)
    named.source("notes", file="notes.jsonl", format="jsonl")
    named.source("inbox", stream="inbox.jsonl")
    named.transform("t", from_="notes", fn=extract_transcript)
    named.fold("w", from_="t", prompt=world_model_prompt)
    generic.step("source", "notes", file="notes.jsonl", format="jsonl")
    generic.step("source", "inbox", file="inbox.jsonl", format="stream")  # how a TOML export spells a stream
    generic.step("transform", "t", from_="notes", fn=extract_transcript)
    generic.add_step(type(named.steps["w"]).build("w", from_="t", prompt=world_model_prompt))
    assert named.effective_versions() == generic.effective_versions()
    assert generic.stream_sources() == ["inbox"] and generic.steps["inbox"].origin_kind == "stream"
    named.to_toml(tmp_path / "p.toml")
    again = PipelineDefinition.from_toml(tmp_path / "p.toml", project_dir=tmp_path)
    assert again.effective_versions() == named.effective_versions() and again.stream_sources() == ["inbox"]
