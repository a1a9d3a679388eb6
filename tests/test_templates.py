"""`synthex init --template NAME --demo` then `synthex run` and `synthex search`, offline, for every
template; each template a short pipeline.py that says what it is for. The bundled demo (200
conversations) is swapped for 8 generated ones so the whole file stays well under a minute."""

from __future__ import annotations

import ast
import json
import re

import pytest
from conftest import cli, write_json, write_small_export

from synthex.core import project
from synthex.core.demo.generate import generate
from synthex.core.project import TEMPLATES, TEMPLATES_DIR, load_pipeline

# template -> (a query, the search options, the steps its hits come from)
SEARCHES = {
    "hierarchical": ("Kyoto trip", [], {"chatgpt"}),  # its mode=: drilled down to the conversations
    "raw": ("Kyoto trip", [], {"transcripts"}),
    "conversational": ("what should I not miss in Kyoto", ["--mode", "conversational"], {"chatgpt"}),
    "hierarchical-conversational": ("what should I not miss in Kyoto", [], {"chatgpt"}),  # its mode=: turns
    "enriched": ("Kyoto", [], {"enriched"}),
    "structured": ("login fails after password reset", [], {"tickets", "weekly"}),
}
# What a prompt wrote and the offline stand-in must not copy into a record (issue 13, item 7).
INSTRUCTIONS = re.compile(r"summari[sz]e|reflect on|update your|week:|month:|conversations?:|date:|"
                          r"digest of|^customer:|subject:|body:|\bmain topic|understanding", re.IGNORECASE)


def test_the_cli_offers_every_template_and_each_is_a_short_commented_pipeline(tmp_path):
    from synthex.surfaces.cli import init

    choices = next(p for p in init.params if p.name == "template").type.choices
    assert sorted(choices) == sorted(TEMPLATES) == sorted(p.name.split(".")[0] for p in TEMPLATES_DIR.glob("*.py.tmpl"))
    export = str(tmp_path / "conversations.json")
    for name in TEMPLATES:
        sources = [] if name == "structured" else [("chatgpt", export, "chatgpt-export")]
        text = project.render_template("mem", sources, template=name)
        doc = ast.get_docstring(ast.parse(text))  # valid Python, opening with what it is for
        assert doc and f"--template {name}" in doc and "$" not in text
        assert len(text.splitlines()) <= 60
    assert project.render_template("mem", [("chatgpt", export, "auto")]) == project.render_template(
        "mem", [("chatgpt", export, "auto")], template="hierarchical")  # the default


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_init_template_demo_runs_offline_and_searches(name, tmp_path, monkeypatch):
    demo = write_json(tmp_path / "demo.json", generate(conversations=8, months=2, seed=3))  # the demo, smaller
    monkeypatch.setattr(project, "DEMO_EXPORT", demo)
    cli("init", "mem", "--demo", "--template", name, cwd=tmp_path)
    proj = tmp_path / "mem"
    assert f"--template {name}" in (proj / "pipeline.py").read_text()
    done = cli("run", "--project", str(proj))
    assert "0 errors" in done.stdout
    query, options, steps = SEARCHES[name]
    hits = json.loads(cli("search", query, *options, "--json", "--project", str(proj)).stdout)["hits"]
    assert hits and {h["step"] for h in hits} <= steps
    assert not any(INSTRUCTIONS.search(h["content"]) for h in hits if h["step"] in ("summaries", "monthly", "weekly"))
    if name == "hierarchical":  # hybrid ranks the summaries and reflections themselves
        hits = json.loads(cli("search", query, "--mode", "hybrid", "--json", "--project", str(proj)).stdout)["hits"]
        assert hits and {h["step"] for h in hits} <= {"summaries", "monthly"}
        assert not any(INSTRUCTIONS.search(h["content"]) for h in hits)
    pipe = load_pipeline(proj)
    try:
        model_steps = [s for s, step in pipe.steps.items() if getattr(step, "prompt", None) is not None]
        for step in model_steps:  # what the offline stand-in wrote: material only
            records = pipe.records(step)
            assert records and all(r.content and not INSTRUCTIONS.search(r.content) for r in records), step
        if name == "hierarchical":
            transcripts = {r.id: " ".join(r.content.split()) for r in pipe.records("transcripts")}
            for summary in pipe.records("summaries"):  # whole sentences of its own conversation
                assert all(s in transcripts[summary.source_ids[0]] for s in re.split(r"(?<=[.?!]) ", summary.content))
        if name == "conversational":
            assert len(pipe.records("chatgpt")) > len(json.loads(project.DEMO_EXPORT.read_text()))  # one per turn
        if name == "enriched":  # the transcript and its index line (synthex.core.enrich)
            transcripts = {r.id: r.content for r in pipe.records("transcripts")}
            enriched = pipe.records("enriched")
            assert enriched and all(transcripts[r.source_ids[0]] in r.content for r in enriched)
            assert any("entities: " in r.content and "dates: " in r.content for r in enriched)
    finally:
        pipe.close()


def test_structured_takes_no_export_and_keeps_an_edited_table(tmp_path):
    export = write_small_export(tmp_path / "c.json")
    refused = cli("init", "mem", "--template", "structured", "--from", str(export), cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "table" in refused.stderr
    cli("init", "mem", "--template", "structured", cwd=tmp_path)
    table = tmp_path / "mem" / "data" / "example.sqlite"
    before = table.read_bytes()
    cli("init", "mem", "--template", "structured", cwd=tmp_path)  # the same init again: nothing rewritten
    assert table.read_bytes() == before


def test_the_import_paths_earlier_templates_wrote_still_work():
    """Projects made before the core moved to synthex/core keep loading: their pipeline.py imports these."""
    from synthex.core.enrich.steps import with_enrichment as core_with_enrichment
    from synthex.core.importers.base import SourceItem as CoreSourceItem
    from synthex.enrich.steps import with_enrichment
    from synthex.importers import SourceItem, load_source, register_format
    from synthex.importers.base import read_json_objects
    from synthex.periods import iso, to_timestamp
    from synthex.prompts import (
        extract_transcript,
        monthly_reflection,
        summarize_conversation,
        world_model_prompt,
    )

    assert with_enrichment is core_with_enrichment and SourceItem is CoreSourceItem
    assert all(callable(f) for f in (load_source, register_format, read_json_objects, iso, to_timestamp,
                                     extract_transcript, monthly_reflection, summarize_conversation,
                                     world_model_prompt))
