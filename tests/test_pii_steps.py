"""``pii=`` on steps, without a Dagster run: what a step's prompt sees and what it writes, the version
hash, and `synthex pii scan` over a real store. (The whole path through Dagster, the model and the
disk is in test_purge.py.)"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import cli, write_project, write_small_export

from synthex.core.definition import PipelineDefinition
from synthex.core.errors import PipelineDefinitionError
from synthex.core.llm import Completion
from synthex.core.record import Record
from synthex.core.steps import TransformStep
from synthex.core.steps.base import execute_partition
from synthex.core.steps.privacy import apply_pii
from synthex_resources.step_context import SnapshotContext

TEXT = "Mail ana.lima@example.com or call +1 415 555 0132; again: ana.lima@example.com"


def record(content: str = TEXT, **kw) -> Record:
    return Record(id="r1", content=content, step="chatgpt", branch="main", source_ids=[], period="2024-01",
                  metadata={"chat": {"title": "Write to ana.lima@example.com"}, "time": {"created_at": "2024-01-02"}},
                  **kw)


def test_redact_replaces_values_in_content_metadata_and_raw_response():
    out = apply_pii(record(audit={"raw_response": '{"text": "to ana.lima@example.com"}'}), "redact")
    assert out.content == "Mail [EMAIL_1] or call [PHONE_1]; again: [EMAIL_1]"
    assert out.metadata["chat"]["title"] == "Write to [EMAIL_1]"
    assert "ana.lima" not in out.audit["raw_response"]
    assert out.metadata["pii"] == {"mode": "redact", "redacted": {"EMAIL": 2, "PHONE": 1}}


def test_detect_and_flag_keep_the_content_and_never_store_values():
    detected = apply_pii(record(), "detect")
    assert detected.content == TEXT
    spans = detected.metadata["pii"]["findings"]
    assert [TEXT[s:e] for _, s, e in spans] == ["ana.lima@example.com", "+1 415 555 0132", "ana.lima@example.com"]
    assert "ana.lima" not in json.dumps(detected.metadata["pii"])
    flagged = apply_pii(record(), "flag")
    assert flagged.metadata["pii"] == {"mode": "flag", "flagged": True, "types": {"EMAIL": 2, "PHONE": 1}}
    assert apply_pii(record("nothing personal here"), "flag").metadata["pii"]["flagged"] is False


class RecordingCompleter:
    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete_many(self, prompts, model, temperature):
        self.prompts += prompts
        return [Completion(text=f"summary: {p}", model="recorder") for p in prompts]


def test_a_redacting_step_sends_the_model_only_redacted_text_and_writes_none():
    step = TransformStep(name="summaries", from_=["chatgpt"], prompt=lambda r: "Summarize:\n" + r.content,
                         pii="redact")
    completer = RecordingCompleter()
    ctx = replace(SnapshotContext.of([record()], "main").at("2024-01"), completer=completer)
    result = execute_partition(step, ctx, set())
    assert completer.prompts and not any("ana.lima" in p or "555" in p for p in completer.prompts)
    [written] = result.new_records
    assert "[EMAIL_1]" in written.content and "ana.lima" not in json.dumps(written.metadata)


def upper(record):
    return record.content.upper()


def test_the_mode_is_part_of_the_version_and_a_bad_mode_is_one_line():
    versions = {TransformStep(name="t", from_=["s"], fn=upper, pii=m).version_hash()
                for m in (None, "redact", "detect", "flag")}
    assert len(versions) == 4
    # Steps without pii= keep the hash they had before the option existed (no recompute on upgrade).
    from synthex.core.hashing import stable_hash

    plain = TransformStep(name="t", from_=["s"], fn=upper)
    assert plain.version_hash() == stable_hash("step/v1", plain.kind, plain.config(), plain._code_hashes())[:24]
    pipe = PipelineDefinition("p")
    pipe.source("s", file="x.json")
    with pytest.raises(PipelineDefinitionError, match="pii='mask'; expected one of redact, detect, flag"):
        pipe.transform("t", from_="s", fn=upper, pii="mask")


def test_pii_scan_counts_per_step_and_names_the_records(tmp_path):
    from synthex.core.project import load_pipeline

    root = write_project(tmp_path / "proj", write_small_export(tmp_path / "conversations.json"))
    pipe = load_pipeline(root)
    store = pipe.store()
    store.records.upsert([replace(record(), id="a" * 8 + "-0000-0000-0000-000000000001"),
                  replace(record("card 4111 1111 1111 1111 and key sk-proj-Ab3dEfGh1jKlMn0pQrStUvWxYz12"),
                          id="b" * 8 + "-0000-0000-0000-000000000002"),
                  replace(record("release 1.2.3.4 on 2024-01-02, order 123-456-7890"), id="c" * 8 + "-0000-0000-0000-000000000003")],
                 embed=False)
    pipe.close()
    out = json.loads(cli("pii", "scan", "--step", "chatgpt", "--json", "--project", str(root)).stdout)
    assert out["records_scanned"] == 3 and out["records_with_pii"] == 2
    assert out["steps"]["chatgpt"] == {"CARD": 1, "EMAIL": 2, "PHONE": 1, "SECRET": 1}
    assert {r["id"][:8] for r in out["records"]} == {"a" * 8, "b" * 8}
    assert "ana.lima" not in json.dumps(out)
    bad = cli("pii", "scan", "--step", "nope", "--project", str(root), check=False)
    assert bad.returncode != 0 and "unknown step 'nope'" in bad.stderr
