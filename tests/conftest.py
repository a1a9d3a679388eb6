from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from evals.postgres_server import PostgresServer, find_bin, start_postgres
from synthex.core.demo.generate import generate
from synthex.core.project import render_template

OFFLINE_UNSET = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SYNTHEX_MODEL", "SYNTHEX_DAGSTER_HOME", "SYNTHEX_EMBEDDER",
                 "SYNTHEX_EMBEDDING_MODEL", "SYNTHEX_EMBEDDING_DIM", "SYNTHEX_ENCRYPTION_KEY")


def go_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in OFFLINE_UNSET:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def offline_env(monkeypatch):
    """Tests run offline unless a test points the LLM at the local fake server itself."""
    go_offline(monkeypatch)
    yield
    forget_dagster_defs_state_storage()


def forget_dagster_defs_state_storage() -> None:
    """Dagster keeps a process-wide "current defs-state storage" (a ContextVar) that entering an instance
    sets and disposing it does not reset; it holds a weak reference to that instance, so once the
    instance is collected every later Definitions load in the process fails ("Attempted to resolve
    undefined DagsterInstance weakref"). Tests share one process: clear it after each test."""
    import sys

    if "dagster._core.storage.defs_state.base" in sys.modules:
        from dagster._core.storage.defs_state.base import _current_storage

        _current_storage.set(None)


def write_small_export(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(generate(conversations=12, months=3, seed=3)))
    return path


@pytest.fixture
def small_export(tmp_path) -> Path:
    return write_small_export(tmp_path / "exports" / "conversations.json")


SUMMARIZE = '''
def summarize(record):
    return "Summarize this conversation.\\n\\n" + record.content
'''
# The default template (the one `synthex init` writes), with a local summary prompt tests can rewrite.
PIPELINE_PY = render_template("test-memory", [("chatgpt", "{export}", "auto")], agent="tester",
                              summarize="summarize", prelude=SUMMARIZE)


