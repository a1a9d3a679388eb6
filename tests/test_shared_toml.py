"""A pipeline shared as TOML runs nothing it names unless the user says so (synthex.core.shared_toml):
its modules are located before any import, only synthex's prompt modules and the project's own are
imported without trust, the standard library never is, a non-function is refused in one line, hooks and
sources outside the project must be allowed (nothing is POSTed otherwise), and `synthex import-toml`
writes the pipeline.py that builds the same definition."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import cli, write_small_export

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import PipelineDefinitionError
from synthex.core.project import load_pipeline
from synthex.core.record import Record
from synthex.core.shared_toml import structure_fingerprint

PIPELINE_HEAD = "from pathlib import Path\n\nfrom synthex import Pipeline\n\nHERE = Path(__file__).parent\n"


def write_toml(root: Path, steps: str = "", outputs: str = "", name: str = "shared.toml") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    export = write_small_export(root / "exports" / "conversations.json")
    text = (f'[pipeline]\nname = "shared"\n\n[[steps]]\nname = "chats"\nkind = "source"\n'
            f'file = "{export.relative_to(root)}"\nformat = "chatgpt-export"\n\n{steps}\n{outputs}')
    path = root / name
    path.write_text(text)
    return path


def transform(field: str, ref: str, name: str = "t") -> str:
    return f'[[steps]]\nname = "{name}"\nkind = "transform"\nfrom = ["chats"]\n{field} = "{ref}"\n'


def refused(path: Path, **kw) -> str:
    with pytest.raises(PipelineDefinitionError) as info:
        PipelineDefinition.from_toml(path, **kw)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


def test_a_module_of_the_standard_library_is_never_imported_even_trusted(tmp_path, capsys):
    sys.modules.pop("this", None)
    path = write_toml(tmp_path / "p", transform("fn", "this:s"))
    for trust in (False, True):
        message = refused(path, trust=trust)
        assert "step 't' fn = 'this:s'" in message and "part of Python itself" in message
    assert "this" not in sys.modules  # located, never imported: its import-time print did not run
    assert "Beautiful is better" not in capsys.readouterr().out


@pytest.mark.parametrize("ref", ["os:system", "subprocess:run"])
def test_os_system_and_subprocess_run_are_refused(tmp_path, ref):
    path = write_toml(tmp_path / "p", transform("fn", ref))
    assert f"fn = '{ref}'" in refused(path, trust=True)


def test_a_path_that_is_not_a_function_is_refused_in_one_line(tmp_path):
    path = write_toml(tmp_path / "p", transform("prompt", "synthex.prompts:__all__"))
    assert "step 't' prompt = 'synthex.prompts:__all__': 'synthex.prompts:__all__' is a list, not a function" \
        in refused(path)
    path = write_toml(tmp_path / "q", transform("fn", "synthex.prompts:no_such_fn"))
    assert "has no 'no_such_fn'" in refused(path)
    path = write_toml(tmp_path / "r", transform("fn", "not a path"))
    assert "expected a 'module:function' path" in refused(path)


def test_an_outside_module_is_located_not_imported_unless_trusted(tmp_path, monkeypatch):
    outside = tmp_path / "site"
    outside.mkdir()
    marker = tmp_path / "imported"
    (outside / "sharedprompts.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                              "def fn(record):\n    return record.content\n")
    monkeypatch.syspath_prepend(str(outside))
    monkeypatch.delitem(sys.modules, "sharedprompts", raising=False)
    path = write_toml(tmp_path / "p", transform("fn", "sharedprompts:fn"))
    assert "refused without trust" in refused(path)
    assert not marker.exists() and "sharedprompts" not in sys.modules
    pipe = PipelineDefinition.from_toml(path, trust=True)  # the user said so
    assert marker.exists() and pipe.steps["t"].fn.__module__ == "sharedprompts"


def test_the_projects_own_modules_load_untrusted_but_not_what_they_re_export(tmp_path, monkeypatch):
    root = tmp_path / "p"
    root.mkdir()
    (root / "myprompts.py").write_text("from subprocess import run\n\ndef fn(record):\n    return record.content\n")
    monkeypatch.delitem(sys.modules, "myprompts", raising=False)
    pipe = PipelineDefinition.from_toml(write_toml(root, transform("fn", "myprompts:fn")))
    assert pipe.steps["t"].fn(type("R", (), {"content": "x"})()) == "x"
    message = refused(write_toml(root, transform("fn", "myprompts:run"), name="again.toml"), trust=True)
    assert "where run is defined" in message and "part of Python itself" in message


def test_the_code_location_door_applies_the_same_rule(tmp_path):
    root = tmp_path / "p"
    write_toml(root, transform("fn", "os:system"))
    (root / "pipeline.py").write_text(f"{PIPELINE_HEAD}pipeline = Pipeline.from_toml(HERE / 'shared.toml', trust=True)\n")
    with pytest.raises(PipelineDefinitionError, match=r"shared\.toml: step 't' fn = 'os:system'"):
        load_pipeline(root)  # what the Dagster code location and every CLI command load


def test_a_source_outside_the_project_must_be_allowed(tmp_path):
    private = tmp_path / "private-notes"
    private.mkdir()
    (private / "2024-01-02 secret.md").write_text("the vault code is 1234\n")
    root = tmp_path / "p"
    path = write_toml(root, f'[[steps]]\nname = "notes"\nkind = "source"\nfile = "{private}"\nformat = "folder"\n')
    assert f"source 'notes' reads {private}, outside the project {root}" in refused(path)
    shown: list[list[str]] = []
    assert "not allowed" in refused(path, allow_effects=lambda p, lines: shown.append(lines) or False)
    assert len(shown) == 1 and "private-notes" in shown[0][0]
    pipe = PipelineDefinition.from_toml(path, allow_effects=lambda p, lines: True)
    assert pipe.sources()["notes"].path() == private


class Receiver:
    """A real local HTTP endpoint counting every POST it gets."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                receiver.posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/collect"


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


