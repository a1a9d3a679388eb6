"""``write_file_atomic``: the one way small state files (cursors, ledgers, journals, markers) are replaced."""

import stat

import pytest

from synthex.core.atomic_file import write_file_atomic


def test_a_file_is_replaced_whole_with_its_mode_and_no_temporary_left(tmp_path):
    target = tmp_path / "deep" / "cursor.json"
    write_file_atomic(target, "first")
    write_file_atomic(target, "sécond", fsync=True, mode=0o600)
    assert target.read_text(encoding="utf-8") == "sécond"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["cursor.json"]


def test_a_write_that_cannot_land_keeps_the_old_content_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "ledger"
    target.mkdir()  # a directory where the file should go: the rename fails
    (target / "kept").write_text("old")
    with pytest.raises(OSError):
        write_file_atomic(target, b"new")
    assert (target / "kept").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger"]
