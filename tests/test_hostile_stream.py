"""Issue 20, a stream that never stalls: a malformed or undatable line is set aside (quarantined, named by
file:line, kept in the data dir) and the lines after it flow; `remember` repairs a dead writer's half line
before it writes and never claims what it did not do; a sync reads at most `Limits.stream_batch_lines`
new lines; `synthex sync` prints import warnings as `synthex run` does.

Real parts: stream files and DuckDB / LanceDB / Dagster in tmp dirs, the CLI through click's CliRunner, a
real source sensor tick. One project is built and synced once per module for the tests that only read it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import cli, go_offline, load

from synthex.core.errors import BadInputError, SourceError
from synthex.core.hashing import fingerprint, materialization_key, record_id
from synthex.core.sources.quarantine import QuarantineLedger
from synthex.core.sources.stream import StreamOrigin, append_lines, encode_line

PIPELINE = '''
from synthex import Limits, Pipeline

pipeline = Pipeline("live", agent="tester", limits=Limits({limits}))
pipeline.source("inbox", stream="inbox.jsonl")
pipeline.transform("notes", from_="inbox", fn=lambda r: r.content)
pipeline.output("search", from_=["notes"], surface="search")
'''

GOOD = [{"id": "ferry", "text": "the harbour ferry leaves at nine", "created_at": "2024-03-01T08:00:00Z"},
        {"text": "my sister lives in Porto", "created_at": "2024-03-02T08:00:00Z"},
        {"id": 7, "text": "the cello lesson moved to friday", "created_at": "2024-04-03T08:00:00Z"}]
# Every way a line can be unusable, each named with its line number (the good lines are 1, 4 and 11).
BAD = [b'{"text": "a writer died here', b"not json at all", b"[1, 2, 3]", b'{"text": 42, "created_at": "2024-03-01"}',
       b'{"text": "dated yesterday", "created_at": "yesterday"}', b'{"text": "no date at all"}',
       b'{"deleted": true}', b'{"text": "\xff\xfe", "created_at": "2024-03-01"}']
BAD_REASONS = ["invalid JSON", "invalid JSON", "expected an object", "'text'", "'yesterday'", "missing required field",
               "a deletion needs the 'id'", "not UTF-8"]


def line(row: dict) -> bytes:
    return json.dumps(row).encode() + b"\n"


def write_hostile_stream(path: Path) -> None:
    """good, 2 bad, good, 6 bad, good: 11 lines."""
    path.write_bytes(line(GOOD[0]) + b"\n".join(BAD[:2]) + b"\n" + line(GOOD[1]) + b"\n".join(BAD[2:]) + b"\n"
                     + line(GOOD[2]))


def project(root: Path, limits: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE.format(limits=limits)))
    return root


# -- the reader: quarantine, bounds, batches (no store) -----------------------------------------------

def test_bad_lines_are_set_aside_by_file_and_line_and_the_good_ones_are_the_same_items(tmp_path):
    hostile, clean = tmp_path / "hostile.jsonl", tmp_path / "clean.jsonl"
    write_hostile_stream(hostile)
    clean.write_bytes(b"".join(line(g) for g in GOOD))
    reader = StreamOrigin(hostile, source="inbox", data_dir=tmp_path / "data")
    items = reader.items()
    # The same keys, texts and dates as the stream without its bad lines: the same record ids.
    assert [(i.key, i.content, i.created_at) for i in items] == [
        (i.key, i.content, i.created_at) for i in StreamOrigin(clean).items()]
    quarantine = reader.quarantine()
    assert [q.line for q in quarantine.lines] == [2, 3, 5, 6, 7, 8, 9, 10] and quarantine.total == 8
    for q, reason in zip(quarantine.lines, BAD_REASONS, strict=True):
        assert q.file == str(hostile) and reason in q.reason, (q, reason)
    assert f"{hostile}:7: 'created_at' is a string 'yesterday'" in "\n".join(reader.warnings())

    # Kept in the data dir for other processes, without the lines' text; gone once the lines are fixed.
    ledger = QuarantineLedger(tmp_path / "data")
    assert ledger.load("inbox", str(hostile)) == quarantine
    assert "dated yesterday" not in ledger.path("inbox").read_text()
    hostile.write_bytes(b"".join(line(g) for g in GOOD))  # rewritten: read again from the start
    fresh = StreamOrigin(hostile, source="inbox", data_dir=tmp_path / "data")
    assert len(fresh.items()) == 3 and not fresh.quarantine()
    assert not ledger.path("inbox").exists()


def test_an_over_long_line_is_set_aside_unread_and_a_stream_that_is_not_a_file_is_one_line(tmp_path):
    path = tmp_path / "s.jsonl"
    long_row = {"text": "x" * 5000, "created_at": "2024-03-01"}
    path.write_bytes(line(long_row) + line(GOOD[0]))
    reader = StreamOrigin(path, source="s", data_dir=tmp_path / "data", line_bytes=1000)
    assert [i.key for i in reader.items()] == ["ferry"]
    (q,) = reader.quarantine().lines
    assert (q.line, q.reason) == (1, f"the line is {len(line(long_row))} bytes, over the limit of 1000 "
                                     "(Limits.stream_line_bytes)")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)  # opened without O_NONBLOCK, reading or appending would hang here
    with pytest.raises(SourceError, match="not a regular file"):
        StreamOrigin(fifo).items()
    with pytest.raises(SourceError, match="not a regular file"):
        append_lines(fifo, [GOOD[0]])
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(SourceError, match="cannot append to the stream: Is a directory"):
        append_lines(tmp_path / "dir.jsonl", [GOOD[0]])


def test_a_read_takes_at_most_a_batch_beyond_the_checkpoint_and_never_less_than_it(tmp_path):
    path = tmp_path / "s.jsonl"
    rows = [{"text": f"fact {n}", "created_at": f"2024-03-{n + 1:02d}"} for n in range(7)]
    append_lines(path, rows)

    def reader() -> StreamOrigin:  # a fresh process's reader
        return StreamOrigin(path, source="s", data_dir=tmp_path / "data", batch_lines=3)

    first = reader()
    assert [i.content for i in first.items()] == ["fact 0", "fact 1", "fact 2"] and first.waiting()
    assert [i.content for i in reader().items()] == ["fact 0", "fact 1", "fact 2"]  # nothing committed yet
    first.commit_position(first.read_position())
    second = reader()
    assert len(second.items()) == 6 and second.waiting()
    second.commit_position(second.read_position())
    third = reader()
    assert len(third.items()) == 7 and not third.waiting()
    assert len(first.items()) == 7  # a reader in a long-lived process moves on as the checkpoint moves


# -- append_lines / remember: half lines, concurrent writers, failed writes ---------------------------

def test_append_ends_a_dead_writers_half_line_first_so_both_lines_stand_alone(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(GOOD[0]) + b'{"text": "a writer di')
    assert append_lines(path, [GOOD[1]]) == len(b'{"text": "a writer di')
    assert path.read_bytes() == line(GOOD[0]) + b'{"text": "a writer di\n' + encode_line(GOOD[1])
    reader = StreamOrigin(path)
    assert [i.content for i in reader.items()] == [GOOD[0]["text"], GOOD[1]["text"]]
    assert [q.line for q in reader.quarantine().lines] == [2]
    assert append_lines(path, [GOOD[2]]) == 0  # the file ends with a newline now: nothing to repair


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "s.jsonl"
    big = "y" * 300_000  # several pipe-buffer sizes: one write each, under the lock

    def writer(n: int) -> None:
        for k in range(5):
            append_lines(path, [{"id": f"{n}-{k}", "text": big, "created_at": "2024-03-01"}])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader = StreamOrigin(path)
    assert len(reader.items()) == 30 and not reader.quarantine()


FULL_DISK_DRIVER = """
import resource, signal, sys
from pathlib import Path
from synthex.core.errors import SourceError
from synthex.core.sources.stream import append_lines
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write over the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 100, resource.RLIM_INFINITY))
try:
    append_lines(path, [{"text": "z" * 5000, "created_at": "2024-03-01"}])