def write_json(path: Path, data: object) -> Path:
    """A benchmark or export fixture written as the JSON file the loaders read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def write_project(root: Path, export: Path, body: str = PIPELINE_PY) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pipeline.py").write_text(textwrap.dedent(body).format(export=str(export)))
    return root


@pytest.fixture
def project(tmp_path, small_export) -> Path:
    return write_project(tmp_path / "proj", small_export)


def load(root: Path):
    from synthex.core.project import load_pipeline

    return load_pipeline(root)


def env_without_openai() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


@dataclass
class RanProject:
    """A project (PIPELINE_PY over the small export) after one uninterrupted run; ``run`` is that run."""

    root: Path
    export: Path
    run: object

    def copy(self, dest: Path) -> Path:
        """A private copy for a test that writes (cheaper than running again). The copy reads the same
        export file: write edited exports next to your own tmp_path, never over ``export``."""
        shutil.copytree(self.root, dest, symlinks=True)
        return dest


@pytest.fixture(scope="session")
def ran_project(tmp_path_factory) -> RanProject:
    """Shared, read-only: tests that change the project take ``ran_project.copy(tmp_path / ...)``."""
    base = tmp_path_factory.mktemp("ran-project")
    export = write_small_export(base / "exports" / "conversations.json")
    root = write_project(base / "proj", export)
    with pytest.MonkeyPatch.context() as mp:  # session fixtures run before the autouse offline_env
        go_offline(mp)
        pipe = load(root)
        try:
            run = pipe.run()
        finally:
            pipe.close()
    assert run.status == "completed"
    return RanProject(root, export, run)


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, cwd: Path | None = None, check: bool = True) -> CliResult:
    """``synthex ARGS`` in this process (click's CliRunner): for tests about what a command prints or does,
    not about the process boundary (those use test_cli.synthex, a subprocess). An exception the CLI does
    not turn into an exit code propagates (a traceback the user would see fails the test)."""
    from click.testing import CliRunner

    from synthex.surfaces.cli import main

    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, prog_name="synthex")
    out = CliResult(result.exit_code, result.stdout, result.stderr)
    if check and out.returncode != 0:
        raise AssertionError(f"synthex {args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def locomo_sessions(sessions: dict[str, list[tuple[str, str]]], sample_id: str) -> list[dict]:
    """A LoCoMo file of one Ann-and-Bob conversation from {session date: [(speaker, text), ...]}: turn ids
    ``D<session>:<turn>``, counted from 1, no questions."""
    conv: dict = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for s, (date, turns) in enumerate(sessions.items(), start=1):
        conv[f"session_{s}_date_time"] = date
        conv[f"session_{s}"] = [{"speaker": who, "dia_id": f"D{s}:{t}", "text": text}
                                for t, (who, text) in enumerate(turns, start=1)]
    return [{"sample_id": sample_id, "conversation": conv, "qa": []}]


LOCOMO_TOPICS = ["adopted a puppy named Rex", "started pottery classes", "ran the Lisbon half marathon",
                 "moved to a flat in Porto", "learned to bake sourdough", "visited Kyoto in spring"]


def locomo_conversation(shift: int = 0, tag: str = "") -> tuple[dict, list[tuple[int, int, str, str]]]:
    """A LoCoMo-format conversation between Ann and Bob: 3 sessions of 4 turns ("<speaker> says: I <topic>
    (note <tag><session><turn>)."), topics rotating with ``shift``. Returns it and its turns as
    (session, turn, speaker, topic), for a test to write questions about."""
    conv: dict = {"speaker_a": "Ann", "speaker_b": "Bob"}
    turns = []
    for s in range(1, 4):
        conv[f"session_{s}_date_time"] = f"1:{10 + s} pm on {s + 4} May, 2023"
        session = []
        for t in range(1, 5):
            topic = LOCOMO_TOPICS[(shift + s + t) % len(LOCOMO_TOPICS)]
            speaker = "Ann" if t % 2 else "Bob"
            session.append({"speaker": speaker, "dia_id": f"D{s}:{t}",
                            "text": f"{speaker} says: I {topic} (note {tag}{s}{t})."})
            turns.append((s, t, speaker, topic))
        conv[f"session_{s}"] = session
    return conv, turns


def graphql(instance, root, tmp_path, query: str, variables: dict) -> dict:
    """``query`` through Dagster's GraphQL API, as the UI asks it, on a workspace loading the project at
    ``root``'s code location (a file in ``tmp_path``); no errors, its data."""
    from dagster._core.test_utils import in_process_test_workspace
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster_graphql.test.utils import execute_dagster_graphql

    location = tmp_path / "location.py"
    location.write_text("from synthex.core.project import load_pipeline\n"
                        "from synthex_assets.code_location import location_definitions\n\n"
                        f"defs = location_definitions(load_pipeline({str(root)!r}))\n")
    origin = LoadableTargetOrigin(python_file=str(location), attribute="defs", working_directory=str(tmp_path))
    with in_process_test_workspace(instance, origin) as context:
        result = execute_dagster_graphql(context, query, variables)
    assert not result.errors, result.errors
    return result.data


# The shared deployment tests' PostgreSQL server (Debian's initdb + pg_ctl; .ci/run installs them): one per
# worker process, started by the first test that asks for it; each test gets a database of its own on it
# (its own Dagster instance: no test sees another's runs, dynamic partitions or daemon's queue).
@pytest.fixture(scope="session")
def postgres_server() -> PostgresServer:
    if not (find_bin("initdb") and find_bin("pg_ctl")):
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL's initdb/pg_ctl are missing: .ci/run installs Debian's postgresql")
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed (Debian: apt-get install postgresql)")
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres(postgres_server: PostgresServer) -> PostgresServer:
    """The session's server, with ``db`` (what ``env()`` names) a new, empty database for this test."""
    db = f"test_{uuid.uuid4().hex[:12]}"
    postgres_server.create_database(db)
    return dataclasses.replace(postgres_server, db=db)
