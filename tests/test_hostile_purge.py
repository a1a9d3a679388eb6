"""A purge killed at any point is finished later (issue 20, item 1): the purge is journaled, each step
is recorded done, and the next `synthex purge` (same arguments), `synthex run` or `synthex doctor
--repair` finishes it, leaving no byte of the purged text under the data directory.

One project with two branches, one purge stopped five times in a row at five known points, from the
purge's ``on_event`` hook: SIGKILLed in a driver subprocess after the delete on one of the two branches
and inside a branch's re-run (a Dagster run left "running"); interrupted in process (an exception from
the hook: the journal is left as a kill leaves it, and two subprocesses fewer keep the suite fast)
right after the journal is written, during the sweep and during compaction. Each stop is checked to
have landed mid-way (the state is half-done) before the next door resumes it; `synthex doctor --repair`
finishes it. Plus the journal's encryption and its stale leftovers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import cli, load

from synthex.core.needle_prints import prints_of
from synthex.core.project import create_branch_file
from synthex.core.purge_journal import PurgeJournal, PurgePhase, PurgeStep, PurgeTargets, plan_steps
from synthex.core.purges import source_key_hash
from synthex_resources.residue import Needles

BRANCH = "short"
OVERRIDE = '''
def short_summary(record):
    return "In short: " + record.content[:120]


def overrides(pipeline):
    pipeline.transform("summaries", from_="transcripts", fn=short_summary)
'''
# The driver: one door of the app, with a hook that SIGKILLs this process at one event of the purge.
DRIVER = textwrap.dedent('''
    import os, signal, sys
    from synthex.core.project import load_pipeline

    door, phase, branch, done, ids = sys.argv[1], sys.argv[2], sys.argv[3] or None, sys.argv[4] == "done", sys.argv[5:]

    def on_event(event):
        if event.step.phase.value == phase and event.step.branch == branch and event.done == done:
            os.kill(os.getpid(), signal.SIGKILL)

    app = load_pipeline(os.environ["PROJECT"]).app
    if door == "purge":
        app.purge(ids, on_event=on_event)
    else:
        app.finish_interrupted_purge(on_event=on_event, wait=True)
    print("the purge was not killed")
''')


def raw_hits(root: Path, needles: list[str]) -> dict[str, int]:
    """Raw-byte occurrences of any needle in every file under ``root``."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            count = sum(data.count(n.encode()) for n in needles)
            if count:
                found[str(path.relative_to(root))] = count
    return found


def kill_at(root: Path, door: str, step: PurgeStep, done: bool, ids: list[str] = ()) -> None:
    """Run ``door`` in a driver subprocess that SIGKILLs itself at ``step``; assert it really died there."""
    env = {**os.environ, "PROJECT": str(root), "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", DRIVER, door, step.phase.value, step.branch or "",
                           "done" if done else "during", *ids], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == -9, f"not killed at {step.key}: {proc.returncode} {proc.stdout} {proc.stderr[-2000:]}"


