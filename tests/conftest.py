from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from synthex.demo.generate import generate
from synthex.project import render_template


@pytest.fixture(autouse=True)
def offline_env(monkeypatch):
    """Tests run offline unless a test points the LLM at the local fake server itself."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SYNTHEX_MODEL", "SYNTHEX_DAGSTER_HOME", "SYNTHEX_EMBEDDER",
                "SYNTHEX_EMBEDDING_MODEL", "SYNTHEX_EMBEDDING_DIM"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def small_export(tmp_path) -> Path:
    path = tmp_path / "exports" / "conversations.json"
    path.parent.mkdir()
    path.write_text(json.dumps(generate(conversations=12, months=3, seed=3)))
    return path


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
    from synthex.project import load_pipeline

    return load_pipeline(root)


def env_without_openai() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
