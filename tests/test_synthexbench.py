from evals.synthexbench import run


def test_synthexbench_v0_small(tmp_path):
    result = run(conversations=24, root=tmp_path)
    assert result["provenance_completeness"] == 1.0
    assert result["leaf_bypass_recall"] == 1.0
    assert result["leaf_bypass_phrases_absent_from_summaries"] == "3/3"
    assert result["multi_altitude_recall@5"]["summaries"] == 1.0
    assert 0.0 <= result["multi_altitude_recall@5"]["monthly"] <= 1.0
