"""Purge and PII end to end (issue 12): a planted token goes through a real model path (the openai client
against the local fake server, so the LLM cache and audit hold it), two branches, Dagster's event log
(previews) and the FTS index; the purge must leave zero bytes of it anywhere under the data directory,
recompute what used it, and keep it out of later runs. The source has ``pii="redact"``: the model never
sees an email, and none is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli, go_offline, load, write_project, write_small_export
from fake_openai import FakeOpenAI

from synthex.core.project import create_branch_file

TOKEN = "ZQXPLANT7731"
EMAIL = "jane.roe@clinic-example.org"
BRANCH = "better-summaries"
OVERRIDE = '''

def short_summary(record):
    return "In short: " + record.content[:120]


def overrides(pipeline):
    pipeline.transform("summaries", from_="transcripts", fn=short_summary)
'''


def conversation(cid: str, title: str, when: float, user: str, assistant: str) -> dict:
    def node(mid, role, text, parent, children):
        return {"id": mid, "parent": parent, "children": children,
                "message": {"id": mid, "author": {"role": role}, "create_time": when,
                            "content": {"content_type": "text", "parts": [text]}}}
    return {"id": cid, "title": title, "create_time": when, "update_time": when,
            "mapping": {"a": node("a", "user", user, None, ["b"]), "b": node("b", "assistant", assistant, "a", [])}}


def echo_planted(prompt: str) -> str | None:
    """A model that repeats what it was told about the planted token (so every level carries it)."""
    lines = [line for line in prompt.splitlines() if TOKEN in line]
    return lines[0][:300] if lines else None


def scan_bytes(root: Path, needle: str) -> dict[str, int]:
    """Case-insensitive raw-byte occurrences of ``needle`` in every file under ``root``."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            count = path.read_bytes().lower().count(needle.lower().encode())
            if count:
                found[str(path.relative_to(root))] = count
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A project with a planted conversation, run on main and on a branch through the fake model, then
    purged; yields what the tests look at. The fake server stays up for the purge's re-runs."""
    base = tmp_path_factory.mktemp("purge")
    export = write_small_export(base / "exports" / "conversations.json")
    convs = json.loads(export.read_text())
    # The earliest conversation of the first month: the first row of its partition's UI preview.
    planted = conversation("planted-1", "Clinic locker", 1693540000.0,
                           f"My locker code at the clinic is {TOKEN}, keep it safe.",
                           f"Noted: the clinic locker code {TOKEN} is stored.")
    with_pii = conversation("pii-1", "Call the dentist", 1693541000.0,
                            f"Email {EMAIL} or call +44 20 7946 0958 to move the appointment.",
                            "I will draft the email now.")
    export.write_text(json.dumps([planted, with_pii, *convs]))
    root = write_project(base / "proj", export)
    text = (root / "pipeline.py").read_text()
    (root / "pipeline.py").write_text(text.replace("format='auto')", "format='auto', pii='redact')", 1))
    assert "pii='redact'" in (root / "pipeline.py").read_text()
    path = create_branch_file(root, BRANCH, "main")
    body = path.read_text()
    path.write_text(body[:body.index("def overrides")] + OVERRIDE.lstrip("\n"))

    with pytest.MonkeyPatch.context() as mp, FakeOpenAI(answer=echo_planted) as model:
        go_offline(mp)
        mp.setenv("OPENAI_BASE_URL", model.base_url)
        mp.setenv("OPENAI_API_KEY", "test-key")
        pipe = load(root)
        assert pipe.run().status == "completed"
        assert pipe.run(branch=BRANCH).status == "completed"
        data_dir = pipe.data_dir
        before = scan_bytes(data_dir, TOKEN)
        all_rows = pipe.store().tables.read("records", None, ["id", "content", "branch", "step"])
        holding = {r["id"] for r in all_rows if TOKEN in r["content"]}
        planted_id = next(r["id"] for r in all_rows if r["step"] == "chatgpt" and TOKEN in r["content"])
        dry = json.loads(cli("purge", "--match", TOKEN.lower(), "--dry-run", "--json", "--project", str(root)).stdout)
        cli("sync", "--project", str(root))  # the CDC state now holds the planted item's key and hash
        cdc_before = cdc_keys(data_dir)
        report = pipe.purge(planted_id)
        pipe.close()
        sync_after = json.loads(cli("sync", "--project", str(root), "--json").stdout)
        rerun = cli("run", "--project", str(root), "--json")
        rerun_branch = cli("run", "--project", str(root), "--branch", BRANCH, "--json")
        prompts = list(model.prompts)
    yield {"root": root, "data_dir": data_dir, "before": before, "holding": holding, "planted": planted_id,
           "dry": dry, "report": report, "rerun": rerun, "rerun_branch": rerun_branch, "prompts": prompts,
           "rows_before": all_rows, "cdc_before": cdc_before, "cdc_after": cdc_keys(data_dir), "sync_after": sync_after}


