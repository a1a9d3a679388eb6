"""Every step kind's records carry one audit shape; the planner counts tokens with the shared token model.

A tiny pipeline (source, transform fn=, transform prompt=, aggregate, fold, merge) over a small
ChatGPT-style export, run offline (the conftest fixture removes OPENAI_* vars) in a temp dir.
"""

from __future__ import annotations

import json

import pytest

from synthex import Pipeline
from synthex.core.llm import (
    CHARS_PER_TOKEN,
    OFFLINE_LABEL,
    OUTPUT_TOKENS_PER_CALL,
    TEMPLATE_TOKENS_PER_CALL,
    estimate_call_tokens,
    estimate_unrendered_tokens,
)
from synthex.core.steps import AUDIT_KEYS
from synthex.core.steps.source import IMPORTER_VERSION

# The documented audit keys (synthex.core.steps.base.Audit); written out so a silent change fails here.
DOCUMENTED_AUDIT_KEYS = {"prompt_template_hash", "prompt_function", "rendered_prompt_hash", "model", "temperature",
                         "raw_response", "tokens_in", "tokens_out", "cached"}

CONVERSATIONS = [  # (id, title, unix time, user text, assistant text)
    ("c1", "Sourdough starter", 1704189600, "My sourdough starter smells like acetone after two days. Is it dead?",
     "It is hungry, not dead. Feed it twice a day at a 1:1:1 ratio and keep it warm."),
    ("c2", "Bike chain", 1704880800, "The chain on my road bike skips under load on the smallest cog.",
     "A worn chain or cassette usually causes that. Measure chain stretch before replacing the cassette."),
    ("c3", "Tax forms", 1707390000, "Which form do I need to declare freelance income from last year?",
     "Freelance income goes on the self-employment schedule along with your regular annual return."),
]


def chatgpt_export(path):
    convs = []
    for cid, title, ts, user, assistant in CONVERSATIONS:
        mapping = {
            f"{cid}-root": {"id": f"{cid}-root", "message": None, "parent": None, "children": [f"{cid}-u"]},
            f"{cid}-u": {"id": f"{cid}-u", "parent": f"{cid}-root", "children": [f"{cid}-a"],
                         "message": {"id": f"{cid}-u", "author": {"role": "user"}, "create_time": ts,
                                     "content": {"content_type": "text", "parts": [user]}}},
            f"{cid}-a": {"id": f"{cid}-a", "parent": f"{cid}-u", "children": [],
                         "message": {"id": f"{cid}-a", "author": {"role": "assistant"}, "create_time": ts + 60,
                                     "content": {"content_type": "text", "parts": [assistant]}}},
        }
        convs.append({"id": cid, "title": title, "create_time": ts, "update_time": ts + 60,
                      "current_node": f"{cid}-a", "mapping": mapping})
    path.write_text(json.dumps(convs))
    return path


def as_text(record):
    return f"Conversation: {record.content}"


def summarize(record):
    return "Summarize this conversation in two sentences.\n\n" + record.content


def reflect(records, period):
    return f"What happened in {period}?\n\n" + "\n\n".join(r.content for r in records)


def update_journal(record, state):
    return f"Journal so far:\n{state or '(empty)'}\n\nAdd what this month adds:\n{record.content}"


@pytest.fixture
def pipe(tmp_path):
    export = chatgpt_export(tmp_path / "conversations.json")
    p = Pipeline("records-test", project_dir=tmp_path)
    p.source("chats", file=export, format="chatgpt-export")
    p.transform("transcripts", from_="chats", fn=as_text)
    p.transform("summaries", from_="chats", prompt=summarize)
    p.aggregate("monthly", from_="summaries", period="month", prompt=reflect)
    p.fold("journal", from_="monthly", prompt=update_journal)
    p.merge("unified", from_=["transcripts", "summaries"])
    yield p
    p.close()


def test_every_step_kind_records_carry_exactly_the_documented_audit(pipe):
    assert set(AUDIT_KEYS) == DOCUMENTED_AUDIT_KEYS and len(AUDIT_KEYS) == len(DOCUMENTED_AUDIT_KEYS)
    run = pipe.run()
    assert run.status == "completed"
    kinds = set()
    for name, step in pipe.steps.items():
        records = pipe.records(name)  # read back from the store: the shape survives storage
        assert records, f"step {name!r} made no records"
        for rec in records:
            assert set(rec.audit) == DOCUMENTED_AUDIT_KEYS, (name, sorted(rec.audit))
        kinds.add(step.kind)
    assert kinds == {"source", "transform", "aggregate", "fold", "merge"}

    source = pipe.records("chats")
    assert {r.audit["model"] for r in source} == {f"importer:{IMPORTER_VERSION}"}
    assert all(r.audit["prompt_function"] == "" and r.audit["tokens_in"] == 0 for r in source)

    transcripts = pipe.records("transcripts")
    assert {r.audit["model"] for r in transcripts} == {f"python:{as_text.__module__}:as_text"}
    assert all(r.audit["prompt_function"] == f"{as_text.__module__}:as_text" for r in transcripts)
    assert all(r.audit["rendered_prompt_hash"] == "" and r.audit["cached"] is False for r in transcripts)

    for name in ("summaries", "monthly", "journal"):
        for r in pipe.records(name):
            assert r.audit["model"] == OFFLINE_LABEL  # the offline stand-in's label, no configured model
            assert len(r.audit["rendered_prompt_hash"]) == 64
            assert r.audit["tokens_in"] > 0 and r.audit["tokens_out"] > 0 and r.audit["raw_response"]
            assert r.audit["temperature"] == 0.0 and r.audit["cached"] is False

    assert {r.audit["model"] for r in pipe.records("unified")} == {"merge:exact-fingerprint"}


def test_planner_llm_transform_estimate_is_the_shared_token_model(pipe):
    items = pipe.steps["chats"].items()
    n = len(items)
    # Nothing stored: the transform's prompts cannot be rendered, the planner sizes them from the source.
    fresh = pipe.plan()
    source_chars = sum(len(i.content) for i in items)
    expected = estimate_unrendered_tokens(source_chars, n)
    assert expected == source_chars // CHARS_PER_TOKEN + n * (TEMPLATE_TOKENS_PER_CALL + OUTPUT_TOKENS_PER_CALL)
    assert fresh.per_step["summaries"]["tokens"] == expected
    assert fresh.per_step["transcripts"]["tokens"] == 0  # fn= makes no model call

    # Source stored: the planner renders each prompt and counts it with the same model.
    pipe.run(step="chats")
    plan = pipe.plan()
    prompts = [summarize(r) for r in pipe.records("chats")]
    assert len(prompts) == n
    expected = estimate_call_tokens(prompts)
    assert expected == sum(max(1, len(p) // CHARS_PER_TOKEN) + OUTPUT_TOKENS_PER_CALL for p in prompts)
    assert plan.per_step["summaries"]["tokens"] == expected
    assert plan.per_step["summaries"]["records"] == n
