"""The shared benchmark files are found from any checkout: the variable first, then beside the checkout."""

from pathlib import Path

from evals.shared_data import ENV_VAR, LOCOMO_DEV7, shared_data_dir, shared_data_file


def test_the_variable_wins(tmp_path: Path) -> None:
    assert shared_data_file(LOCOMO_DEV7, {ENV_VAR: str(tmp_path)}) == tmp_path / "locomo" / "locomo10_dev7.json"


def test_beside_the_current_directory_when_not_beside_the_checkout(tmp_path: Path, monkeypatch) -> None:
    import evals.shared_data as shared_data

    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "clone").mkdir()
    monkeypatch.setattr(shared_data, "CHECKOUT", tmp_path / "elsewhere" / "repo")
    assert shared_data_dir({}, cwd=tmp_path / "clone") == tmp_path / "shared" / "data"
    # neither exists: the path beside the checkout, named in a caller's error
    assert shared_data_dir({}, cwd=tmp_path / "clone" / "sub") == tmp_path / "elsewhere" / "shared" / "data"