def hooked_toml(root: Path, url: str) -> Path:
    return write_toml(root, transform("fn", "synthex.prompts:extract_transcript", name="transcripts"),
                      f'[[outputs]]\nname = "latest"\nfrom = ["transcripts"]\nsurface = "projection"\n'
                      f'on_update = "{url}"\n')


def test_an_on_update_url_not_allowed_is_refused_before_any_post(tmp_path, receiver):
    root = tmp_path / "p"
    path = hooked_toml(root, receiver.url)
    assert f"output 'latest' on_update POSTs each new record of transcripts to {receiver.url}" in refused(path)
    (root / "pipeline.py").write_text(f"{PIPELINE_HEAD}pipeline = Pipeline.from_toml(HERE / 'shared.toml')\n")
    result = cli("run", "--project", str(root), check=False)  # non-interactive, no flag: refused
    assert result.returncode == 2 and "not allowed" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert receiver.posts == []
    assert not (root / ".synthex" / "lancedb").exists()  # refused at load: nothing ran


def test_a_hook_the_load_did_not_allow_is_refused_where_the_run_would_use_it(tmp_path, receiver):
    from synthex import Pipeline

    pipe = Pipeline.from_toml(hooked_toml(tmp_path / "p", receiver.url), allow_effects=True)
    elsewhere = receiver.url.replace("/collect", "/elsewhere")
    pipe.outputs["latest"].on_update = elsewhere  # e.g. a branch file pointing the shared hook elsewhere
    with pytest.raises(PipelineDefinitionError, match=f"not allowed when this TOML was loaded: output 'latest' "
                                                      f"on_update POSTs each new record of transcripts to {elsewhere}"):
        pipe.run()
    assert receiver.posts == [] and not (tmp_path / "p" / ".synthex" / "lancedb").exists()
    assert pipe.shared_toml.allows_hook("latest", receiver.url) and not pipe.shared_toml.allows_hook("latest", elsewhere)


