"""Issue 32 item 7: one bad note never stops a notes folder. A note that is a link loop, is not UTF-8 or is
dated ``0000-00-00`` is set aside (file and reason) and the other notes sync; `synthex sync`, `synthex
status` and the source sensor's tick say so; fixed, the note syncs at the next sync.

Real parts: a notes folder in a tmp dir, the CLI through click's CliRunner (real DuckDB CDC state, Dagster
run, LanceDB store), a real sensor tick on an ephemeral Dagster instance."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from conftest import cli, load

from synthex.core.importers import load_source
from synthex.core.importers.base import Intake

PIPELINE = '''
from synthex import Pipeline

pipeline = Pipeline("notes", agent="tester")
pipeline.source("notes", folder="notes")
pipeline.output("search", from_=["notes"], surface="search")
'''
OLD = 1_600_000_000  # mtimes well in the past: the stat signature is the change test, no "racy" hashing


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (OLD, OLD))


def notes_folder(folder: Path) -> dict[str, str]:
    """Two good notes and three bad ones; the reason each bad one is set aside for."""
    write(folder / "ferry.md", b"---\ndate: 2024-03-01\n---\nThe harbour ferry leaves at nine")
    write(folder / "2024-03-02-cello.md", b"The cello lesson moved to Friday")
    write(folder / "zero.md", b"---\ndate: 0000-00-00\n---\nDated day zero")
    write(folder / "latin.md", b"caf\xe9 au lait")
    (folder / "loop.md").symlink_to("loop.md")  # a link to itself
    return {"zero.md": "front matter: 'date' is a string '0000-00-00', not a date",
            "latin.md": "not UTF-8 text", "loop.md": "cannot read file: Too many levels of symbolic links"}


def test_the_bad_notes_are_set_aside_with_file_and_reason_and_the_others_read(tmp_path):
    folder = tmp_path / "notes"
    reasons = notes_folder(folder)
    intake = Intake()
    assert sorted(item.key for item in load_source(folder, intake=intake)) == ["2024-03-02-cello.md", "ferry.md"]
    aside = {Path(note.file).name: note for note in intake.set_aside}
    assert sorted(aside) == sorted(reasons)
    for name, reason in reasons.items():
        assert aside[name].file == str(folder / name) and aside[name].reason.startswith(reason)
        assert "\n" not in str(aside[name])


def test_sync_status_and_the_sensor_tick_name_the_bad_notes_and_a_fixed_one_syncs_next_time(tmp_path):
    from dagster import DagsterInstance, SkipReason, build_sensor_context

    from synthex_assets.definitions import build_definitions
    from synthex_assets.sensors import sensor_name

    root = tmp_path / "p"
    root.mkdir()
    (root / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    reasons = notes_folder(root / "notes")

    synced = cli("sync", "--project", root)
    assert "notes: 2 new, 0 changed, 0 deleted (periods 2024-03); 3 note(s) set aside (quarantined) (first: " \
           f"{root / 'notes' / 'latin.md'}: not UTF-8 text" in synced.stdout
    for name in reasons:  # each named on stderr as `synthex run` names import warnings
        assert f"warning: {root / 'notes' / name}: {reasons[name]}" in synced.stderr

    status = cli("status", "--project", root)
    assert ("source notes: 3 note(s) set aside (quarantined) until fixed or removed; the other notes are read:"
            in status.stdout)
    for name, reason in reasons.items():
        assert f"  {root / 'notes' / name}: {reason}" in status.stdout

    pipe = load(root)
    defs = build_definitions(pipe)
    instance = DagsterInstance.ephemeral()
    try:  # nothing changed since the sync: the tick's skip message still names what is set aside
        context = build_sensor_context(instance=instance, resources={"cdc": defs.resources["cdc"]}, definitions=defs)
        tick = defs.get_sensor_def(sensor_name("notes"))(context)
    finally:
        instance.dispose()
        pipe.close()
    assert isinstance(tick, SkipReason)
    assert tick.skip_message.startswith(f"notes: unchanged; 3 note(s) set aside (quarantined) (first: "
                                        f"{root / 'notes' / 'latin.md'}: not UTF-8 text")

    write(root / "notes" / "zero.md", b"---\ndate: 2024-03-03\n---\nDated day zero")  # fixed
    fixed = cli("sync", "--project", root, "--json")
    assert '"new": 1' in fixed.stdout and '"total": 2' in fixed.stdout
    pipe = load(root)
    try:
        assert sorted(r.content for r in pipe.records("notes")) == [
            "Dated day zero", "The cello lesson moved to Friday", "The harbour ferry leaves at nine"]
    finally:
        pipe.close()
