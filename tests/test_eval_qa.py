"""QA accuracy: real openai client against the local fake server; refused offline."""


import pytest
from conftest import write_json
from fake_openai import FakeOpenAI
from test_eval_cli import fixture

from evals.architectures import resolve
from evals.benchmarks.locomo.benchmark import evaluate_locomo
from synthex.core.errors import SynthexError


def test_qa_accuracy_with_a_model_and_refused_offline(tmp_path, monkeypatch):
    data = write_json(tmp_path / "locomo10.json", fixture())
    archs = resolve(["raw-bm25"], None)
    with pytest.raises(SynthexError, match="needs a real LLM"):
        evaluate_locomo(data, archs, tmp_path / "work", qa=True, log=lambda m: None)
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        [result] = evaluate_locomo(data, archs, tmp_path / "work", qa=True, log=lambda m: None)
    qa = result["qa"]
    assert qa["n"] == 6 and qa["by_category"]["single-hop"]["n"] == 6
    # The fake answers with the top excerpt; the judge marks it correct when it names the gold speaker.
    assert 0.0 < qa["accuracy"] <= 1.0
    assert sum("CORRECT or WRONG" in p for p in server.prompts) == 6