def cdc_keys(data_dir: Path) -> set[str]:
    import duckdb

    with duckdb.connect(str(data_dir / "cdc.duckdb"), read_only=True) as db:
        return {k for (k,) in db.execute("SELECT key FROM cdc_items").fetchall()}


def test_the_planted_token_was_everywhere_before_the_purge(world):
    # Positive control: the scan that must find nothing afterwards finds it in each kind of place.
    places = " ".join(world["before"])
    assert "lancedb/records.lance" in places
    assert "lancedb/llm_cache.lance" in places
    assert "dagster/" in places  # a materialization preview in the event log
    steps = {r["step"] for r in world["rows_before"] if r["id"] in world["holding"]}
    assert steps == {"chatgpt", "transcripts", "summaries", "monthly", "world-model"}


def test_the_dry_run_lists_exactly_what_holds_it_on_every_branch(world):
    dry = world["dry"]
    assert dry["dry_run"] is True
    assert set(dry["affected_records"]) == world["holding"]
    assert dry["branches"] == sorted(["main", BRANCH])
    assert dry["steps"]["chatgpt"] == 1 and dry["steps"]["summaries"] == 2  # main's and the branch's


def test_no_byte_of_it_is_left_under_the_data_directory(world):
    report = world["report"]
    assert report.residue == {}
    assert scan_bytes(world["data_dir"], TOKEN) == {}
    assert report.cache_entries >= 1 and report.compaction["versions_removed"] > 0


def test_search_get_and_time_travel_find_nothing(world):
    import lance

    pipe = load(world["root"])
    try:
        for branch in ("main", BRANCH):
            assert pipe.search(TOKEN, exact=True, branch=branch) == []
            hits = pipe.search(f"clinic locker code {TOKEN}", branch=branch, k=50)  # hybrid: BM25 + dense
            assert hits and not any(TOKEN in h.content or h.id in world["holding"] for h in hits)
        assert all(pipe.get(rid) is None for rid in world["holding"])
        for table in ("records", "llm_cache"):
            ds = lance.dataset(str(world["data_dir"] / "lancedb" / f"{table}.lance"))
            for version in ds.versions():
                rows = ds.checkout_version(version["version"]).to_table().to_pylist()
                assert not any(TOKEN in json.dumps(r, default=str) for r in rows)
    finally:
        pipe.close()


def test_what_used_it_is_recomputed_without_it_and_stays_out(world):
    pipe = load(world["root"])
    try:
        for branch in ("main", BRANCH):
            monthly = {r.period: r for r in pipe.records("monthly", branch=branch)}
            assert "2023-09" in monthly  # the month still has other conversations: recomputed, not dropped
            assert TOKEN not in monthly["2023-09"].content
            assert len(pipe.records("world-model", branch=branch)) == 3
        assert world["report"].recomputed["main"] > 0 and world["report"].recomputed[BRANCH] > 0
        assert pipe.plan().steps == [] and pipe.plan(branch=BRANCH).steps == []
    finally:
        pipe.close()
    for rerun in (world["rerun"], world["rerun_branch"]):
        assert json.loads(rerun.stdout)["dagster_run_ids"] == []  # nothing came back
    assert "not imported: purged" in world["rerun"].stderr


def test_redacted_source_never_reaches_the_model_or_the_disk(world):
    assert world["prompts"] and not any(EMAIL in p or "7946 0958" in p for p in world["prompts"])
    assert scan_bytes(world["data_dir"], EMAIL) == {}
    pipe = load(world["root"])
    try:
        dentist = next(r for r in pipe.records("chatgpt") if "dentist" in r.content)
        assert "[EMAIL_1]" in dentist.content and "[PHONE_1]" in dentist.content
        assert dentist.metadata["pii"] == {"mode": "redact", "redacted": {"EMAIL": 1, "PHONE": 1}}
    finally:
        pipe.close()


def test_purge_of_an_unknown_id_is_one_line_and_changes_nothing(world):
    out = cli("purge", "00000000-dead-beef-0000-000000000000", "--project", str(world["root"]), check=False)
    assert out.returncode != 0 and "not found" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_sync_after_the_purge_neither_brings_it_back_nor_stores_its_hash(world):
    assert "planted-1" in world["cdc_before"]
    assert "planted-1" not in world["cdc_after"] and "pii-1" in world["cdc_after"]
    [source] = world["sync_after"]["sources"]
    assert source["new"] == 0 and source["changed"] == 0
    assert world["sync_after"]["run"]["dagster_run_ids"] == []
