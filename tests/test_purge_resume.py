"""A purge killed mid-sweep is finished by ONE re-run (issue 32, item 2), and the residue scan sees
text in LanceDB's compressed pages (item 3).

The kill lands at a point the purge reports (its ``on_event`` hook, in a driver subprocess that SIGKILLs
itself: ``test_hostile_purge.kill_at``): after the first table of the compaction, while Dagster's SQLite
files are open, so their ``-wal`` / ``-shm`` files stay behind. The re-run's file sweep closes each
database, which removes those files between the sweep's listing and its reading them: that is not an
error. Then ``synthex doctor`` exits 3 while the purge is unfinished, and 0 once it is finished."""

from __future__ import annotations

import json

import pytest
from conftest import cli, go_offline, load, write_project, write_small_export
from test_hostile_purge import kill_at, raw_hits
from test_purge import conversation

from synthex.core.purge_journal import PurgeJournal, PurgePhase, PurgeStep
from synthex_resources.residue import Needles, scan

PLANTED = ("My storage unit at Harbour Lane opens with 4471-QZX-PLANT, do not share it.",
           "Noted: the Harbour Lane storage unit code is kept private.")
# Long conversations, as real ones are, in one month: Lance compresses a page of this much text (FSST),
# so the bytes of the file that holds the month's rows do not show it.
FILLER = [f"Ledger entry {i}: crate {i * 7} moved from bay {i % 13} to bay {(i * 5) % 17} on the night shift."
          for i in range(800)]


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    base = tmp_path_factory.mktemp("purge-resume")
    export = write_small_export(base / "exports" / "conversations.json")
    user = "\n".join([*FILLER[:60], PLANTED[0], *FILLER[60:120]])
    planted = conversation("planted-unit", "Storage unit", 1693540000.0, user, PLANTED[1])
    ledgers = [conversation(f"ledger-{n}", f"Ledger {n}", 1693541000.0 + n, "\n".join(FILLER[n * 120:n * 120 + 120]),
                            "Filed.") for n in range(1, 6)]
    export.write_text(json.dumps([planted, *ledgers, *json.loads(export.read_text())]))
    root = write_project(base / "proj", export)
    with pytest.MonkeyPatch.context() as mp:
        go_offline(mp)
        pipe = load(root)
        assert pipe.run().status == "completed"
        source = next(r for r in pipe.records("chatgpt") if "4471-QZX-PLANT" in r.content)
        data_dir = pipe.data_dir
        pipe.close()
        needles = [PLANTED[0], "4471-QZX-PLANT"]
        before = scan(data_dir, Needles.of_texts(needles))
        raw_before = raw_hits(data_dir, needles)
        assert before  # positive control: the check that must find none after the purge finds it here
        kill_at(root, "purge", PurgeStep(PurgePhase.COMPACTION), False, [source.id[:8]])
        progress = PurgeJournal(data_dir).progress()
        sides = sorted(str(p.relative_to(data_dir)) for p in (data_dir / "dagster").rglob("*")
                   if p.name.endswith(("-wal", "-shm")))
        doctor = cli("doctor", "--project", str(root), check=False)
        doctor_json = cli("doctor", "--json", "--project", str(root), check=False)
        rerun = cli("purge", source.id[:8], "--project", str(root), check=False)
    return {"before": before, "raw_before": raw_before, "root": root, "data_dir": data_dir, "needles": needles, "progress": progress, "sides": sides,
            "doctor": doctor, "doctor_json": doctor_json, "rerun": rerun, "id": source.id}


def test_before_the_purge_the_scan_finds_the_text_in_lance_pages_that_are_compressed(killed):
    stored = [f for f in killed["before"] if f.startswith("lancedb/records.lance/data/")]
    # The rows of the long conversation's steps (the source, its transcript) are in pages Lance compressed:
    # their files' bytes do not show the text; the scan decodes them, so it finds it there.
    compressed = [f for f in stored if f not in killed["raw_before"]]
    assert compressed, (killed["before"], killed["raw_before"])


def test_the_kill_landed_mid_sweep_with_sqlite_side_files_left(killed):
    progress = killed["progress"]
    assert progress is not None and PurgeStep(PurgePhase.CACHE).key in progress.done
    assert PurgeStep(PurgePhase.COMPACTION).key not in progress.done
    assert killed["sides"]  # what made the re-run fail: files that vanish while the sweep reads them


def test_one_rerun_finishes_the_purge_without_a_traceback(killed):
    rerun = killed["rerun"]
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "Traceback" not in rerun.stderr and "finished the interrupted purge" in rerun.stdout
    assert "residue under" in rerun.stdout and ": none" in rerun.stdout
    assert not PurgeJournal(killed["data_dir"]).exists()
    assert raw_hits(killed["data_dir"], killed["needles"]) == {}
    assert scan(killed["data_dir"], Needles.of_texts(killed["needles"])) == {}  # decoded: none either
    pipe = load(killed["root"])
    try:
        assert pipe.get(killed["id"]) is None
    finally:
        pipe.close()


def test_doctor_exits_non_zero_while_the_purge_is_unfinished_and_zero_after(killed):
    assert killed["doctor"].returncode == 3 and "unfinished purge" in killed["doctor"].stdout
    assert killed["doctor_json"].returncode == 3
    assert json.loads(killed["doctor_json"].stdout)["healthy"] is False
    after = cli("doctor", "--project", str(killed["root"]), check=False)
    assert after.returncode == 0 and "healthy" in after.stdout


def test_a_line_other_conversations_share_is_not_residue(tmp_path, ran_project):
    # Conversations share lines ("user: What are the trade-offs?"): the purge removes its conversation,
    # and the copies the others hold stay with them; neither swept nor reported as residue (a purge that
    # exits 1 on every such conversation tells the user nothing).
    root = ran_project.copy(tmp_path / "proj")
    pipe = load(root)
    try:
        records = pipe.records("chatgpt")

        def lines(rec) -> set[str]:
            return {line.strip()[:80] for line in rec.content.splitlines() if len(line.strip()) >= 12}

        source = next(r for r in sorted(records, key=lambda r: r.id)
                      if lines(r) & {line for o in records if o.id != r.id for line in lines(o)})
        shared = sorted(lines(source) & {line for o in records if o.id != source.id for line in lines(o)})
    finally:
        pipe.close()
    out = cli("purge", source.id[:8], "--project", str(root), check=False)
    assert out.returncode == 0 and "residue under" in out.stdout, out.stdout + out.stderr
    pipe = load(root)
    try:
        assert pipe.get(source.id) is None
        kept = "\n".join(r.content for r in pipe.records("chatgpt"))
        assert all(line in kept for line in shared)  # the other conversations keep their lines
    finally:
        pipe.close()
