"""Ids from data never become paths unsanitized: `../` and absolute ids stay inside the work dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_json
from test_eval_cli import fixture

from synthex.core.naming import path_segment


@pytest.mark.parametrize("hostile", ["../../../../../x", "/etc/passwd", "..", ".", "a/../../b", "", "x" * 300,
                                     "C:\\\\Windows", "conv\\x00null"])
def test_path_segment_is_one_safe_folder_name(tmp_path, hostile):
    segment = path_segment(hostile)
    assert "/" not in segment and "\\\\" not in segment and segment not in ("", ".", "..") and len(segment) <= 60
    assert (tmp_path / segment).resolve().parent == tmp_path.resolve()


def test_plain_ids_stay_readable_and_distinct_ids_stay_distinct():
    assert path_segment("conv-26") == "conv-26" and path_segment("e47becba_abs") == "e47becba_abs"
    assert path_segment("../x") != path_segment("..-x") != path_segment("x")


def test_a_hostile_sample_id_cannot_place_an_eval_workspace_outside_the_work_dir(tmp_path):
    from evals.architectures import resolve
    from evals.benchmarks.locomo.benchmark import evaluate_locomo

    samples = fixture()[:1]
    samples[0]["sample_id"] = "../../../../escaped"
    data = write_json(tmp_path / "data" / "locomo.json", samples)
    work = tmp_path / "deep" / "work"
    [result] = evaluate_locomo(data, resolve(["raw-bm25"], None), work)
    assert result["n_questions"] > 0
    assert not any((base / "escaped").exists() for base in (tmp_path, tmp_path.parent, Path("/")))
    made = [p for p in (work / "raw").iterdir()]
    assert len(made) == 1 and made[0].resolve().parent == (work / "raw").resolve()