def rows_by_branch(pipe, ids: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in pipe.store().records.scan(["id", "branch"]):
        if row["id"] in ids:
            counts[row["branch"]] = counts.get(row["branch"], 0) + 1
    return counts


class Interrupted(BaseException):
    """Raised from the purge's hook in this process: the journal is left exactly as a kill there leaves it
    (a step is recorded done only after it happened); the real SIGKILLs are the subprocess ones."""


def interrupt_at(step: PurgeStep, done: bool):
    def on_event(event) -> None:
        if event.step == step and event.done == done:
            raise Interrupted(step.key)
    return on_event


@pytest.fixture(scope="module")
def chain(tmp_path_factory, ran_project):
    """The project, the purged conversation's text and id, and what each kill left (checked in the tests)."""
    root = ran_project.copy(tmp_path_factory.mktemp("hostile-purge") / "proj")
    path = create_branch_file(root, BRANCH, "main")
    body = path.read_text()
    path.write_text(body[:body.index("def overrides")] + OVERRIDE.lstrip("\n"))
    pipe = load(root)
    assert pipe.run(branch=BRANCH).status == "completed"
    # The conversation to purge and the lines only it holds (the demo's conversations share some lines,
    # which stay on disk with the conversations that still hold them).
    sources = pipe.records("chatgpt")

    def lines(rec) -> set[str]:
        return {line.strip()[:80] for line in rec.content.splitlines() if len(line.strip()) >= 12}

    def own_lines(rec) -> list[str]:
        return sorted(lines(rec) - {line for other in sources if other.id != rec.id for line in lines(other)})

    source = max(sorted(sources, key=lambda r: r.id), key=lambda r: len(own_lines(r)))
    needles = own_lines(source)
    assert needles
    world_before = [r.id for r in pipe.records("world-model")]
    data_dir = pipe.data_dir
    assert raw_hits(data_dir, needles)  # positive control: the text is on disk before the purge
    seen: dict[str, object] = {"root": root, "data_dir": data_dir, "needles": needles, "id": source.id,
                               "world_before": world_before}
    journal = PurgeJournal(data_dir)

    # 1. interrupted right after the journal is written: nothing deleted yet.
    with pytest.raises(Interrupted):
        pipe.app.purge([source.id[:8]], on_event=interrupt_at(PurgeStep(PurgePhase.JOURNALED), True))
    progress = journal.progress()
    targets = journal.targets(None)
    affected = sorted({r[0] for r in targets.rows})
    seen["after_journal"] = (progress.done, rows_by_branch(pipe, affected), targets)
    pipe.close()
    seen["status"] = json.loads(cli("status", "--json", "--project", str(root)).stdout)["unfinished_purge"]
    seen["status_text"] = cli("status", "--project", str(root)).stdout
    seen["doctor"] = json.loads(cli("doctor", "--json", "--project", str(root), check=False).stdout)
    first, second = sorted({r[2] for r in targets.rows})

    # 2. the same command again, SIGKILLed after the delete on the first of the two branches.
    kill_at(root, "purge", PurgeStep(PurgePhase.DELETE, first), True, [source.id[:8]])
    pipe = load(root)
    seen["after_delete"] = (journal.progress().done, rows_by_branch(pipe, affected), first, second)
    pipe.close()

    # 3. resumed, SIGKILLed inside the re-run of main (its Dagster run is under way).
    kill_at(root, "resume", PurgeStep(PurgePhase.RERUN, "main"), False)
    pipe = load(root)
    seen["after_rerun_kill"] = (journal.progress().done, [(r.id, r.status) for r in pipe.runs(limit=100)])

    # 4. resumed, interrupted during the sweep (the LLM cache is done, compaction is not).
    with pytest.raises(Interrupted):
        pipe.app.finish_interrupted_purge(on_event=interrupt_at(PurgeStep(PurgePhase.CACHE), True))
    seen["after_cache"] = (journal.progress().done, raw_hits(data_dir, needles))

    # 5. resumed, interrupted during compaction (one table rewritten, the others not).
    with pytest.raises(Interrupted):
        pipe.app.finish_interrupted_purge(on_event=interrupt_at(PurgeStep(PurgePhase.COMPACTION), False))
    seen["after_compaction_kill"] = (journal.progress().done, raw_hits(data_dir, needles))
    pipe.close()

    # 6. `synthex doctor --repair` finishes it.
    seen["repair"] = json.loads(cli("doctor", "--repair", "--json", "--project", str(root)).stdout)
    seen["hits_after"] = raw_hits(data_dir, needles)
    seen["again"] = cli("purge", source.id[:8], "--project", str(root), check=False)
    return seen


def test_killed_after_the_journal_nothing_is_deleted_and_status_says_how_to_finish(chain):
    done, rows, targets = chain["after_journal"]
    assert done == [PurgeStep(PurgePhase.JOURNALED).key]
    assert set(rows) == {"main", BRANCH} and sum(rows.values()) == len(targets.rows)  # all rows still there
    assert chain["id"] in targets.roots and targets.needle_prints and targets.text_digests
    status = chain["status"]
    assert status["roots"] == [chain["id"]] and "synthex purge --resume" in status["message"]
    assert "next step: ledger" in status["message"]
    assert status["message"] in chain["status_text"]
    doctor = chain["doctor"]
    assert doctor["healthy"] is False and doctor["unfinished_purge"]["purge_id"] == status["purge_id"]


def test_killed_after_the_delete_on_one_branch_the_other_keeps_its_rows(chain):
    done, rows, first, second = chain["after_delete"]
    assert PurgeStep(PurgePhase.DELETE, first).key in done
    assert PurgeStep(PurgePhase.DELETE, second).key not in done
    assert first not in rows and rows.get(second, 0) > 0  # really half-done


def test_killed_inside_a_rerun_leaves_a_run_running_that_the_completion_closes(chain):
    done, runs = chain["after_rerun_kill"]
    assert PurgeStep(PurgePhase.RERUN, "main").key not in done
    running = [rid for rid, status in runs if status == "running"]
    assert len(running) == 1  # the killed re-run's Dagster run
    pipe = load(chain["root"])
    try:
        final = {r.id: (r.status, r.error or "") for r in pipe.runs(limit=100)}
    finally:
        pipe.close()
    assert final[running[0]][0] == "failed" and final[running[0]][1].startswith("killed")
    assert all(status != "running" for status, _ in final.values())


def test_killed_during_the_sweep_and_compaction_the_text_is_still_on_disk(chain):
    done, hits = chain["after_cache"]
    assert PurgeStep(PurgePhase.CACHE).key in done and PurgeStep(PurgePhase.COMPACTION).key not in done
    assert any(".lance" in f for f in hits)  # old fragments still hold it: the kill landed mid-way
    # The journal names the text by prints only (issue 32): it holds none of it, even mid-way.
    assert not any("purge-journal" in f for f in hits)
    done, hits = chain["after_compaction_kill"]
    assert PurgeStep(PurgePhase.COMPACTION).key not in done and hits


def test_doctor_repair_finishes_it_and_no_byte_of_the_text_is_left(chain):
    repair = chain["repair"]
    assert repair["repaired"] is True and repair["unfinished_purge"] is not None
    assert chain["hits_after"] == {}
    assert not (chain["data_dir"] / "purge-journal").exists()
    assert json.loads(cli("doctor", "--json", "--project", str(chain["root"])).stdout)["healthy"] is True
    pipe = load(chain["root"])
    try:
        assert pipe.get(chain["id"]) is None
        assert pipe.records("world-model")  # recomputed without it
        assert pipe.plan().steps == [] and pipe.plan(branch=BRANCH).steps == []
    finally:
        pipe.close()
    status = json.loads(cli("status", "--json", "--project", str(chain["root"])).stdout)
    assert status["unfinished_purge"] is None


def test_the_same_purge_again_says_it_was_purged(chain):
    again = chain["again"]
    assert again.returncode != 0 and "was purged at" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


# -- the journal itself ----------------------------------------------------------------------------

def _targets() -> PurgeTargets:
    return PurgeTargets(roots=["a" * 36], rows=[("a" * 36, "chatgpt", "main", "2024-01")], ledger=[],
                        source_key_hashes={"chatgpt": [source_key_hash("chatgpt", "conv-1")]}, text_digests=["d"],
                        raw_digests=[], needle_prints=[n.to_list() for n in prints_of(["my locker code is ZQX-4471"])],
                        id_prefixes=["aaaaaaaa"])


def test_an_encrypted_store_gets_an_encrypted_journal(tmp_path):
    from synthex_resources.encryption import StoreCipher, generate_key

    cipher = StoreCipher.from_text(generate_key())
    journal = PurgeJournal(tmp_path)
    journal.begin(_targets(), plan_steps(["main"], ["main"]), cipher)
    on_disk = b"".join(p.read_bytes() for p in journal.dir.iterdir())
    assert b"ZQX-4471" not in on_disk and b"conv-1" not in on_disk
    assert Needles(journal.targets(cipher).prints()).hit("my locker code is ZQX-4471")
    with pytest.raises(Exception, match="encrypted"):
        journal.targets(None)
    assert oct(journal.dir.stat().st_mode & 0o777) == "0o700"
    journal.finish()
    assert not journal.dir.exists() and journal.progress() is None


def test_a_plain_journal_holds_no_purged_text_yet_finds_it(tmp_path):
    journal = PurgeJournal(tmp_path)
    journal.begin(_targets(), plan_steps(["main"], ["main"]), None)
    on_disk = b"".join(p.read_bytes() for p in journal.dir.iterdir())
    assert b"ZQX-4471" not in on_disk and b"locker" not in on_disk and b"conv-1" not in on_disk
    needles = Needles(journal.targets(None).prints())
    assert needles.hit('{"text": "user: my locker code is ZQX-4471!"}') and not needles.hit("my locker code is ZQX-4472")
    assert needles.scrub("so my locker code is ZQX-4471, ok") == "so [purged], ok"


def test_a_journal_of_the_older_format_with_text_is_read_and_known_by_prints(tmp_path):
    journal = PurgeJournal(tmp_path)
    journal.dir.mkdir()
    old = {"roots": ["a" * 36], "rows": [["a" * 36, "chatgpt", "main", "2024-01"]], "ledger": [],
           "source_keys": {"chatgpt": ["conv-1"]}, "text_digests": [], "raw_digests": [],
           "needles": ["my locker code is ZQX-4471"], "id_prefixes": []}
    (journal.dir / "targets.json").write_text(json.dumps(old))
    targets = journal.targets(None)
    assert targets.source_key_hashes == {"chatgpt": [source_key_hash("chatgpt", "conv-1")]}
    assert Needles(targets.prints()).hit("my locker code is ZQX-4471")


def test_a_journal_killed_while_being_written_is_discarded(tmp_path):
    journal = PurgeJournal(tmp_path)
    journal.dir.mkdir()
    (journal.dir / "progress.json").write_text("{}")
    (journal.dir / "targets.json.tmp").write_text("my locker code is ZQX-4471")
    assert not journal.exists() and journal.progress() is None
    journal.discard_stale()
    assert not journal.dir.exists()