except SourceError as exc:
    print(exc)
"""


def test_a_write_that_fails_half_way_is_undone(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(GOOD[0]) + b'{"half')
    before = path.read_bytes()
    out = subprocess.run([sys.executable, "-c", FULL_DISK_DRIVER, str(path)], capture_output=True, text=True,
                         timeout=60, env=os.environ | {"PYTHONPATH": str(Path(__file__).parents[1])})
    assert out.stdout.strip() == f"{path}: cannot append to the stream: File too large; nothing was written", out
    assert path.read_bytes() == before  # neither the repairing newline nor a part of the line stayed


def test_remember_refuses_a_line_that_would_be_set_aside_or_never_imported(tmp_path):
    root = project(tmp_path / "p", "stream_line_bytes=2000")
    pipe = load(root)
    with pytest.raises(BadInputError, match="over the limit of 2000"):
        pipe.remember("w" * 3000)
    (root / ".synthex").mkdir()
    (root / "inbox.jsonl").mkdir()  # the stream file cannot be appended to
    with pytest.raises(SourceError, match="cannot append to the stream"):
        pipe.remember("the ferry leaves at nine")
    assert list((root / "inbox.jsonl").iterdir()) == []


# -- end to end: sync, status, run, the sensor tick -----------------------------------------------

@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """A project whose stream has bad lines around good ones and a dead writer's half line at its end, then
    `remember` (CLI), then two `synthex sync` (CLI), each reading at most 12 lines (``stream_batch_lines``):
    (root, the remember output, the first sync's output, the second's)."""
    root = project(tmp_path_factory.mktemp("hostile") / "p", "stream_batch_lines=12")
    write_hostile_stream(root / "inbox.jsonl")
    with open(root / "inbox.jsonl", "ab") as handle:
        handle.write(b'{"text": "half a li')  # line 12, without its newline: a writer died
    with pytest.MonkeyPatch.context() as mp:
        go_offline(mp)
        remembered = cli("remember", "the passport renewal is due in May", "--created-at", "2024-04-20",
                         "--json", "--project", root)  # line 13
        yield root, remembered, cli("sync", "--project", root), cli("sync", "--project", root)


def test_the_lines_after_bad_ones_flow_into_memory_with_the_ids_they_would_have(synced, tmp_path):
    root, remembered, _, _ = synced
    said = json.loads(remembered.stdout)
    assert said["status"] == "queued for sync"
    assert said["warnings"] == [f"{root / 'inbox.jsonl'}: its last line had no newline (19 bytes: a writer died "
                                "mid-line); it was ended first so it stands alone, and is set aside (quarantined) "
                                "unless it is a whole line"]
    pipe = load(root)
    try:
        stored = {r.content: r.id for r in pipe.records("inbox")}
        version = pipe.steps["inbox"].version_hash()
        (tmp_path / "clean.jsonl").write_bytes(b"".join(line(g) for g in GOOD))  # the stream without its bad lines
        clean = StreamOrigin(tmp_path / "clean.jsonl")
        expected = {i.content: record_id(materialization_key("inbox", version, [fingerprint(i.content)], i.key))
                    for i in clean.items()}
        assert stored == expected | {"the passport renewal is due in May": said["record_id"]}
        assert pipe.search("cello lesson", k=1)[0].content == "the cello lesson moved to friday"
        assert pipe.search("passport renewal", k=1)[0].content == "the passport renewal is due in May"
    finally:
        pipe.close()


def test_sync_names_the_quarantined_lines_says_what_waits_and_prints_import_warnings_like_run(synced):
    root, _, first, second = synced
    stream = root / "inbox.jsonl"
    set_aside = f"9 line(s) set aside (quarantined) (first: {stream}:2: invalid JSON: Unterminated string starting at)"
    assert first.stdout.splitlines()[0] == (f"inbox: 3 new, 0 changed, 0 deleted (periods 2024-03, 2024-04); {set_aside}"
                                            "; more lines wait for the next sync (at most Limits.stream_batch_lines "
                                            "per sync)")
    assert second.stdout.splitlines()[0] == f"inbox: 1 new, 0 changed, 0 deleted (periods 2024-04); {set_aside}"
    warnings = [w for w in first.stderr.splitlines() if w.startswith("warning: ")]
    assert warnings[0] == (f"warning: {stream}:2: invalid JSON: Unterminated string starting at: line set aside "
                           "(quarantined); the lines after it are read")
    assert warnings[-1] == "warning: ... and 4 more (`synthex plan --json` lists them all)"
    assert [w for w in second.stderr.splitlines() if w.startswith("warning: ")] == warnings
    ran = cli("run", "--project", root)
    assert [w for w in ran.stderr.splitlines() if w.startswith("warning: ")] == warnings
    assert "everything up to date" in ran.stdout


def test_status_and_the_python_report_show_the_quarantine_until_it_is_fixed(synced):
    root, _, _, _ = synced
    stream = root / "inbox.jsonl"
    status = cli("status", "--project", root)
    assert ("source inbox: 9 line(s) set aside (quarantined) until fixed or removed; the lines after them are "
            "read:") in status.stdout
    assert f"  {stream}:7: 'created_at' is a string 'yesterday'" in status.stdout
    assert f"  {stream}:12: invalid JSON" in status.stdout  # the half line, ended by remember
    (entry,) = json.loads(cli("status", "--json", "--project", root).stdout)["quarantined"]
    assert entry["total"] == 9 and [q["line"] for q in entry["lines"]] == [2, 3, 5, 6, 7, 8, 9, 10, 12]
    pipe = load(root)
    try:
        report = pipe.sync()  # nothing new: the token shortcut, and still the lines set aside
        assert report.changes[0].token_unchanged and report.run.dagster_run_ids == []
        assert [(q.file, q.line) for q in report.quarantined][:2] == [(str(stream), 2), (str(stream), 3)]
        assert report.to_dict()["sources"][0]["quarantined"]["total"] == 9
    finally:
        pipe.close()


def test_the_source_sensor_tick_says_what_it_set_aside(tmp_path):
    from dagster import DagsterInstance, SkipReason, build_sensor_context

    from synthex_assets.definitions import build_definitions
    from synthex_assets.sensors import sensor_name

    root = project(tmp_path / "p")
    (root / "inbox.jsonl").write_bytes(b'{"text": "dated yesterday", "created_at": "yesterday"}\n')
    pipe = load(root)
    defs = build_definitions(pipe)
    instance = DagsterInstance.ephemeral()
    try:
        context = build_sensor_context(instance=instance, resources={"cdc": defs.resources["cdc"]}, definitions=defs)
        result = defs.get_sensor_def(sensor_name("inbox"))(context)
    finally:
        instance.dispose()
    assert isinstance(result, SkipReason)
    assert result.skip_message == (f"inbox: 0 new, 0 changed, 0 deleted; 1 line(s) set aside (quarantined) (first: "
                                   f"{root / 'inbox.jsonl'}:1: 'created_at' is a string 'yesterday', not a timestamp "
                                   "(expected epoch seconds or an ISO-8601 string))")


KILLED_WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, b'{"text": "half of a li')
open(sys.argv[2], "w").close()
os.kill(os.getpid(), 9)  # killed mid-line, at a known point: after the half line, before its newline
"""


def test_remember_after_a_writer_killed_mid_line(tmp_path):
    root = project(tmp_path / "p")
    stream, marker = root / "inbox.jsonl", tmp_path / "marker"
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(stream), str(marker)], timeout=60)
    assert proc.returncode == -signal.SIGKILL and marker.exists()
    assert stream.read_bytes() == b'{"text": "half of a li'  # the kill landed mid-line
    pipe = load(root)
    out = pipe.remember("the ferry leaves at nine", created_at="2024-03-01")
    assert out["status"] == "queued for sync" and "a writer died mid-line" in out["warnings"][0]
    assert [i.content for i in pipe.steps["inbox"].reader().items()] == ["the ferry leaves at nine"]
    assert [q.line for q in pipe.app.quarantined()[0].lines] == [1]