def test_hostile_toml_is_one_line(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    bad = root / "bad.toml"
    bad.write_text("[pipeline\n")
    assert "not a TOML file" in refused(bad)
    bad.write_text('[pipeline]\nname = "x"\n[[outputs]]\nname = "o"\n')
    assert "[[outputs]] #1 needs name and from" in refused(bad)
    bad.write_text('[pipeline]\nname = "x"\n[[steps]]\nkind = "source"\n')
    assert "[[steps]] #1 needs a name" in refused(bad)


ROUND_TRIP_PY = '''
from synthex import CompressState, Limits, Pipeline
from synthex.prompts import extract_transcript, monthly_reflection, summarize_conversation
from localprompts import by_title, world

pipeline = Pipeline("round", agent="a", description="d", lexical_stem=True, limits=Limits(record_chars=500_000))
pipeline.source("chats", file="exports/conversations.json", format="chatgpt-export")
pipeline.transform("transcripts", from_="chats", fn=extract_transcript)
pipeline.transform("summaries", from_="transcripts", prompt=summarize_conversation, model="m", temperature=0.2)
pipeline.aggregate("monthly", from_="summaries", period="month", prompt=monthly_reflection)
pipeline.aggregate("by-speaker", from_="chats", by="speaker", fn=by_title)
pipeline.fold("world-model", from_="monthly", prompt=world, state=CompressState(every=3, prompt=world))
pipeline.output("context", from_="world-model", surface="projection")
pipeline.output("search", from_=["summaries", "transcripts"], surface="search", mode="lexical")
pipeline.eval_asset("locomo", data="data/locomo10.json", schedule="0 3 * * *")
'''
LOCAL_PROMPTS = '''
def by_title(records, period=None):
    return "profile"


def world(record, state):
    return "update: " + state + record.content
'''


def test_import_toml_writes_a_pipeline_py_that_builds_the_same_definition(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # loading a project puts its folder on the path
    source = tmp_path / "origin"
    source.mkdir()
    write_small_export(source / "exports" / "conversations.json")
    (source / "localprompts.py").write_text(LOCAL_PROMPTS)
    (source / "pipeline.py").write_text(ROUND_TRIP_PY)
    monkeypatch.delitem(sys.modules, "localprompts", raising=False)
    toml = source / "shared.toml"
    original = load_pipeline(source)
    original.to_toml(toml)
    sys.path.remove(str(source))  # a new process: the origin's modules are not on the path

    target = tmp_path / "imported"
    target.mkdir()
    write_small_export(target / "exports" / "conversations.json")
    (target / "localprompts.py").write_text(LOCAL_PROMPTS)
    shared = target / "shared.toml"
    shared.write_text(toml.read_text())
    monkeypatch.delitem(sys.modules, "localprompts", raising=False)
    expected = PipelineDefinition.from_toml(shared)  # the project's own module: no trust needed
    result = cli("import-toml", str(shared), "--project", str(target))
    assert f"wrote {target / 'pipeline.py'} (definition {structure_fingerprint(expected)})" in result.stdout

    written = load_pipeline(target)
    assert structure_fingerprint(written) == structure_fingerprint(expected)
    assert written.to_toml_dict() == expected.to_toml_dict() == original.to_toml_dict()
    assert {n: s.version_hash() for n, s in written.steps.items()} == \
        {n: s.version_hash() for n, s in original.steps.items()}
    assert "from synthex.core.prompts import" in (target / "pipeline.py").read_text()
    again = cli("import-toml", str(shared), "--project", str(target), check=False)
    assert again.returncode == 2 and "already exists" in again.stderr


def test_import_toml_applies_the_rule_too(tmp_path, receiver):
    root = tmp_path / "p"
    path = hooked_toml(root, receiver.url)
    refusal = cli("import-toml", str(path), "--project", str(root), check=False)
    assert refusal.returncode == 2 and "not allowed" in refusal.stderr and not (root / "pipeline.py").exists()
    cli("import-toml", str(path), "--project", str(root), "--allow-effects")
    written = (root / "pipeline.py").read_text()
    assert f"on_update={receiver.url!r}" in written and receiver.posts == []
    assert f"# Allowed at import (outside the project): output 'latest' on_update POSTs each new record of " \
           f"transcripts to {receiver.url}" in written
    os_system = write_toml(tmp_path / "q", transform("fn", "os:system"))
    refusal = cli("import-toml", str(os_system), "--project", str(tmp_path / "q"), "--trust", check=False)
    assert refusal.returncode == 2 and "fn = 'os:system'" in refusal.stderr



def test_the_hook_delivery_posts_only_to_the_url_allowed_at_load(tmp_path, receiver):
    """The delivery every run makes (synthex_assets' executor and `hooks retry` both go through it)."""
    from synthex import Pipeline
    from synthex_resources.hook_deliveries import HookDeliveries, HookState

    pipe = Pipeline.from_toml(hooked_toml(tmp_path / "p", receiver.url), allow_effects=True)
    record = Record(id="r1", content="hello", step="transcripts", branch="main", source_ids=[],
                    materialization_key="k", run_id="run", created_at="2024-01-01T00:00:00Z", metadata={},
                    audit={}, period="2024-01")
    deliveries = HookDeliveries(pipe, pipe.store(), tries=1)
    try:
        assert deliveries._deliver(HookState("latest", "main"), record) == ""
        assert [p["record"]["id"] for p in receiver.posts] == ["r1"]  # allowed: delivered
        pipe.outputs["latest"].on_update = receiver.url.replace("/collect", "/elsewhere")
        error = deliveries._deliver(HookState("latest", "main"), record)
        assert "was not allowed when the TOML was loaded; nothing was sent" in error
        assert len(receiver.posts) == 1
    finally:
        pipe.close()
