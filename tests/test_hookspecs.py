"""One hook-spec module (synthex.core.hookspecs) and one discovery (synthex.core.plugins.discover): every
hook is listed there and in docs/extending.md, a misspelt hook is reported, file formats come through the
``register_formats`` hook (the evals plugin's LoCoMo / LongMemEval formats too) or from the pipeline itself
(``pipeline.format``), never from a module-level table.

Plugins are tmp modules with a tmp dist-info (tests/plugin_helpers.py), loaded by separate processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import locomo_sessions, write_json
from plugin_helpers import plugin_env, run_synthex, write_plugin

from synthex import Pipeline
from synthex.core.errors import PipelineDefinitionError
from synthex.core.hookspecs import HOOK_NAMES, HOOKS
from synthex.core.importers import SourceItem, load_source
from synthex.core.importers.formats import register_format
from synthex.core.project import load_pipeline

DOCS = Path(__file__).resolve().parents[1] / "docs" / "extending.md"

MISSPELT_PLUGIN = '''
def register_step_kind(registry):  # "kinds": no such hook
    raise AssertionError("never called")


def register_key_functions(registry):
    registry.register("first-word", lambda record: record.content.split()[:1])
'''

FORMAT_PLUGIN = '''
from synthex.core.importers import SourceItem


def parse_lines(path, intake):
    return [SourceItem(key=f"l{n}", content=line, created_at="2024-01-01T00:00:00Z")
            for n, line in enumerate(path.read_text().splitlines()) if line]


def register_formats(registry):
    registry.register("lines-of-text", parse_lines)
'''


def test_every_hook_is_specified_once_and_documented():
    assert len(HOOK_NAMES) == len(HOOKS) == 11
    text = DOCS.read_text(encoding="utf-8")
    for hook in HOOKS:
        assert hook.doc and hook.signature.startswith(f"{hook.name}(")
        assert f"`{hook.name}(" in text, f"docs/extending.md does not list the hook {hook.name}"


def key_function_registry_in_a_fresh_process(env: dict[str, str]) -> tuple[str, str]:
    """In a new interpreter with ``env``'s plugins: whether 'first-word' is registered, and the failure line."""
    code = ("from synthex.core.steps.group_keys import key_functions\n"
            "registry = key_functions()\n"
            "print('first-word' in registry)\n"
            "print(*registry.failures, sep='\\n')\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    registered, failure = out.stdout.strip().splitlines()
    return registered, failure


def test_a_misspelt_hook_is_one_warning_and_the_plugin_still_loads(tmp_path):
    env = plugin_env(write_plugin(tmp_path / "plugins", "misspelt", MISSPELT_PLUGIN))
    registered, failure = key_function_registry_in_a_fresh_process(env)
    assert registered == "True"
    assert failure.startswith("plugin 'misspelt' (misspelt) failed to load: register_step_kind: no such hook; hooks: ")
    assert "register_step_kinds" in failure
    help_text = run_synthex("--help", env=env)
    assert help_text.stderr.count("register_step_kind: no such hook") == 1


def test_a_plugin_format_is_read_by_a_source(tmp_path):
    env = plugin_env(write_plugin(tmp_path / "plugins", "lines_format", FORMAT_PLUGIN))
    data = tmp_path / "notes.txt"
    data.write_text("first line\n\nsecond line\n")
    code = ("import sys\n"
            "from synthex.core.importers import load_source\n"
            f"items = load_source({str(data)!r}, 'lines-of-text')\n"
            "print([i.content for i in items])\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['first line', 'second line']"


def test_the_benchmark_formats_come_from_the_evals_plugin(tmp_path):
    """A fresh process that never imports evals reads a LoCoMo file: the evals plugin's hook registers it."""
    data = write_json(tmp_path / "locomo.json", locomo_sessions({"1:00 pm on 8 May, 2023": [("Ann", "Hi Bob."),
                                                                                            ("Bob", "Hi Ann.")]},
                                                               "conv-h"))
    code = ("import sys\n"
            "from synthex.core.importers import file_formats, load_source\n"
            "assert not any(m.startswith('evals') for m in sys.modules), 'evals imported'\n"
            f"items = load_source({str(data)!r}, 'locomo-turns')\n"
            "print(len(items), sorted(n for n in file_formats().names() if 'turns' in n))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 ['locomo-turns', 'longmemeval-turns-any', 'longmemeval-turns-official']"


def lines(path: Path) -> list[SourceItem]:
    return [SourceItem(key=f"l{n}", content=line, created_at="2024-01-01T00:00:00Z")
            for n, line in enumerate(path.read_text().splitlines()) if line]


def test_a_pipeline_format_is_the_pipeline_own(tmp_path):
    data = tmp_path / "notes.txt"
    data.write_text("one\ntwo\n")
    pipe = Pipeline("own-format", project_dir=tmp_path / "p")
    pipe.format("my-lines", lines)
    step = pipe.source("notes", file=str(data), format="my-lines")
    assert [i.content for i in step.reader().items()] == ["one", "two"]
    other = Pipeline("other", project_dir=tmp_path / "q")  # another pipeline does not have it
    with pytest.raises(Exception, match="unknown format 'my-lines'"):
        other.source("notes", file=str(data), format="my-lines").reader().items()
    with pytest.raises(PipelineDefinitionError, match="built-in format"):
        pipe.format("jsonl", lines)
    with pytest.raises(PipelineDefinitionError, match=r"call pipeline.format\('my-lines', parser\)"):
        register_format("my-lines", lines)  # outside a pipeline.py load: no pipeline to give it to
    assert load_source(data, "my-lines", formats=pipe.formats)[0].content == "one"


def test_an_earlier_pipeline_file_registering_a_format_still_loads(tmp_path):
    data = tmp_path / "notes.txt"
    data.write_text("alpha\nbeta\n")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pipeline.py").write_text(f'''
from synthex import Pipeline
from synthex.importers import SourceItem, register_format

pipeline = Pipeline("legacy")


def lines(path):
    return [SourceItem(key=line, content=line, created_at="2024-01-01T00:00:00Z") for line in path.read_text().split()]


register_format("legacy-lines", lines)
pipeline.source("notes", file={str(data)!r}, format="legacy-lines")
''')
    pipe = load_pipeline(project)
    assert "legacy-lines" in pipe.formats
    assert [i.content for i in pipe.steps["notes"].reader().items()] == ["alpha", "beta"]


def test_a_taken_format_name_is_one_error_naming_both_registrants(tmp_path):
    """The hookspecs rule for every registry: a pipeline file's ``register_format`` cannot replace a format
    its pipeline (or an earlier call) registered, silently or otherwise."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pipeline.py").write_text('''
from synthex import Pipeline
from synthex.importers import register_format

pipeline = Pipeline("clash")
pipeline.format("my-lines", lambda path: [])
register_format("my-lines", lambda path: [])
''')
    with pytest.raises(PipelineDefinitionError) as taken:
        load_pipeline(project)
    message = str(taken.value)
    assert "\n" not in message
    assert message == ("file format 'my-lines' is registered already (by pipeline.format('my-lines')); "
                       "register_format in the pipeline file registers it again")
    (project / "pipeline.py").write_text('''
from synthex import Pipeline
from synthex.importers import register_format

pipeline = Pipeline("twice")
register_format("my-lines", lambda path: [])
register_format("my-lines", lambda path: [])
''')
    with pytest.raises(PipelineDefinitionError, match=r"file format 'my-lines' is registered already \(by "
                                                      r"register_format\('my-lines'\) in the pipeline file\); "
                                                      r"register_format\('my-lines'\) in the pipeline file"):
        load_pipeline(project)
    pipe = Pipeline("own", project_dir=tmp_path / "p")
    pipe.format("other-lines", lines)
    with pytest.raises(PipelineDefinitionError, match=r"by pipeline.format\('other-lines'\)\); "
                                                      r"pipeline.format\('other-lines'\) registers it again"):
        pipe.format("other-lines", lines)


CLASH_PLUGIN = '''
def register_key_functions(registry):
    registry.register("speaker", lambda record: None)  # a built-in's name
    registry.register("first-word", lambda record: record.content.split()[:1])
'''


def test_a_plugin_taking_a_built_in_name_is_one_failure_naming_both(tmp_path):
    env = plugin_env(write_plugin(tmp_path / "plugins", "clash", CLASH_PLUGIN))
    registered, failure = key_function_registry_in_a_fresh_process(env)
    assert registered == "False"  # its hook stopped at the clash
    assert failure == ("plugin 'clash' (clash) failed to load: register_key_functions: PipelineDefinitionError: "
                       "key function 'speaker' is registered already (by built-in synthex.core.steps.group_keys); "
                       "plugin 'clash' (clash) registers it again")


def test_a_module_two_entry_points_name_is_called_once(tmp_path):
    """Two entry points (two names, or two distributions) naming one module: one plugin, its hook run once,
    so its items are not registered twice (which would be a taken-name failure of its own)."""
    folder = write_plugin(tmp_path / "plugins", "twice", '''
def register_key_functions(registry):
    registry.register("first-word", lambda record: record.content.split()[:1])
''')
    dist = folder / "twice-0.0.0.dist-info"
    (dist / "entry_points.txt").write_text("[synthex.plugins]\ntwice = twice\ntwice-again = twice\n", encoding="utf-8")
    code = ("from synthex.core.plugins import discover\n"
            "from synthex.core.steps.group_keys import key_functions\n"
            "registry = key_functions()\n"
            "print('first-word' in registry, len(registry.failures))\n"
            "print(sum(p.module.__name__ == 'twice' for p in discover().loaded))\n")
    out = subprocess.run([sys.executable, "-c", code], env=plugin_env(folder), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "0", "1"]
